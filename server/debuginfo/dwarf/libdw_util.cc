#include "server/debuginfo/dwarf/libdw_util.h"

#include <dwarf.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "server/common/strings.h"

namespace symdex::debuginfo {

void DwarfEnd::operator()(Dwarf* d) const { dwarf_end(d); }
void DwflEnd::operator()(Dwfl* d) const { dwfl_end(d); }

namespace {
int NoSeparateDebuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char**) {
  return -1;  // the module file itself carries the DWARF; never look elsewhere (or at debuginfod)
}
std::string DwflReason() {
  const char* m = dwfl_errmsg(-1);
  return m ? m : "no libdwfl error recorded";
}
}  // namespace

absl::Status OpenRelocated(const std::string& path, RelocatedDwarf& out) {
  static const Dwfl_Callbacks kCallbacks = {
      .find_elf = nullptr,
      .find_debuginfo = NoSeparateDebuginfo,
      .section_address = dwfl_offline_section_address,
      .debuginfo_path = nullptr,
  };
  InitLibelf();
  out = RelocatedDwarf();
  out.dwfl.reset(dwfl_begin(&kCallbacks));
  if (!out.dwfl) return absl::InternalError(StrCat("dwfl_begin: ", DwflReason()));
  out.mod = dwfl_report_offline(out.dwfl.get(), "module", path.c_str(), -1);
  if (out.mod == nullptr) return absl::InvalidArgumentError(StrCat(path, ": ", DwflReason()));
  dwfl_report_end(out.dwfl.get(), nullptr, nullptr);
  out.dwarf = dwfl_module_getdwarf(out.mod, &out.bias);
  if (out.dwarf == nullptr) {
    return absl::InvalidArgumentError(StrCat(path, ": no DWARF debug info (", DwflReason(), ")"));
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, uint64_t>> RelocatedDwarf::SectionBases() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  GElf_Addr elf_bias = 0;
  Elf* elf = mod ? dwfl_module_getelf(mod, &elf_bias) : nullptr;
  const int n = elf ? dwfl_module_relocations(mod) : 0;
  for (int i = 0; i < n; ++i) {
    GElf_Word shndx = 0;
    const char* name = dwfl_module_relocation_info(mod, static_cast<unsigned>(i), &shndx);
    GElf_Shdr shdr;
    Elf_Scn* scn = elf_getscn(elf, shndx);
    if (name == nullptr || scn == nullptr || gelf_getshdr(scn, &shdr) == nullptr) continue;
    out.emplace_back(name, shdr.sh_addr + elf_bias);
  }
  return out;
}

std::optional<BuildId> LibdwflBuildId(Elf* elf) {
  const void* bits = nullptr;
  const ssize_t len = elf ? dwelf_elf_gnu_build_id(elf, &bits) : -1;
  if (len <= 0 || bits == nullptr) return std::nullopt;
  return BuildId::FromRaw(std::string_view(static_cast<const char*>(bits), static_cast<size_t>(len)));
}

absl::Status OpenDwarf(const std::string& path, OpenedDwarf& o) {
  InitLibelf();
  o.fd.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!o.fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  o.elf.reset(elf_begin(o.fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!o.elf || elf_kind(o.elf.get()) != ELF_K_ELF) {
    return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
  }
  o.dwarf.reset(dwarf_begin_elf(o.elf.get(), DWARF_C_READ, nullptr));
  if (!o.dwarf)
    return absl::InvalidArgumentError(
        StrCat(path, ": no DWARF debug info (", dwarf_errmsg(-1) ? dwarf_errmsg(-1) : "none", ")"));
  return absl::OkStatus();
}

namespace {

bool NativeElf64(const void* image, size_t size) {
  if (size < EI_NIDENT) return false;
  const auto* id = static_cast<const unsigned char*>(image);
  if (std::memcmp(id, ELFMAG, SELFMAG) != 0 || id[EI_CLASS] != ELFCLASS64) return false;
  return id[EI_DATA] == (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB);
}

// Can libdw read this in-memory Elf (elf_memory: its section headers point into our read-only
// mapping) without writing to it or looking beside the file? Not with a compressed section:
// dwarf_begin_elf decompresses it, rewriting the section header in place. Not with a dwz
// alternate file (.gnu_debugaltlink): libdw looks for it relative to the file's directory,
// which an Elf without a file descriptor does not have.
bool ReadsInPlace(Elf* elf) {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || (sh.sh_flags & SHF_COMPRESSED) != 0) return false;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr || std::strncmp(name, ".zdebug", 7) == 0 || std::strcmp(name, ".gnu_debugaltlink") == 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

BoundedDwarf::~BoundedDwarf() {
  dwarf_.reset();
  elf_.reset();
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

absl::Status BoundedDwarf::Open(const std::string& path, uint64_t budget) {
  InitLibelf();
  path_ = path;
  budget_ = budget;
  fd_.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd_) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0)
    return absl::InternalError(StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  // Our own PROT_READ mapping, so that dropping its pages can only ever re-read the file. Other
  // files go through libelf's own handling (their pages are not dropped, the handle is still
  // recycled): another byte order or class (libelf would convert in place), compressed
  // sections, a dwz alternate file (ReadsInPlace).
  if (S_ISREG(st.st_mode) && st.st_size > 0 && budget_ > 0) {
    const size_t size = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
    if (p != MAP_FAILED && NativeElf64(p, size)) {
      elf_.reset(elf_memory(static_cast<char*>(p), size));
      if (elf_ && elf_kind(elf_.get()) == ELF_K_ELF && ReadsInPlace(elf_.get())) {
        map_ = p;
        map_size_ = size;
      } else {
        elf_.reset();
      }
    }
    if (p != MAP_FAILED && map_ == nullptr) ::munmap(p, size);
  }
  if (!elf_) elf_.reset(elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf_ || elf_kind(elf_.get()) != ELF_K_ELF) return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
  dwarf_.reset(dwarf_begin_elf(elf_.get(), DWARF_C_READ, nullptr));
  if (!dwarf_) {
    return absl::InvalidArgumentError(
        StrCat(path, ": no DWARF debug info (", dwarf_errmsg(-1) ? dwarf_errmsg(-1) : "none", ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> BoundedDwarf::Read(uint64_t bytes) {
  spent_ += bytes;
  if (budget_ == 0 || spent_ < budget_) return false;
  spent_ = 0;
  dwarf_.reset();
  dwarf_.reset(dwarf_begin_elf(elf_.get(), DWARF_C_READ, nullptr));
  if (!dwarf_) {
    return absl::InternalError(
        StrCat(path_, ": DWARF could not be opened again (", dwarf_errmsg(-1) ? dwarf_errmsg(-1) : "none", ")"));
  }
  DropPages();
  learned_ = false;  // learnt again when libdw is next asked for a unit (PrepareUnits)
  ++recycles_;
  return true;
}

namespace {
constexpr size_t kHeadersPerDrop = 128;  // 8 MiB of fault-around at most
}

void BoundedDwarf::SetUnits(std::vector<Dwarf_Off> die_offsets) {
  units_ = std::move(die_offsets);
  learned_ = false;
}

void BoundedDwarf::PrepareUnits() {
  if (learned_) return;
  LearnUnits();
  learned_ = true;
}

void BoundedDwarf::LearnUnits() {
  // dwarf_offdie of unit k interns every unit up to k (libdw's __libdw_findcu).
  for (size_t k = 0; k < units_.size(); k += kHeadersPerDrop) {
    Dwarf_Die die;
    dwarf_offdie(dwarf_.get(), units_[std::min(units_.size(), k + kHeadersPerDrop) - 1], &die);
    DropPages();
  }
}

void BoundedDwarf::HeaderRead() {
  if (++headers_read_ % kHeadersPerDrop == 0) DropPages();
}

void BoundedDwarf::DropPages() {
  if (map_ != nullptr) ::madvise(map_, map_size_, MADV_DONTNEED);
}

std::vector<UnitSpan> UnitSizes(BoundedDwarf& h) {
  Dwarf* dbg = h.dwarf();
  std::vector<UnitSpan> out;
  Dwarf_Off off = 0, next;
  size_t hsize;
  while (dwarf_next_unit(dbg, off, &next, &hsize, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) == 0 &&
         next > off) {
    out.push_back(UnitSpan{off + hsize, next - off, off});
    off = next;
    h.HeaderRead();
  }
  return out;
}

bool RangesContain(Dwarf_Die* die, Dwarf_Addr pc) {
  Dwarf_Addr base, start, end;
  ptrdiff_t off = 0;
  while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
    if (pc >= start && pc < end) return true;
  }
  return false;
}

namespace {

void CollectFunctions(Dwarf_Die* parent, std::vector<FunctionRange>& out, int depth) {
  Dwarf_Die child;
  if (depth > 8 || dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_namespace) {
      CollectFunctions(&child, out, depth + 1);
    } else if (tag == DW_TAG_subprogram) {
      Dwarf_Addr base, start, end;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0) {
        if (end > start) out.push_back({start, end, dwarf_dieoffset(&child)});
      }
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

std::vector<FunctionRange> CollectFunctionRanges(Dwarf_Die* cu) {
  std::vector<FunctionRange> out;
  CollectFunctions(cu, out, 0);
  // Stable: equal starts keep DIE order, so every reader finds the same function.
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.lo < y.lo; });
  return out;
}

UnitsByAddress::UnitsByAddress(Dwarf* dbg, const std::function<void()>& after_unit) {
  Dwarf_Aranges* ar = nullptr;
  size_t n = 0;
  if (dwarf_getaranges(dbg, &ar, &n) != 0) n = 0;
  std::unordered_set<Dwarf_Off> covered;
  for (size_t i = 0; i < n; ++i) {
    Entry e;
    Dwarf_Addr addr = 0;
    Dwarf_Word length = 0;
    Dwarf_Off off = 0;
    if (dwarf_getarangeinfo(dwarf_onearange(ar, i), &addr, &length, &off) == 0) {
      e.addr = addr;
      e.length = length;
      e.die = off;
      covered.insert(off);
    }
    entries_.push_back(e);
  }
  // Units .debug_aranges does not name (all of them without the section; with clang, every C
  // unit — its aranges cover the assembler's units only): their own ranges.
  Dwarf_Off off = 0, next = 0;
  size_t header = 0;
  for (; dwarf_next_unit(dbg, off, &next, &header, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) == 0;
       off = next) {
    if (after_unit) after_unit();
    if (covered.contains(off + header)) continue;
    Dwarf_Die cu;
    if (dwarf_offdie(dbg, off + header, &cu) == nullptr) continue;
    if (dwarf_tag(&cu) != DW_TAG_compile_unit && dwarf_tag(&cu) != DW_TAG_partial_unit) continue;
    Dwarf_Addr base = 0, start = 0, end = 0;
    for (ptrdiff_t r = 0; (r = dwarf_ranges(&cu, r, &base, &start, &end)) > 0;) {
      if (end > start) entries_.push_back(Entry{start, end - start, off + header});
      from_units_ = true;
    }
  }
  if (from_units_) {
    std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.addr < b.addr; });
  }
}

Dwarf_Die* UnitsByAddress::Die(Dwarf* dbg, uint64_t addr, Dwarf_Die* out) const {
  size_t l = 0, u = entries_.size();
  while (l < u) {  // dwarf_getarange_addr's search
    const size_t i = (l + u) / 2;
    const Entry& e = entries_[i];
    if (addr < e.addr) {
      u = i;
    } else if (addr > e.addr && addr - e.addr >= e.length) {
      l = i + 1;
    } else {
      return e.die == 0 && e.length == 0 ? nullptr : dwarf_offdie(dbg, e.die, out);
    }
  }
  return nullptr;
}

absl::Status TakeLinkedSections(Dwarf* dbg, std::span<SectionSlot> slots, std::string_view file_reason,
                                std::string_view section_reason, bool whole_file) {
  Elf* elf = dwarf_getelf(dbg);
  GElf_Ehdr eh;
  if (elf == nullptr || gelf_getehdr(elf, &eh) == nullptr) return absl::NotFoundError("no ELF header");
  if (eh.e_type == ET_REL || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return absl::NotFoundError(StrCat("relocatable or big-endian: ", file_reason));
  }
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return absl::NotFoundError("no section name table");
  std::vector<bool> seen(slots.size(), false);
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr || (sh.sh_flags & SHF_GROUP) != 0) continue;
    if (whole_file && std::strcmp(name, ".gnu_debugaltlink") == 0) {
      return absl::NotFoundError("dwz alternate file: libdw");
    }
    if (whole_file && std::strncmp(name, ".zdebug", 7) == 0) {
      return absl::NotFoundError(StrCat(name, ": libdw decompresses it"));
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      if (seen[i] || std::strcmp(name, slots[i].name) != 0) continue;
      seen[i] = true;  // the first section of a name, as libdw takes it
      if ((sh.sh_flags & SHF_COMPRESSED) != 0 || sh.sh_type == SHT_NOBITS) {
        return absl::NotFoundError(StrCat(name, " is compressed or empty: ", section_reason));
      }
      Elf_Data* d = elf_getdata(scn, nullptr);
      if (d != nullptr && d->d_buf != nullptr) {
        *slots[i].view = std::string_view(static_cast<const char*>(d->d_buf), d->d_size);
      }
      if (slots[i].file_offset != nullptr) *slots[i].file_offset = sh.sh_offset;
    }
  }
  return absl::OkStatus();
}

}  // namespace symdex::debuginfo
