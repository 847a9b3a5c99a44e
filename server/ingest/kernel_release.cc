#include "server/ingest/kernel_release.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

// Longer than any real release (the kernel's UTS field is 64 bytes, NUL included).
constexpr size_t kMaxRelease = 64;
constexpr size_t kMaxBanner = 1024;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// What `uname -r` can print: letters, digits and a few punctuation marks; never a path.
bool LooksLikeRelease(std::string_view r) {
  if (r.empty() || r.size() >= kMaxRelease) return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
           c == '_' || c == '+' || c == '~';
  });
}

std::string FirstWord(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && IsSpace(s[b])) ++b;
  size_t e = b;
  while (e < s.size() && !IsSpace(s[e])) ++e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string ReleaseFromVermagic(std::string_view vermagic) {
  std::string r = FirstWord(vermagic);
  return LooksLikeRelease(r) ? r : std::string();
}

std::string ReleaseFromBanner(std::string_view banner) {
  constexpr std::string_view kPrefix = "Linux version ";
  if (!banner.starts_with(kPrefix)) return {};
  banner.remove_prefix(kPrefix.size());
  // A release always follows directly; a banner with nothing but blanks there is not one.
  if (banner.empty() || IsSpace(banner[0])) return {};
  std::string r = FirstWord(banner);
  return LooksLikeRelease(r) ? r : std::string();
}

std::string ModinfoValue(std::string_view modinfo, std::string_view key) {
  while (!modinfo.empty()) {
    size_t end = modinfo.find('\0');
    std::string_view entry = modinfo.substr(0, end);
    if (entry.size() > key.size() && entry.starts_with(key) && entry[key.size()] == '=') {
      return std::string(entry.substr(key.size() + 1));
    }
    if (end == std::string_view::npos) break;
    modinfo.remove_prefix(end + 1);
  }
  return {};
}

ReleaseVote MajorityRelease(const std::vector<std::string>& releases) {
  ReleaseVote v;
  for (const auto& r : releases) {
    if (!r.empty()) ++v.counts[r];
  }
  for (const auto& [r, n] : v.counts) {  // in name order: the first of equal counts stays
    if (n > v.votes) {
      v.release = r;
      v.votes = n;
    }
  }
  return v;
}

absl::StatusOr<std::optional<std::string>> LinuxBannerOf(Elf* elf) {
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF) return absl::InvalidArgumentError("not an ELF file");
  std::optional<GElf_Sym> banner;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && !banner; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (d == nullptr) continue;
    const size_t n = std::min<size_t>(sh.sh_size / sh.sh_entsize, d->d_size / sh.sh_entsize);
    for (size_t i = 1; i < n; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(d, static_cast<int>(i), &sym) == nullptr) break;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (name != nullptr && std::string_view(name) == "linux_banner" && GELF_ST_TYPE(sym.st_info) == STT_OBJECT) {
        banner = sym;
        break;
      }
    }
  }
  if (!banner || banner->st_shndx == SHN_UNDEF || banner->st_shndx >= SHN_LORESERVE) return std::nullopt;
  Elf_Scn* scn = elf_getscn(elf, banner->st_shndx);
  GElf_Shdr sh;
  if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || sh.sh_type == SHT_NOBITS) return std::nullopt;
  // The symbol's bytes, inside its section, inside the file: every bound checked before reading.
  if (banner->st_value < sh.sh_addr || banner->st_value - sh.sh_addr >= sh.sh_size) return std::nullopt;
  const uint64_t off_in_section = banner->st_value - sh.sh_addr;
  size_t elf_size = 0;
  if (elf_rawfile(elf, &elf_size) == nullptr) return absl::InvalidArgumentError("cannot read the ELF image");
  if (sh.sh_offset > elf_size || sh.sh_size > elf_size - sh.sh_offset) {
    return absl::InvalidArgumentError("the section holding linux_banner extends beyond the end of the file");
  }
  uint64_t want = banner->st_size ? banner->st_size : kMaxBanner;
  want = std::min<uint64_t>({want, kMaxBanner, sh.sh_size - off_in_section});
  Elf_Data* d = elf_getdata_rawchunk(elf, static_cast<int64_t>(sh.sh_offset + off_in_section), want, ELF_T_BYTE);
  if (d == nullptr || d->d_buf == nullptr) return absl::InvalidArgumentError("cannot read linux_banner's bytes");
  std::string_view text(static_cast<const char*>(d->d_buf), d->d_size);
  return std::string(text.substr(0, text.find('\0')));
}

}  // namespace symdex::ingest
