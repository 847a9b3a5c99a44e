// Relocating an ET_REL module into a linked-looking copy (relocated_elf.h). Over ~500 lines: the
// header checks, libdwfl's layout, the relocation and the copy are one pass over one file, each
// step mirroring libdwfl's, and read best together.
#include "server/debuginfo/dwarf/relocated_elf.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "server/common/byte_reader.h"
#include "server/common/file_util.h"
#include "server/common/mapped_file.h"
#include "server/common/scratch_buffer.h"
#include "server/common/strings.h"

namespace symdex::debuginfo {
namespace {
// A nested name: the unity build compiles this file in one unit with plain_elf.cc, whose
// helpers of the same purpose live in its own anonymous namespace.
namespace reloc_impl {

// dwfl_report_offline puts a Dwfl's first module at OFFLINE_REDZONE; an ET_REL module starts at
// that base rounded up to REL_MIN_ALIGN (libdwfl/offline.c, dwfl_report_elf.c).
constexpr uint64_t kOfflineBase = 0x10000;
constexpr uint64_t kRelMinAlign = 0x100;
// Addresses and sizes past this are declined: libdwfl's arithmetic would wrap around, and no
// module comes near it.
constexpr uint64_t kMaxAddress = uint64_t{1} << 48;

absl::Status Decline(std::string_view name, std::string_view why) {
  return absl::FailedPreconditionError(StrCat(name, ": not relocated by symdex (", why, ")"));
}

// `size` bytes at `offset` of `in`, or nullopt when they are not all inside it.
std::optional<std::string_view> Slice(std::string_view in, uint64_t offset, uint64_t size) {
  if (offset > in.size() || size > in.size() - offset) return std::nullopt;
  return in.substr(offset, size);
}

// The DWARF sections libdwfl relocates (libebl's default_debugscn_p), also behind the
// ".gnu.debuglto_" prefix. ".zdebug" ones (GNU-style compression) are declined before this.
bool DwarfSectionName(std::string_view name) {
  static constexpr std::string_view kNames[] = {".debug",           ".line",
                                                ".debug_srcinfo",   ".debug_sfnames",
                                                ".debug_aranges",   ".debug_pubnames",
                                                ".debug_info",      ".debug_abbrev",
                                                ".debug_line",      ".debug_frame",
                                                ".debug_str",       ".debug_loc",
                                                ".debug_macinfo",   ".debug_ranges",
                                                ".debug_pubtypes",  ".debug_types",
                                                ".gdb_index",       ".debug_macro",
                                                ".debug_addr",      ".debug_line_str",
                                                ".debug_loclists",  ".debug_names",
                                                ".debug_rnglists",  ".debug_str_offsets",
                                                ".debug_weaknames", ".debug_funcnames",
                                                ".debug_typenames", ".debug_varnames"};
  constexpr std::string_view kLto = ".gnu.debuglto_";
  if (name.starts_with(kLto)) name.remove_prefix(kLto.size());
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// Bytes a relocation of `type` writes on `machine`: 0 when symdex does not apply that type.
unsigned RelocationWidth(uint16_t machine, uint32_t type) {
  if (machine == EM_X86_64) return type == R_X86_64_64 ? 8 : type == R_X86_64_32 ? 4 : 0;
  if (machine == EM_AARCH64) return type == R_AARCH64_ABS64 ? 8 : type == R_AARCH64_ABS32 ? 4 : 0;
  return 0;
}

// What libdwfl relocates in code as well (dwfl_module_getelf applies every relocation it can,
// code included): on AArch64 the absolute types (its reloc_simple_type).
bool AbsoluteRelocation(uint16_t machine, uint32_t type) {
  return machine == EM_AARCH64 && (type == R_AARCH64_ABS64 || type == R_AARCH64_ABS32 || type == R_AARCH64_ABS16);
}

struct Region {
  uint64_t begin, end;
  std::string_view what;
};

// The section headers and each section's name.
struct Sections {
  std::vector<Elf64_Shdr> headers;
  std::vector<std::string_view> names;
};

// The ELF and section headers, checked: every section's bytes inside the file, no two regions
// of the file (headers, sections with bytes) overlapping — a relocation written to one must not
// change another, as it would in libdwfl's one mapping — and every name inside the name table.
absl::StatusOr<Sections> ReadSections(std::string_view in, std::string_view name, Elf64_Ehdr& eh) {
  if (in.size() < sizeof eh) return Decline(name, "shorter than an ELF header");
  eh = ByteReader(in).Struct<Elf64_Ehdr>();
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Decline(name, "not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return Decline(name, "not a 64-bit little-endian ELF file");
  }
  if (eh.e_type != ET_REL) return Decline(name, "not a relocatable file");
  if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) {
    return Decline(name, StrCat("machine ", eh.e_machine, " (symdex relocates x86-64 and AArch64 modules)"));
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return Decline(name, "section header size is not 64");
  if (eh.e_shnum == 0 || eh.e_shstrndx == SHN_XINDEX) return Decline(name, "extended section numbering");
  if (eh.e_shstrndx >= eh.e_shnum) return Decline(name, "section name table index out of range");
  const auto table = Slice(in, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr));
  if (!table) return Decline(name, "section headers lie outside the file");
  Sections out;
  out.headers.resize(eh.e_shnum);
  ByteReader r(*table);
  for (Elf64_Shdr& sh : out.headers) sh = r.Struct<Elf64_Shdr>();

  std::vector<Region> regions{{0, sizeof eh, "ELF header"},
                              {eh.e_shoff, eh.e_shoff + table->size(), "section headers"}};
  for (size_t i = 1; i < out.headers.size(); ++i) {
    const Elf64_Shdr& sh = out.headers[i];
    if (sh.sh_type == SHT_NOBITS || sh.sh_size == 0) continue;
    if (!Slice(in, sh.sh_offset, sh.sh_size)) return Decline(name, StrCat("section ", i, " lies outside the file"));
    regions.push_back({sh.sh_offset, sh.sh_offset + sh.sh_size, "section"});
  }
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < regions.size(); ++k) {
    if (regions[k].begin < regions[k - 1].end) {
      return Decline(name, StrCat("a ", regions[k].what, " at file offset ", regions[k].begin, " overlaps a ",
                                  regions[k - 1].what));
    }
  }

  const Elf64_Shdr& strtab = out.headers[eh.e_shstrndx];
  const auto strings = Slice(in, strtab.sh_offset, strtab.sh_size);
  if (strtab.sh_type != SHT_STRTAB || !strings) return Decline(name, "no section name table");
  out.names.resize(out.headers.size());
  for (size_t i = 1; i < out.headers.size(); ++i) {
    const uint64_t at = out.headers[i].sh_name;
    const size_t nul = at < strings->size() ? strings->find('\0', at) : std::string_view::npos;
    if (nul == std::string_view::npos) return Decline(name, StrCat("section ", i, "'s name lies outside its table"));
    out.names[i] = strings->substr(at, nul - at);
  }
  return out;
}

// libdwfl 0.188's layout of an ET_REL file (__libdwfl_elf_address_range with base
// OFFLINE_REDZONE): each SHF_ALLOC section's address, by section index (0 for the others).
absl::StatusOr<std::vector<uint64_t>> Layout(const std::vector<Elf64_Shdr>& sh, std::string_view name) {
  std::vector<uint64_t> addr(sh.size(), 0);
  for (size_t i = 1; i < sh.size(); ++i) {
    if (!(sh[i].sh_flags & SHF_ALLOC)) continue;
    if (sh[i].sh_addr > kMaxAddress || sh[i].sh_size > kMaxAddress || sh[i].sh_addralign > kMaxAddress) {
      return Decline(name, StrCat("section ", i, "'s address, size or alignment is out of range"));
    }
    addr[i] = sh[i].sh_addr;
  }
  auto align_of = [&](size_t i) -> uint64_t { return sh[i].sh_addralign ? sh[i].sh_addralign : 1; };
  // (The bit operations are libdwfl's, also for an alignment that is no power of two.)
  uint64_t base = (kOfflineBase + kRelMinAlign - 1) & -kRelMinAlign;
  uint64_t start = base, end = base, bias = 0;
  bool first = true;
  for (size_t i = 1; i < sh.size(); ++i) {
    if (!(sh[i].sh_flags & SHF_ALLOC)) continue;
    const uint64_t align = align_of(i);
    const uint64_t next = (end + align - 1) & -align;
    if (addr[i] == 0 || (bias == 0 && end > start && end != next)) {
      // Laid out here: once layout has begun it goes on, unless the section already sits at
      // the running end's aligned address.
      addr[i] = next;
      if (end == base) {
        start = base = addr[i];  // the first section placed: the module's base
      } else if (base & (align - 1)) {
        // The base is less aligned than this section needs: a better base, everything again.
        start = end = base = (base + align - 1) & -align;
        for (size_t j = 1; j <= i; ++j) {
          if (!(sh[j].sh_flags & SHF_ALLOC)) continue;
          const uint64_t a = align_of(j);
          addr[j] = (end + a - 1) & -a;
          end = addr[j] + sh[j].sh_size;
          if (end > kMaxAddress) return Decline(name, "its layout leaves the address range");
        }
        continue;
      }
      end = addr[i] + sh[i].sh_size;
    } else {
      // An address already assigned: tracked.
      if (first || end < addr[i] + sh[i].sh_size) end = addr[i] + sh[i].sh_size;
      if (first || bias > addr[i]) bias = addr[i];
      if ((addr[i] - bias + base) & (align - 1)) base = ((base + align - 1) & -align) + (bias & (align - 1));
    }
    first = false;
    if (end > kMaxAddress || base > kMaxAddress) return Decline(name, "its layout leaves the address range");
  }
  if (bias != 0) return Decline(name, "its sections carry addresses of their own: libdwfl biases the module");
  return addr;
}

// The module's symbol table (there must be exactly one), checked.
struct SymbolTable {
  size_t index = 0;
  std::string_view bytes;  // Elf64_Sym entries
  size_t count() const { return bytes.size() / sizeof(Elf64_Sym); }
  Elf64_Sym At(size_t i) const {
    return ByteReader(bytes.substr(i * sizeof(Elf64_Sym), sizeof(Elf64_Sym))).Struct<Elf64_Sym>();
  }
};

absl::StatusOr<SymbolTable> FindSymbolTable(std::string_view in, const Sections& s, std::string_view name) {
  SymbolTable out;
  for (size_t i = 1; i < s.headers.size(); ++i) {
    const Elf64_Shdr& sh = s.headers[i];
    if (sh.sh_type == SHT_SYMTAB_SHNDX) return Decline(name, "extended symbol section indices");
    if (sh.sh_type != SHT_SYMTAB) continue;
    if (out.index != 0) return Decline(name, "more than one symbol table");
    if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_size % sizeof(Elf64_Sym) != 0) {
      return Decline(name, "symbol table entries are not 24 bytes");
    }
    // libdwfl refuses such a table, and with it the module's DWARF (find_symtab's checks).
    if (sh.sh_size == 0 || sh.sh_info > sh.sh_size / sizeof(Elf64_Sym)) {
      return Decline(name, "the symbol table is empty or its first global symbol lies past its end");
    }
    // A name table whose last byte is NUL: every name inside it ends inside it, so libdwfl and
    // libelf agree on which symbols have names.
    if (sh.sh_link == 0 || sh.sh_link >= s.headers.size() || s.headers[sh.sh_link].sh_type != SHT_STRTAB ||
        s.headers[sh.sh_link].sh_size == 0 || in[s.headers[sh.sh_link].sh_offset + s.headers[sh.sh_link].sh_size - 1]) {
      return Decline(name, "symbol names are not in a NUL-terminated string table");
    }
    const auto bytes = Slice(in, sh.sh_offset, sh.sh_size);
    if (!bytes) return Decline(name, "the symbol table lies outside the file");
    out.index = i;
    out.bytes = *bytes;
  }
  if (out.index == 0) return Decline(name, "no symbol table");
  return out;
}

// What a symbol contributes to a relocation's value (the layout address of its section added),
// or why it cannot: each symbol's worked out once, not once per relocation.
struct SymbolValues {
  std::vector<uint64_t> value;
  std::vector<const char*> refused;  // nullptr: usable
};

SymbolValues ResolveSymbols(const SymbolTable& symtab, const std::vector<Elf64_Shdr>& sh,
                            const std::vector<uint64_t>& addr) {
  SymbolValues out;
  out.value.resize(symtab.count());
  out.refused.assign(symtab.count(), nullptr);
  for (size_t i = 1; i < symtab.count(); ++i) {
    const Elf64_Sym st = symtab.At(i);
    out.value[i] = st.st_value;
    if (st.st_shndx == SHN_UNDEF) {
      out.refused[i] = "an undefined symbol";
    } else if (ELF64_ST_TYPE(st.st_info) == STT_TLS) {
      out.refused[i] = "a TLS symbol";
    } else if (st.st_shndx == SHN_ABS) {
      // its value as it is
    } else if (st.st_shndx >= SHN_LORESERVE || st.st_shndx >= sh.size()) {
      out.refused[i] = "a symbol in a reserved or missing section (common, extended index)";
    } else if (sh[st.st_shndx].sh_flags & SHF_ALLOC) {
      out.value[i] += addr[st.st_shndx];
    }
  }
  return out;
}

}  // namespace reloc_impl
}  // namespace

bool ModulesViaLibdwflForced() {
  const char* v = std::getenv("SYMDEX_MODULES_VIA");
  return v != nullptr && std::strcmp(v, "libdwfl") == 0;
}

SectionLayout::SectionLayout(std::vector<LaidOutSection> in_header_order) : sections_(std::move(in_header_order)) {
  std::stable_sort(sections_.begin(), sections_.end(),
                   [](const LaidOutSection& a, const LaidOutSection& b) { return a.start < b.start; });
}

std::optional<size_t> SectionLayout::Find(uint64_t addr, uint64_t* offset) const {
  // libdwfl's find_section, step for step (the ranges may overlap and need not cover the space).
  size_t l = 0, u = sections_.size();
  while (l < u) {
    const size_t idx = (l + u) / 2;
    if (addr < sections_[idx].start) {
      u = idx;
    } else if (addr > sections_[idx].end) {
      l = idx + 1;
    } else {
      size_t at = idx;
      // (libdwfl also looks one past the last section here; nothing starts there.)
      if (addr == sections_[at].end && at + 1 < sections_.size() && addr == sections_[at + 1].start) ++at;
      if (offset != nullptr) *offset = addr - sections_[at].start;
      return at;
    }
  }
  return std::nullopt;
}

std::optional<std::pair<std::string_view, uint64_t>> SectionLayout::Map(uint64_t addr) const {
  uint64_t offset = 0;
  const std::optional<size_t> at = Find(addr, &offset);
  if (!at) return std::nullopt;
  return std::make_pair(std::string_view(sections_[*at].name), offset);
}

absl::StatusOr<RelocationPlan> PlanRelocation(std::string_view in, std::string_view name) {
  using namespace reloc_impl;
  Elf64_Ehdr eh;
  ASSIGN_OR_RETURN(Sections s, ReadSections(in, name, eh));
  const std::vector<Elf64_Shdr>& sh = s.headers;
  RelocationPlan plan;
  plan.machine = eh.e_machine;
  ASSIGN_OR_RETURN(plan.addresses, Layout(sh, name));
  ASSIGN_OR_RETURN(const SymbolTable symtab, FindSymbolTable(in, s, name));
  plan.symtab = static_cast<uint32_t>(symtab.index);

  std::vector<int> target_of(sh.size(), -1);
  for (size_t i = 1; i < sh.size(); ++i) {
    if ((sh[i].sh_type != SHT_RELA && sh[i].sh_type != SHT_REL) || sh[i].sh_size == 0) continue;
    const size_t t = sh[i].sh_info;
    if (t == 0 || t >= sh.size()) return Decline(name, StrCat("relocation section ", i, " names no section"));
    const bool dwarf = DwarfSectionName(s.names[t]);
    const bool code = (sh[t].sh_flags & SHF_EXECINSTR) != 0;
    if (s.names[t].starts_with(".zdebug") || (dwarf && (sh[t].sh_flags & SHF_COMPRESSED))) {
      return Decline(name, StrCat(s.names[t], " is compressed"));
    }
    if (!dwarf && !(code && eh.e_machine == EM_AARCH64)) continue;
    if (sh[i].sh_type == SHT_REL) return Decline(name, StrCat(s.names[i], " is SHT_REL (symdex applies SHT_RELA)"));
    if (sh[i].sh_entsize != sizeof(Elf64_Rela) || sh[i].sh_size % sizeof(Elf64_Rela) != 0) {
      return Decline(name,
                     StrCat(s.names[i], " holds ", sh[i].sh_size, " bytes, not a whole number of 24-byte entries"));
    }
    if (!dwarf) {
      // AArch64 code: libdwfl's relocated view of it would differ from the file's bytes where an
      // absolute relocation lands (the patchable-entry NOPs are read there).
      ByteReader r(in.substr(sh[i].sh_offset, sh[i].sh_size));
      while (r.remaining() > 0) {
        if (AbsoluteRelocation(eh.e_machine, ELF64_R_TYPE(r.Struct<Elf64_Rela>().r_info))) {
          return Decline(name, StrCat("an absolute relocation in ", s.names[t]));
        }
      }
      continue;
    }
    if (sh[t].sh_type == SHT_NOBITS || sh[t].sh_size == 0) continue;  // nothing to relocate
    if (target_of[t] < 0) {
      target_of[t] = static_cast<int>(plan.targets.size());
      plan.targets.push_back({static_cast<uint32_t>(t), {}});
      plan.rewritten.push_back({sh[t].sh_offset, sh[t].sh_offset + sh[t].sh_size});
    }
    plan.targets[target_of[t]].relas.push_back(static_cast<uint32_t>(i));
    plan.zeroed.push_back({sh[i].sh_offset, sh[i].sh_offset + sh[i].sh_size});
  }
  plan.rewritten.push_back({sh[symtab.index].sh_offset, sh[symtab.index].sh_offset + sh[symtab.index].sh_size});
  plan.rewritten.push_back({eh.e_shoff, eh.e_shoff + sh.size() * sizeof(Elf64_Shdr)});
  plan.rewritten.push_back({0, sizeof eh});

  std::vector<LaidOutSection> laid_out;
  for (size_t i = 1; i < sh.size(); ++i) {
    if (!(sh[i].sh_flags & SHF_ALLOC)) continue;
    laid_out.push_back(
        {std::string(s.names[i]), static_cast<uint32_t>(i), plan.addresses[i], plan.addresses[i] + sh[i].sh_size});
  }
  plan.layout = SectionLayout(std::move(laid_out));
  return plan;
}

absl::Status ApplyRelocation(const RelocationPlan& plan, std::string_view in, std::string_view name,
                             const ImageWriter& write, uint64_t* relocations) {
  using namespace reloc_impl;
  // The plan was made from these bytes: what it checked holds (the headers are read again,
  // checked again, rather than trusted from a plan made of other bytes).
  Elf64_Ehdr eh;
  ASSIGN_OR_RETURN(Sections s, ReadSections(in, name, eh));
  const std::vector<Elf64_Shdr>& sh = s.headers;
  if (plan.addresses.size() != sh.size() || plan.symtab >= sh.size() || sh[plan.symtab].sh_type != SHT_SYMTAB) {
    return absl::InvalidArgumentError(StrCat(name, ": the relocation plan is not this file's"));
  }
  ASSIGN_OR_RETURN(const SymbolTable symtab, FindSymbolTable(in, s, name));
  const SymbolValues syms = ResolveSymbols(symtab, sh, plan.addresses);

  uint64_t applied = 0;
  // One buffer for every section of every file this thread relocates: a module's .debug_info
  // (megabytes) is then not a fresh mapping to fault in and unmap each time.
  thread_local std::string buf;
  const ScratchUse use(buf);
  for (const RelocationPlan::Target& t : plan.targets) {
    const Elf64_Shdr& tsh = sh[t.index];
    buf.assign(in.substr(tsh.sh_offset, tsh.sh_size));  // inside the file: ReadSections checked
    for (uint32_t rs : t.relas) {
      ByteReader r(in.substr(sh[rs].sh_offset, sh[rs].sh_size));
      for (uint64_t k = 0; r.remaining() >= sizeof(Elf64_Rela); ++k) {
        const Elf64_Rela rel = r.Struct<Elf64_Rela>();
        const uint32_t type = ELF64_R_TYPE(rel.r_info);
        const uint64_t sym = ELF64_R_SYM(rel.r_info);
        if (type == 0) continue;  // R_*_NONE: ld -r leaves them for discarded code; libdwfl skips them
        auto where = [&] { return StrCat(s.names[rs], " entry ", k); };
        const unsigned width = RelocationWidth(plan.machine, type);
        if (width == 0) return Decline(name, StrCat(where(), ": relocation type ", type));
        uint64_t value = 0;  // STN_UNDEF: 0, the start of a DWARF section moved elsewhere
        if (sym != 0) {
          if (sym >= syms.value.size()) return Decline(name, StrCat(where(), ": symbol ", sym, " out of range"));
          if (syms.refused[sym] != nullptr)
            return Decline(name, StrCat(where(), ": ", syms.refused[sym], " (", sym, ")"));
          value = syms.value[sym];
        }
        value += static_cast<uint64_t>(rel.r_addend);
        if (rel.r_offset > buf.size() || buf.size() - rel.r_offset < width) {
          return Decline(name, StrCat(where(), ": offset ", rel.r_offset, " outside ", s.names[t.index], " (",
                                      buf.size(), " bytes)"));
        }
        if constexpr (std::endian::native == std::endian::little) {  // (both machines relocated are)
          std::memcpy(buf.data() + rel.r_offset, &value, width);
        } else {
          for (unsigned b = 0; b < width; ++b) buf[rel.r_offset + b] = static_cast<char>(value >> (8 * b));
        }
        ++applied;
      }
    }
    RETURN_IF_ERROR(write(tsh.sh_offset, buf));
  }

  // The symbol table at the layout's addresses, as a linked file's.
  std::string symbols(symtab.bytes);
  for (size_t i = 1; i < symtab.count(); ++i) {
    Elf64_Sym st = symtab.At(i);
    if (st.st_shndx == SHN_UNDEF || st.st_shndx >= SHN_LORESERVE || st.st_shndx >= sh.size() ||
        !(sh[st.st_shndx].sh_flags & SHF_ALLOC)) {
      continue;
    }
    st.st_value += plan.addresses[st.st_shndx];
    std::memcpy(symbols.data() + i * sizeof st, &st, sizeof st);
  }
  RETURN_IF_ERROR(write(sh[plan.symtab].sh_offset, symbols));

  std::vector<Elf64_Shdr> headers = sh;
  for (size_t i = 1; i < headers.size(); ++i) {
    if (headers[i].sh_flags & SHF_ALLOC) headers[i].sh_addr = plan.addresses[i];
  }
  RETURN_IF_ERROR(write(eh.e_shoff, std::string_view(reinterpret_cast<const char*>(headers.data()),
                                                     headers.size() * sizeof(Elf64_Shdr))));
  eh.e_type = ET_EXEC;
  RETURN_IF_ERROR(write(0, std::string_view(reinterpret_cast<const char*>(&eh), sizeof eh)));
  if (relocations != nullptr) *relocations = applied;
  return absl::OkStatus();
}

absl::StatusOr<RelocatedImage> RelocateImage(std::string_view in, std::string_view name) {
  ASSIGN_OR_RETURN(RelocationPlan plan, PlanRelocation(in, name));
  RelocatedImage out;
  out.bytes.assign(in);
  for (const FileRegion& z : plan.zeroed) std::fill(out.bytes.begin() + z.begin, out.bytes.begin() + z.end, '\0');
  RETURN_IF_ERROR(ApplyRelocation(
      plan, in, name,
      [&](uint64_t offset, std::string_view bytes) -> absl::Status {
        if (offset > out.bytes.size() || bytes.size() > out.bytes.size() - offset) {
          return absl::InternalError(StrCat(name, ": a write outside the image"));
        }
        std::memcpy(out.bytes.data() + offset, bytes.data(), bytes.size());
        return absl::OkStatus();
      },
      &out.relocations));
  out.layout = std::move(plan.layout);
  return out;
}

namespace {
namespace reloc_impl {

constexpr char kRelocatedCopyName[] = "the relocated copy";

// The file's bytes into the copy but for `skip` (regions the copy gets other bytes for, or
// zeros: left as holes): in the kernel where it can (copy_file_range), else from the mapping.
absl::Status CopyInto(int from, std::string_view mapped, int to, std::vector<FileRegion> skip) {
  if (::ftruncate(to, static_cast<off_t>(mapped.size())) != 0) {
    return absl::ResourceExhaustedError(StrCat("cannot size the relocated copy: ", std::strerror(errno)));
  }
  std::sort(skip.begin(), skip.end(), [](const FileRegion& x, const FileRegion& y) { return x.begin < y.begin; });
  skip.push_back({mapped.size(), mapped.size()});
  uint64_t at = 0;
  for (const FileRegion& r : skip) {
    const uint64_t until = std::min<uint64_t>(r.begin, mapped.size());
    while (at < until) {
      loff_t in = static_cast<loff_t>(at), out = static_cast<loff_t>(at);
      const ssize_t n = ::copy_file_range(from, &in, to, &out, until - at, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // another file system, or none: by hand
        RETURN_IF_ERROR(WriteAllAt(to, mapped.substr(at, until - at), at, kRelocatedCopyName));
        break;
      }
      at += static_cast<uint64_t>(n);
    }
    at = std::max(at, std::min<uint64_t>(r.end, mapped.size()));
  }
  return absl::OkStatus();
}

}  // namespace reloc_impl
}  // namespace

std::string RelocatedElf::SharedPath() const { return StrCat("/proc/", ::getpid(), "/fd/", copy_.get()); }

absl::StatusOr<RelocatedElf> RelocatedElf::Make(const std::string& path, const RelocatedElfLimits& limits) {
  using namespace reloc_impl;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Decline(path, "not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.max_file) {
    return Decline(path, StrCat(st.st_size, " bytes, over the limit of ", limits.max_file));
  }
  ASSIGN_OR_RETURN(const MappedFile map, MappedFile::MapPrivate(path));
  const std::string_view in(map.bytes().data(), map.bytes().size());
  ASSIGN_OR_RETURN(RelocationPlan plan, PlanRelocation(in, path));  // declined here: no copy made
  RelocatedElf out;
  std::string dir;
  auto made = UnlinkedScratchFile("symdex-relocated", dir);
  if (!made.ok()) {
    return absl::Status(made.status().code(), StrCat("cannot relocate ", path, ": ", made.status().message()));
  }
  out.copy_ = std::move(*made);
  std::vector<FileRegion> skip = plan.rewritten;
  skip.insert(skip.end(), plan.zeroed.begin(), plan.zeroed.end());
  if (auto st = CopyInto(fd.get(), in, out.copy_.get(), std::move(skip)); !st.ok()) {
    return absl::Status(st.code(), StrCat(path, ": ", st.message(), " (in ", dir, ")"));
  }
  RETURN_IF_ERROR(ApplyRelocation(
      plan, in, path,
      [&](uint64_t offset, std::string_view bytes) -> absl::Status {
        if (auto st = WriteAllAt(out.copy_.get(), bytes, offset, kRelocatedCopyName); !st.ok()) {
          return absl::Status(st.code(), StrCat(path, ": ", st.message(), " (in ", dir, ")"));
        }
        return absl::OkStatus();
      },
      &out.relocations_));
  out.layout_ = std::move(plan.layout);
  out.path_ = StrCat("/proc/self/fd/", out.copy_.get());
  return out;
}

}  // namespace symdex::debuginfo
