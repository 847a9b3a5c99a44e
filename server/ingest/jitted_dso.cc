#include "server/ingest/jitted_dso.h"

#include <elf.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "server/common/strings.h"
#include "server/ingest/elf_symbols.h"

namespace symdex::ingest {
namespace {

namespace fs = std::filesystem;
template <typename T>
std::optional<T> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A file cut short says so, rather than libelf's "no symbol table" or "bad section header": the
// section header table (ELF64 or ELF32, host byte order -- other orders are left to libelf) must
// end inside the file.
std::optional<std::string> TruncatedElf(std::string_view image) {
  if (image.size() < EI_NIDENT || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0) return std::nullopt;
  const bool host_le = std::endian::native == std::endian::little;
  if (image[EI_DATA] != (host_le ? ELFDATA2LSB : ELFDATA2MSB)) return std::nullopt;
  uint64_t shoff = 0, need_hdr = 0, shentsize = 0, shnum = 0;
  if (image[EI_CLASS] == ELFCLASS64) {
    need_hdr = sizeof(Elf64_Ehdr);
    if (image.size() < need_hdr) return StrCat("truncated: ", image.size(), " bytes, shorter than the ELF header");
    Elf64_Ehdr eh;
    std::memcpy(&eh, image.data(), sizeof eh);
    shoff = eh.e_shoff, shentsize = eh.e_shentsize, shnum = eh.e_shnum;
  } else if (image[EI_CLASS] == ELFCLASS32) {
    need_hdr = sizeof(Elf32_Ehdr);
    if (image.size() < need_hdr) return StrCat("truncated: ", image.size(), " bytes, shorter than the ELF header");
    Elf32_Ehdr eh;
    std::memcpy(&eh, image.data(), sizeof eh);
    shoff = eh.e_shoff, shentsize = eh.e_shentsize, shnum = eh.e_shnum;
  } else {
    return std::nullopt;
  }
  if (shoff == 0 || shnum == 0) return std::nullopt;  // e_shnum 0 may mean "in section 0": libelf decides
  if (shoff > image.size() || shentsize * shnum > image.size() - shoff) {
    return StrCat("truncated: the section headers end at byte ", shoff + shentsize * shnum, " but the file has ",
                  image.size());
  }
  return std::nullopt;
}

}  // namespace

bool LooksLikeJittedDso(std::string_view name) {
  return name.size() > 10 && name.starts_with("jitted-") && name.ends_with(".so");
}

std::optional<JittedDsoName> ParseJittedDsoName(std::string_view file_name) {
  if (!LooksLikeJittedDso(file_name)) return std::nullopt;
  std::string_view mid = file_name.substr(7, file_name.size() - 7 - 3);  // "<pid>-<idx>"
  size_t dash = mid.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto pid = ParseDecimal<uint32_t>(mid.substr(0, dash));
  auto idx = ParseDecimal<uint64_t>(mid.substr(dash + 1));
  if (!pid || !idx) return std::nullopt;
  return JittedDsoName{*pid, *idx};
}

absl::StatusOr<JittedDso> ParseJittedDso(std::string& image, const std::string& path) {
  JittedDso out;
  out.path = path;
  out.file_size = image.size();
  out.name = ParseJittedDsoName(fs::path(path).filename().string());
  if (auto cut = TruncatedElf(image)) return absl::InvalidArgumentError(StrCat(path, ": ", *cut));
  auto elf = ReadElfSymbols(image);
  if (!elf.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", elf.status().message(),
                                             image.size() < 64 ? StrCat(" (only ", image.size(), " bytes)") : ""));
  }
  if (!elf->build_id || elf->build_id->empty()) {
    return absl::InvalidArgumentError(StrCat(path,
                                             ": no NT_GNU_BUILD_ID note (or a malformed one) in its SHT_NOTE "
                                             "sections"));
  }
  out.build_id = *elf->build_id;
  for (const auto& s : elf->symbols) {
    if (!s.name.empty()) {
      out.symbol = s.name;
      break;
    }
  }
  return out;
}

std::vector<SharedDsoId> SharedDsoIds(const std::vector<JittedDso>& dsos) {
  std::map<std::string, std::vector<size_t>> by_id;
  for (size_t i = 0; i < dsos.size(); ++i) by_id[dsos[i].build_id.ToHex()].push_back(i);
  std::vector<SharedDsoId> out;
  for (auto& [id, idx] : by_id) {
    if (idx.size() < 2) continue;
    std::set<std::string> names;
    for (size_t i : idx) names.insert(dsos[i].symbol);
    out.push_back(SharedDsoId{id, idx, std::vector<std::string>(names.begin(), names.end())});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SharedDsoId& a, const SharedDsoId& b) { return a.dsos.size() > b.dsos.size(); });
  return out;
}

}  // namespace symdex::ingest
