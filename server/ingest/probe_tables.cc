#include "server/ingest/probe_tables.h"

#include <fmt/core.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "server/common/byte_reader.h"
#include "server/common/elf_handle.h"
#include "server/common/kernel_arch.h"
#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

// More fentry sites than any kernel has (6.1: ~38k in vmlinux); a table claiming more is corrupt.
constexpr uint64_t kMaxEntries = uint64_t{1} << 24;

struct Section {
  std::string name;
  GElf_Shdr hdr{};
  Elf_Scn* scn = nullptr;
};

std::string_view Bytes(const Section& s) {
  if (s.hdr.sh_type == SHT_NOBITS || s.scn == nullptr) return {};
  Elf_Data* d = elf_rawdata(s.scn, nullptr);
  if (d == nullptr || d->d_buf == nullptr) return {};
  return {static_cast<const char*>(d->d_buf), d->d_size};
}

class ProbeElfReader {
 public:
  ProbeElfReader(Elf* elf, const GElf_Ehdr& eh, std::span<char> image) : elf_(elf), eh_(eh), image_(image) {}

  absl::Status LoadSections() {
    size_t n = 0, shstrndx = 0;
    if (elf_getshdrnum(elf_, &n) != 0) return LibelfError("bad section count");
    if (elf_getshdrstrndx(elf_, &shstrndx) != 0) return LibelfError("bad section header table");
    const uint64_t size = image_.size();
    const uint64_t headers = eh_.e_shnum != 0 ? eh_.e_shnum : (eh_.e_shoff != 0 ? 1 : 0);
    if (eh_.e_shoff > size || headers > (size - eh_.e_shoff) / std::max<uint64_t>(eh_.e_shentsize, 1)) {
      return absl::InvalidArgumentError("section headers beyond the end of the file: truncated or corrupt");
    }
    sections_.resize(n);
    for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
      const size_t idx = elf_ndxscn(scn);
      if (idx >= n) continue;
      Section& s = sections_[idx];
      if (gelf_getshdr(scn, &s.hdr) == nullptr) return LibelfError("bad section header");
      const char* nm = elf_strptr(elf_, shstrndx, s.hdr.sh_name);
      s.name = nm ? nm : "";
      s.scn = scn;
      if (s.hdr.sh_type != SHT_NOBITS && (s.hdr.sh_offset > size || s.hdr.sh_size > size - s.hdr.sh_offset)) {
        return absl::InvalidArgumentError(
            StrCat("section ", s.name, " extends beyond the end of the file: truncated or corrupt"));
      }
      if (s.hdr.sh_type == SHT_SYMTAB) symtab_ = idx;
    }
    return absl::OkStatus();
  }

  std::endian Order() const { return eh_.e_ident[EI_DATA] == ELFDATA2MSB ? std::endian::big : std::endian::little; }
  size_t WordSize() const { return eh_.e_ident[EI_CLASS] == ELFCLASS32 ? 4 : 8; }

  // vmlinux: the values of the named symbols (one pass over .symtab).
  absl::StatusOr<std::map<std::string, uint64_t, std::less<>>> SymbolValues(
      const std::vector<std::string_view>& wanted) {
    std::map<std::string, uint64_t, std::less<>> out;
    if (symtab_ == 0) return absl::InvalidArgumentError("no symbol table (.symtab): stripped?");
    const Section& st = sections_[symtab_];
    Elf_Data* data = elf_getdata(st.scn, nullptr);
    if (data == nullptr || st.hdr.sh_entsize == 0) return LibelfError("cannot read .symtab");
    const size_t count = st.hdr.sh_size / st.hdr.sh_entsize;
    for (size_t i = 1; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) return LibelfError("bad symbol entry");
      if (sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf_, st.hdr.sh_link, sym.st_name);
      if (name == nullptr || name[0] != '_') continue;  // every wanted name starts with '_'
      for (std::string_view w : wanted) {
        if (w == name) out.emplace(std::string(w), sym.st_value);
      }
    }
    return out;
  }

  // vmlinux: the words in [start, stop), from the allocated section that holds them.
  absl::StatusOr<std::vector<uint64_t>> WordsBetween(uint64_t start, uint64_t stop, std::string_view what) {
    if (stop < start) return absl::InvalidArgumentError(StrCat(what, ": end before start"));
    for (const Section& s : sections_) {
      if (!(s.hdr.sh_flags & SHF_ALLOC) || start < s.hdr.sh_addr || start - s.hdr.sh_addr > s.hdr.sh_size) continue;
      if (stop - s.hdr.sh_addr > s.hdr.sh_size) continue;
      std::string_view bytes = Bytes(s);
      if (bytes.size() < s.hdr.sh_size) {
        return absl::InvalidArgumentError(StrCat(what, " is in ", s.name, ", which has no contents in this file"));
      }
      const uint64_t n = (stop - start) / WordSize();
      if (n > kMaxEntries) return absl::InvalidArgumentError(StrCat(what, ": ", n, " entries is not plausible"));
      ByteReader r(bytes.substr(start - s.hdr.sh_addr, n * WordSize()), Order());
      std::vector<uint64_t> out;
      out.reserve(n);
      for (uint64_t i = 0; i < n; ++i) out.push_back(WordSize() == 4 ? r.Int<uint32_t>() : r.Int<uint64_t>());
      if (!r.ok()) return absl::InvalidArgumentError(StrCat(what, ": truncated"));
      // An image linked with --no-apply-dynamic-relocs holds zeros where its R_*_RELATIVE
      // relocations put addresses at boot: the addends are the values.
      ASSIGN_OR_RETURN(const auto* relative, RelativeRelocations());
      if (!relative->empty()) {
        for (uint64_t i = 0; i < n; ++i) {
          if (out[i] != 0) continue;
          if (auto it = relative->find(start + i * WordSize()); it != relative->end()) out[i] = it->second;
        }
      }
      return out;
    }
    return absl::InvalidArgumentError(StrCat(what, ": no section holds [", Hex(start), ", ", Hex(stop), ")"));
  }

  // A module: the places the relocations of section `name` point at (one per table entry).
  absl::StatusOr<std::vector<ProbePlace>> RelocatedPlaces(std::string_view name, std::vector<std::string>& notes) {
    std::vector<ProbePlace> out;
    size_t target = 0;
    for (size_t i = 1; i < sections_.size(); ++i) {
      if (sections_[i].name == name) target = i;
    }
    if (target == 0) return out;
    size_t skipped = 0;
    for (const Section& rs : sections_) {
      if (rs.hdr.sh_type != SHT_RELA || rs.hdr.sh_info != target) continue;
      if (rs.hdr.sh_link >= sections_.size() || sections_[rs.hdr.sh_link].hdr.sh_type != SHT_SYMTAB) {
        return absl::InvalidArgumentError(StrCat(rs.name, " does not refer to the symbol table"));
      }
      const Section& st = sections_[rs.hdr.sh_link];
      Elf_Data* rel = elf_getdata(rs.scn, nullptr);
      Elf_Data* syms = elf_getdata(st.scn, nullptr);
      if (rel == nullptr || syms == nullptr || rs.hdr.sh_entsize == 0)
        return LibelfError(StrCat("cannot read ", rs.name));
      const uint64_t n = rs.hdr.sh_size / rs.hdr.sh_entsize;
      if (n > kMaxEntries) return absl::InvalidArgumentError(StrCat(rs.name, ": ", n, " entries is not plausible"));
      for (uint64_t i = 0; i < n; ++i) {
        GElf_Rela r;
        if (gelf_getrela(rel, static_cast<int>(i), &r) == nullptr) return LibelfError(StrCat("bad entry in ", rs.name));
        if (!IsAbsoluteWord(GELF_R_TYPE(r.r_info))) {
          ++skipped;
          continue;
        }
        GElf_Sym sym;
        if (gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym) == nullptr || sym.st_shndx == SHN_UNDEF ||
            sym.st_shndx >= sections_.size()) {
          ++skipped;
          continue;
        }
        out.push_back({sections_[sym.st_shndx].name, sym.st_value + static_cast<uint64_t>(r.r_addend)});
      }
    }
    if (skipped) notes.push_back(StrCat(skipped, " ", name, " relocations not applied (type or symbol unsupported)"));
    return out;
  }

  // A linked image's R_*_RELATIVE relocations (.rela.dyn and any other SHT_RELA section of
  // dynamic relocations): place -> addend. Read once; empty for an image without them.
  absl::StatusOr<const std::unordered_map<uint64_t, uint64_t>*> RelativeRelocations() {
    if (relative_) return &*relative_;
    relative_.emplace();
    const uint64_t relative_type = eh_.e_machine == EM_AARCH64  ? R_AARCH64_RELATIVE
                                   : eh_.e_machine == EM_X86_64 ? R_X86_64_RELATIVE
                                                                : 0;
    if (eh_.e_type != ET_DYN || relative_type == 0) return &*relative_;
    for (const Section& rs : sections_) {
      // Dynamic relocations apply to the image as loaded: no target section (sh_info 0).
      if (rs.hdr.sh_type != SHT_RELA || rs.hdr.sh_info != 0 || !(rs.hdr.sh_flags & SHF_ALLOC)) continue;
      Elf_Data* rel = elf_getdata(rs.scn, nullptr);
      if (rel == nullptr || rs.hdr.sh_entsize == 0) return LibelfError(StrCat("cannot read ", rs.name));
      const uint64_t n = rs.hdr.sh_size / rs.hdr.sh_entsize;
      if (n > kMaxEntries) return absl::InvalidArgumentError(StrCat(rs.name, ": ", n, " entries is not plausible"));
      for (uint64_t i = 0; i < n; ++i) {
        GElf_Rela r;
        if (gelf_getrela(rel, static_cast<int>(i), &r) == nullptr) return LibelfError(StrCat("bad entry in ", rs.name));
        if (GELF_R_TYPE(r.r_info) == relative_type) relative_->emplace(r.r_offset, static_cast<uint64_t>(r.r_addend));
      }
    }
    return &*relative_;
  }

  // The entry layout `arch`'s rows show in `records` (kernel_arch.h: the first row any record
  // shows, else the last), then each record turned into its ftrace site.
  const EntryLayout* SitesFromRecords(const KernelArch& arch, std::vector<ProbePlace>& records) {
    if (arch.layouts.empty()) return nullptr;
    const EntryLayout* layout = &arch.layouts.back();
    if (!records.empty()) {
      LoadFunctionStarts();
      for (const EntryLayout& l : arch.layouts.first(arch.layouts.size() - 1)) {
        if (std::any_of(records.begin(), records.end(), [&](const ProbePlace& r) { return Shows(arch, l, r); })) {
          layout = &l;
          break;
        }
      }
    }
    for (ProbePlace& r : records) {
      uint64_t site = r.addr + layout->site_after_record;
      if (layout->skip_landing_pad_at != 0 && IsLandingPad(arch, r, r.addr + layout->skip_landing_pad_at)) site += 4;
      r.addr = site;
    }
    return layout;
  }

  bool HasSection(std::string_view name) const {
    for (const Section& s : sections_) {
      if (s.name == name) return true;
    }
    return false;
  }

  // The bytes of the first section named `name` ("" when there is none).
  std::string_view SectionBytes(std::string_view name) const {
    for (const Section& s : sections_) {
      if (s.name == name) return Bytes(s);
    }
    return {};
  }

  // A module: whole sections as areas (those named exactly, or with the prefix when `prefix`).
  std::vector<ProbeArea> SectionAreas(std::string_view name, bool prefix, bool exec_only) const {
    std::vector<ProbeArea> out;
    for (const Section& s : sections_) {
      const bool match = prefix ? s.name.starts_with(name) : s.name == name;
      if (!match || !(s.hdr.sh_flags & SHF_ALLOC) || s.hdr.sh_size == 0) continue;
      if (exec_only && !(s.hdr.sh_flags & SHF_EXECINSTR)) continue;
      out.push_back({s.name, 0, s.hdr.sh_size, s.name});
    }
    return out;
  }

 private:
  bool IsAbsoluteWord(uint64_t type) const {
    switch (eh_.e_machine) {
      case EM_X86_64:
        return type == R_X86_64_64;
      case EM_AARCH64:
        return type == R_AARCH64_ABS64;
      default:
        return false;
    }
  }
  static std::string Hex(uint64_t v) { return fmt::format("{:#x}", v); }

  // The start of every function symbol in an executable section: (section name, offset) in a
  // module, ("", address) in a linked image, as ProbePlace gives places.
  void LoadFunctionStarts() {
    if (starts_loaded_) return;
    starts_loaded_ = true;
    if (symtab_ == 0) return;
    const Section& st = sections_[symtab_];
    Elf_Data* data = elf_getdata(st.scn, nullptr);
    if (data == nullptr || st.hdr.sh_entsize == 0) return;
    const size_t count = st.hdr.sh_size / st.hdr.sh_entsize;
    for (size_t i = 1; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) return;
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= sections_.size()) {
        continue;
      }
      const Section& s = sections_[sym.st_shndx];
      if (!(s.hdr.sh_flags & SHF_EXECINSTR)) continue;
      starts_.emplace(eh_.e_type == ET_REL ? std::string_view(s.name) : std::string_view(), sym.st_value);
    }
  }

  bool FunctionAt(const ProbePlace& p, uint64_t addr) const { return starts_.count({p.section, addr}) != 0; }

  // The 32-bit word at `addr` of the place's space (a module's section, or the image's
  // addresses); nullopt where the file holds no such bytes.
  std::optional<uint32_t> WordAt(const ProbePlace& p, uint64_t addr) const {
    for (const Section& s : sections_) {
      if (!(s.hdr.sh_flags & SHF_EXECINSTR)) continue;
      uint64_t off = addr;
      if (p.section.empty()) {
        if (eh_.e_type == ET_REL || addr < s.hdr.sh_addr) continue;
        off = addr - s.hdr.sh_addr;
      } else if (s.name != p.section) {
        continue;
      }
      std::string_view bytes = Bytes(s);
      if (off >= bytes.size() || bytes.size() - off < 4) continue;
      ByteReader r(bytes.substr(off, 4), Order());
      return r.Int<uint32_t>();
    }
    return std::nullopt;
  }

  // Whether the architecture's landing pad is at `addr` of the place's space.
  bool IsLandingPad(const KernelArch& arch, const ProbePlace& p, uint64_t addr) const {
    if (arch.landing_pad_mask == 0) return false;
    auto w = WordAt(p, addr);
    return w && (*w & arch.landing_pad_mask) == arch.landing_pad_word;
  }

  // Whether record `r` has layout `l`'s shape (kernel_arch.h EntryLayout::pre_words).
  bool Shows(const KernelArch& arch, const EntryLayout& l, const ProbePlace& r) const {
    if (l.pre_words != 0) return FunctionAt(r, r.addr + uint64_t{l.pre_words} * 4);
    if (l.pad_before_record != 0) {
      return r.addr >= l.pad_before_record && FunctionAt(r, r.addr - l.pad_before_record) &&
             IsLandingPad(arch, r, r.addr - l.pad_before_record);
    }
    return FunctionAt(r, r.addr);
  }

  Elf* elf_;
  GElf_Ehdr eh_;
  std::span<char> image_;
  std::vector<Section> sections_;
  size_t symtab_ = 0;
  std::optional<std::unordered_map<uint64_t, uint64_t>> relative_;
  bool starts_loaded_ = false;
  std::set<std::pair<std::string_view, uint64_t>> starts_;
};

// The blacklist areas of the generic kprobes code (kernel/kprobes.c populate_kprobe_blacklist).
constexpr BoundedText kGenericBlacklist[] = {{"__kprobes_text_start", "__kprobes_text_end", ".kprobes.text"},
                                             {"__noinstr_text_start", "__noinstr_text_end", ".noinstr.text"}};

absl::Status ReadLinked(ProbeElfReader& rd, const KernelArch* arch, ProbeTables& out) {
  std::vector<std::string_view> wanted = {"__start_mcount_loc",      "__stop_mcount_loc", "__start_kprobe_blacklist",
                                          "__stop_kprobe_blacklist", "_sinittext",        "_einittext"};
  std::vector<BoundedText> areas(std::begin(kGenericBlacklist), std::end(kGenericBlacklist));
  if (arch != nullptr) areas.insert(areas.end(), arch->blacklist_areas.begin(), arch->blacklist_areas.end());
  for (const BoundedText& b : areas) {
    wanted.push_back(b.start);
    wanted.push_back(b.end);
  }
  ASSIGN_OR_RETURN(auto v, rd.SymbolValues(wanted));
  auto pair = [&](std::string_view a, std::string_view b) -> std::optional<std::pair<uint64_t, uint64_t>> {
    auto x = v.find(a), y = v.find(b);
    if (x == v.end() || y == v.end() || y->second < x->second) return std::nullopt;
    return std::make_pair(x->second, y->second);
  };
  if (auto m = pair("__start_mcount_loc", "__stop_mcount_loc")) {
    ASSIGN_OR_RETURN(auto sites, rd.WordsBetween(m->first, m->second, "__mcount_loc"));
    out.fentry_known = true;
    out.fentry.reserve(sites.size());
    for (uint64_t a : sites) {
      if (a != 0) out.fentry.push_back({"", a});  // zeroed entries: sites the build dropped
    }
  }
  if (auto b = pair("__start_kprobe_blacklist", "__stop_kprobe_blacklist")) {
    ASSIGN_OR_RETURN(auto fns, rd.WordsBetween(b->first, b->second, "the kprobe blacklist"));
    for (uint64_t a : fns) out.blacklist.push_back({"", a});
  }
  for (const BoundedText& b : areas) {
    if (auto a = pair(b.start, b.end); a && a->second > a->first) {
      out.blacklist_areas.push_back({"", a->first, a->second, std::string(b.what)});
    }
  }
  if (auto i = pair("_sinittext", "_einittext"); i && i->second > i->first) {
    out.init_areas.push_back({"", i->first, i->second, ".init.text"});
  }
  return absl::OkStatus();
}

absl::Status ReadRelocatable(ProbeElfReader& rd, const KernelArch* arch, ProbeTables& out) {
  // No section of ftrace sites: either no function of the module has one, or the kernel
  // records none at all (no dynamic ftrace). The caller tells them apart (vmlinux's).
  const std::string_view sites = arch != nullptr ? arch->module_ftrace_section : "__mcount_loc";
  out.fentry_known = rd.HasSection(sites);
  ASSIGN_OR_RETURN(out.fentry, rd.RelocatedPlaces(sites, out.notes));
  ASSIGN_OR_RETURN(out.blacklist, rd.RelocatedPlaces("_kprobe_blacklist", out.notes));
  for (std::string_view s : {".kprobes.text", ".noinstr.text"}) {
    for (auto& a : rd.SectionAreas(s, false, false)) out.blacklist_areas.push_back(std::move(a));
  }
  out.init_areas = rd.SectionAreas(".init", true, true);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProbeTables> ReadProbeTables(std::span<char> image) {
  InitLibelf();
  ElfPtr elf(elf_memory(image.data(), image.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return absl::InvalidArgumentError("not an ELF file");
  GElf_Ehdr eh;
  if (gelf_getehdr(elf.get(), &eh) == nullptr) return LibelfError("bad ELF header");
  ProbeElfReader rd(elf.get(), eh, image);
  RETURN_IF_ERROR(rd.LoadSections());
  ProbeTables out;
  out.machine = eh.e_machine;
  out.relocatable = eh.e_type == ET_REL;
  const KernelArch* arch = ArchOfMachine(eh.e_machine);
  if (out.relocatable) {
    RETURN_IF_ERROR(ReadRelocatable(rd, arch, out));
  } else {
    RETURN_IF_ERROR(ReadLinked(rd, arch, out));
  }
  if (arch != nullptr) out.layout = rd.SitesFromRecords(*arch, out.fentry);
  out.btf = std::string(rd.SectionBytes(".BTF"));
  return out;
}

}  // namespace symdex::ingest
