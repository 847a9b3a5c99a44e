// Indexing a debug file's functions: every DW_TAG_subprogram instance with its CU, decl and entry
// line, ranges and inline flag, read by symdex's scanner or by libdw (a module: from symdex's
// relocated copy, or through libdwfl). Over ~500 lines because the DIE walk, its attribute
// reading and the CU-level caches are one algorithm, walked the same way by each reader.
#include "server/debuginfo/dwarf/dwarf_index.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "server/common/byte_reader.h"
#include "server/common/kernel_arch.h"
#include "server/common/strings.h"
#include "server/debuginfo/dwarf/die_extent.h"
#include "server/debuginfo/dwarf/die_scanner.h"
#include "server/debuginfo/dwarf/libdw_util.h"
#include "server/debuginfo/dwarf/line_table.h"
#include "server/debuginfo/dwarf/relocated_elf.h"
#include "server/debuginfo/dwarf/source_path.h"
#include "server/debuginfo/files/debug_finder.h"
#include "server/debuginfo/files/plain_elf.h"

namespace symdex::debuginfo {
namespace {

// Maps a DWARF address to what the index stores: identity for linked images; section + offset
// for ET_REL modules, through libdwfl's layout of the relocated sections or through symdex's
// copy of that layout (relocated_elf.h; the same sections at the same addresses, found by the
// same search). Section ids are given in the order sections are first met.
class AddressMapper {
 public:
  AddressMapper() = default;
  AddressMapper(Dwfl_Module* mod, Dwarf_Addr bias, std::vector<std::string>* sections, std::mutex* mu)
      : mod_(mod), bias_(bias), sections_(sections), mu_(mu) {}
  AddressMapper(const SectionLayout* layout, std::vector<std::string>* sections, std::mutex* mu)
      : layout_(layout), sections_(sections), mu_(mu) {}

  bool relocatable() const { return mod_ != nullptr || layout_ != nullptr; }

  bool Map(uint64_t dwarf_addr, uint64_t& out, uint16_t& section) {
    if (!relocatable()) {
      out = dwarf_addr;
      section = kNoSection;
      return true;
    }
    int idx = -1;
    uint64_t offset = 0;
    if (layout_ != nullptr) {
      if (auto at = layout_->Find(dwarf_addr, &offset)) idx = static_cast<int>(*at);
    } else {
      Dwarf_Addr a = dwarf_addr + bias_;
      idx = dwfl_module_relocate_address(mod_, &a);
      offset = a;
    }
    if (idx < 0) return false;
    auto it = cache_.find(idx);
    if (it == cache_.end()) {
      const char* name = nullptr;
      if (layout_ != nullptr) {
        name = layout_->sections()[static_cast<size_t>(idx)].name.c_str();
      } else {
        GElf_Word shndx;
        name = dwfl_module_relocation_info(mod_, static_cast<unsigned>(idx), &shndx);
      }
      std::lock_guard<std::mutex> lock(*mu_);
      std::string n = name ? name : "?";
      auto pos = std::find(sections_->begin(), sections_->end(), n);
      uint16_t id = static_cast<uint16_t>(pos - sections_->begin());
      if (pos == sections_->end()) sections_->push_back(n);
      it = cache_.emplace(idx, id).first;
    }
    out = offset;
    section = it->second;
    return true;
  }

 private:
  Dwfl_Module* mod_ = nullptr;
  Dwarf_Addr bias_ = 0;
  const SectionLayout* layout_ = nullptr;
  std::vector<std::string>* sections_ = nullptr;
  std::mutex* mu_ = nullptr;
  std::unordered_map<int, uint16_t> cache_;
};

// Appends [start, end) to `f`'s ranges as `mapper` places it; an empty range, or one in no
// section (discarded code), is left out. The first range appended sets `first_lo`, the address
// a function without DW_AT_entry_pc enters at.
void AddRange(AddressMapper& mapper, uint64_t start, uint64_t end, DwarfFunction& f, uint64_t& first_lo) {
  if (end <= start) return;
  AddrRange r;
  uint64_t lo = 0;
  if (!mapper.Map(start, lo, r.section)) return;
  r.lo = lo;
  r.hi = lo + (end - start);
  if (f.ranges.empty()) first_lo = start;
  f.ranges.push_back(r);
}

// A named variable at DWARF address `addr` of unit `cu`, placed in its section; nullopt when it
// has no name, lies in no section, or was discarded by the linker (address 0 in a linked image).
std::optional<DwarfVariable> PlacedVariable(AddressMapper& mapper, const char* name, uint64_t addr, uint32_t cu) {
  if (name == nullptr) return std::nullopt;
  DwarfVariable v;
  v.name = name;
  if (!mapper.Map(addr, v.addr, v.section)) return std::nullopt;
  if (!mapper.relocatable() && addr == 0) return std::nullopt;
  v.cu = cu;
  return v;
}

// arm64 kernels are built with -fpatchable-function-entry=2: a traceable function's symbol is
// two NOPs (which the kernel patches for ftrace) before the code its DW_TAG_subprogram and line
// table describe — GCC's low_pc is the symbol + 8. The symbol is what kallsyms, every stack
// trace and every probe name, so the function is taken to start there: its first range and its
// entry move back over the NOPs (its entry line stays that of its first instruction), and the
// symbol's line is read at that instruction, not at the NOPs (whose rows belong to the function
// before). Which symbols: those whose code starts with the NOP words (common/kernel_arch.h; the
// kernel's own test for a patchable site), by DWARF address. Empty for other architectures.
struct EntryPads {
  uint64_t bytes = 0;
  std::unordered_set<uint64_t> at;

  // Where the line of a symbol at `addr` is read.
  uint64_t LineAddress(uint64_t addr) const { return at.count(addr) ? addr + bytes : addr; }
};

// Whether the code at `offset` of section `shndx` starts with `arch`'s patchable-entry NOPs.
bool StartsWithEntryPad(Elf* elf, size_t shndx, uint64_t offset, const KernelArch& arch) {
  Elf_Scn* scn = elf_getscn(elf, shndx);
  GElf_Shdr sh;
  if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_PROGBITS) return false;
  Elf_Data* d = elf_rawdata(scn, nullptr);
  const uint64_t need = arch.EntryPad();
  if (d == nullptr || d->d_buf == nullptr || offset > d->d_size || d->d_size - offset < need) return false;
  ByteReader r(std::string_view(static_cast<const char*>(d->d_buf) + offset, need), std::endian::little);
  for (uint32_t i = 0; i < arch.entry_pad_words; ++i) {
    if (r.Int<uint32_t>() != arch.nop_word) return false;
  }
  return r.ok();
}

// A linked image's EntryPads (its symbol values are DWARF addresses).
EntryPads LinkedEntryPads(Elf* elf) {
  EntryPads out;
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh) == nullptr) return out;
  const KernelArch* arch = ArchOfMachine(eh.e_machine);
  if (arch == nullptr || arch->entry_pad_words == 0) return out;
  out.bytes = arch->EntryPad();
  ForEachSymtabSymbol(elf, [&](const GElf_Sym& sym, const char*) {
    const int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_NOTYPE) || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE) {
      return true;
    }
    Elf_Scn* scn = elf_getscn(elf, sym.st_shndx);
    GElf_Shdr sh;
    if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || !(sh.sh_flags & SHF_EXECINSTR) ||
        sym.st_value < sh.sh_addr) {
      return true;
    }
    if (StartsWithEntryPad(elf, sym.st_shndx, sym.st_value - sh.sh_addr, *arch)) out.at.insert(sym.st_value);
    return true;
  });
  return out;
}

// What one thread collects; file and unit ids are local until Merge().
struct Partial {
  std::vector<std::string> files;  // raw paths
  std::vector<std::string> file_comp_dirs;
  std::unordered_map<std::string, uint32_t> file_ids;
  std::vector<DwarfUnit> units;
  std::vector<DwarfFunction> functions;
  std::vector<DwarfVariable> variables;
  // The first libdw error met while walking this part (empty: none). A damaged file is failed
  // as a whole: a half-read unit would be cached as a smaller but "successful" index.
  std::string damage;
  const EntryPads* pads = nullptr;  // the file's, if any

  // `f` (ranges and entry mapped, entry line read) begins with its symbol's patchable-entry NOPs
  // when its DWARF entry `dwarf_entry` is EntryPads::bytes past a symbol starting with them.
  void TakeEntryPad(DwarfFunction& f, uint64_t dwarf_entry) const {
    if (pads == nullptr || pads->bytes == 0 || dwarf_entry < pads->bytes || f.entry < pads->bytes ||
        !pads->at.count(dwarf_entry - pads->bytes)) {
      return;
    }
    for (AddrRange& r : f.ranges) {
      if (r.section == f.entry_section && r.lo == f.entry) {
        r.lo -= pads->bytes;
        break;
      }
    }
    f.entry -= pads->bytes;
  }

  void Damage(const char* section, uint64_t offset, const char* what, bool from_libdw = true) {
    if (!damage.empty()) return;
    const char* libdw = dwarf_errmsg(-1);  // NULL when libdw recorded no error
    damage = from_libdw ? fmt::format("{} at {:#x}: invalid DWARF ({}; libdw: {})", section, offset, what,
                                      libdw ? libdw : "no error recorded")
                        : fmt::format("{} at {:#x}: invalid DWARF ({})", section, offset, what);
  }

  uint32_t File(const char* raw, const std::string& comp_dir) {
    if (raw == nullptr) return kNoFile;
    std::string key = raw;  // libdw already joined the file's directory entry
    auto [it, fresh] = file_ids.emplace(key, static_cast<uint32_t>(files.size()));
    if (fresh) {
      files.push_back(key);
      file_comp_dirs.push_back(comp_dir);
    }
    return it->second;
  }
};

const char* AttrString(Dwarf_Die* die, int name) {
  Dwarf_Attribute attr;
  return dwarf_formstring(dwarf_attr(die, name, &attr));
}

class UnitWalker {
 public:
  // `lines`: the file's line sections for ReadLineTable (line_table.h), or nullptr: libdw's.
  UnitWalker(Partial& out, AddressMapper& mapper, const LineSections* lines = nullptr)
      : out_(out), mapper_(mapper), line_sections_(lines) {}

  // The unit's line table when ReadLineTable read it (after Walk), else nullptr.
  const LineTable* table() const { return table_ ? &*table_ : nullptr; }

  // unit_end: offset in .debug_info just past the unit (0: unknown, skip the end check).
  void Walk(Dwarf_Die* cu, uint64_t unit_end = 0) {
    unit_end_ = unit_end;
    int tag = dwarf_tag(cu);
    if (tag == DW_TAG_invalid) {
      out_.Damage(".debug_info", dwarf_dieoffset(cu), "unit DIE unreadable (bad abbreviation?)");
      return;
    }
    if (tag != DW_TAG_compile_unit && tag != DW_TAG_partial_unit) return;
    cu_ = *cu;
    unit_id_ = static_cast<uint32_t>(out_.units.size());
    DwarfUnit unit;
    const char* name = dwarf_diename(cu);
    const char* comp_dir = AttrString(cu, DW_AT_comp_dir);
    comp_dir_ = comp_dir ? comp_dir : "";
    unit.raw_name = name ? name : "";
    unit.comp_dir = comp_dir_;
    unit.die_offset = dwarf_dieoffset(cu);
    unit.name = SourceTreeRelative(JoinPath(comp_dir_, unit.raw_name), comp_dir_);
    out_.units.push_back(std::move(unit));
    files_ = nullptr;
    nfiles_ = 0;
    table_.reset();
    if (line_sections_ != nullptr && !LibdwLinesForced()) {
      if (auto t = ReadUnitLineTable(*line_sections_, cu); t.ok()) table_ = std::move(*t);
    }
    if (table_) {
      nfiles_ = table_->files.size();
    } else if (dwarf_getsrcfiles(cu, &files_, &nfiles_) != 0) {
      files_ = nullptr;
      nfiles_ = 0;
      // A unit without DW_AT_stmt_list has no line table; one that names a table we cannot
      // read is damage (every file:line of the unit would be silently missing).
      Dwarf_Attribute attr;
      Dwarf_Word stmt = 0;
      if (dwarf_attr(cu, DW_AT_stmt_list, &attr) != nullptr) {
        dwarf_formudata(&attr, &stmt);
        out_.Damage(".debug_line", stmt, fmt::format("line table of unit at {:#x}", dwarf_dieoffset(cu)).c_str());
        return;
      }
    }
    local_files_.assign(nfiles_, kNoFile);
    WalkChildren(cu, 0);
  }

 private:
  void WalkChildren(Dwarf_Die* parent, int depth) {
    Dwarf_Die die;
    int r = dwarf_child(parent, &die);
    if (r < 0) out_.Damage(".debug_info", dwarf_dieoffset(parent), "children of DIE unreadable");
    if (r != 0) return;
    do {
      if (!out_.damage.empty()) return;
      switch (dwarf_tag(&die)) {
        case DW_TAG_invalid:
          out_.Damage(".debug_info", dwarf_dieoffset(&die), "DIE with an unknown abbreviation");
          return;
        case DW_TAG_subprogram:
          Function(&die);
          break;
        case DW_TAG_variable:
          if (depth == 0) Variable(&die);
          break;
        case DW_TAG_namespace:
        case DW_TAG_module:
          if (depth < 8) WalkChildren(&die, depth + 1);
          break;
        default:
          break;
      }
      Dwarf_Die next;
      if ((r = dwarf_siblingof(&die, &next)) != 0) break;
      die = next;
    } while (true);
    if (r < 0) {
      out_.Damage(".debug_info", dwarf_dieoffset(&die), "next sibling of DIE unreadable");
      return;
    }
    uint64_t bad = 0;
    if (depth == 0 && unit_end_ != 0 && !ChainReachesEnd(&die, unit_end_, bad)) {
      // libdw read a 0 byte as "no more DIEs": zeroed or overwritten bytes inside the unit.
      out_.Damage(".debug_info", bad, "unit's DIEs end before the unit does (zeroed bytes?)", false);
    }
  }

  uint32_t FileOf(Dwarf_Die* die, int attr_name) {
    Dwarf_Attribute attr;
    if (dwarf_attr_integrate(die, attr_name, &attr) == nullptr) return kNoFile;
    Dwarf_Word idx;
    if (dwarf_formudata(&attr, &idx) != 0) return kNoFile;
    if (attr.cu != cu_.cu) {
      // Declared in another unit (abstract origin across CUs): let libdw resolve the name.
      return out_.File(dwarf_decl_file(die), comp_dir_);
    }
    if ((files_ == nullptr && !table_) || idx >= nfiles_) return kNoFile;
    if (local_files_[idx] == kNoFile) {
      local_files_[idx] = table_ ? out_.File(table_->FilePath(static_cast<uint32_t>(idx))->c_str(), comp_dir_)
                                 : out_.File(dwarf_filesrc(files_, idx, nullptr, nullptr), comp_dir_);
    }
    return local_files_[idx];
  }

  uint32_t LineOf(Dwarf_Die* die, int attr_name) {
    Dwarf_Attribute attr;
    Dwarf_Word v;
    if (dwarf_attr_integrate(die, attr_name, &attr) == nullptr || dwarf_formudata(&attr, &v) != 0) return 0;
    return static_cast<uint32_t>(v);
  }

  void Function(Dwarf_Die* die) {
    if (dwarf_hasattr(die, DW_AT_declaration)) return;
    if (!dwarf_hasattr(die, DW_AT_low_pc) && !dwarf_hasattr(die, DW_AT_ranges)) return;  // abstract
    DwarfFunction f;
    const char* name = dwarf_diename(die);  // follows abstract_origin / specification
    if (name == nullptr) return;
    f.name = name;
    Dwarf_Addr base, start, end;
    ptrdiff_t off = 0;
    uint64_t first_lo = 0;
    Dwarf_Off die_off = dwarf_dieoffset(die);
    while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) AddRange(mapper_, start, end, f, first_lo);
    if (off < 0) {
      // Not "no ranges" (0): the DIE has DW_AT_ranges/low_pc that libdw cannot read.
      out_.Damage(".debug_info", die_off, StrCat("address ranges of ", f.name).c_str());
      return;
    }
    if (f.ranges.empty()) return;  // discarded (e.g. address 0 in a GC'd section)
    Dwarf_Addr entry;
    if (dwarf_entrypc(die, &entry) != 0) entry = first_lo;
    if (!mapper_.Map(entry, f.entry, f.entry_section)) return;
    // Skip functions the linker discarded: their ranges start at 0 in a linked image.
    if (!mapper_.relocatable() && entry == 0) return;
    f.cu = unit_id_;
    f.decl_file = FileOf(die, DW_AT_decl_file);
    f.decl_line = LineOf(die, DW_AT_decl_line);
    if (table_) {
      if (const LineRow* row = table_->RowFor(entry)) {
        f.entry_line = static_cast<uint32_t>(row->line);
        const auto path = table_->FilePath(row->file);
        f.entry_file = out_.File(path ? path->c_str() : nullptr, comp_dir_);
      }
    } else if (Dwarf_Line* line = dwarf_getsrc_die(&cu_, entry)) {
      int lineno = 0;
      dwarf_lineno(line, &lineno);
      f.entry_line = static_cast<uint32_t>(lineno);
      f.entry_file = out_.File(dwarf_linesrc(line, nullptr, nullptr), comp_dir_);
    }
    out_.TakeEntryPad(f, entry);
    f.external = dwarf_hasattr_integrate(die, DW_AT_external);
    Dwarf_Attribute attr;
    Dwarf_Die origin;
    if (dwarf_attr(die, DW_AT_abstract_origin, &attr) && dwarf_formref_die(&attr, &origin)) {
      Dwarf_Word inl;
      if (dwarf_attr(&origin, DW_AT_inline, &attr) && dwarf_formudata(&attr, &inl) == 0) {
        f.inline_copy = inl == DW_INL_declared_inlined || inl == DW_INL_declared_not_inlined;
      }
    }
    out_.functions.push_back(std::move(f));
  }

  void Variable(Dwarf_Die* die) {
    if (dwarf_hasattr(die, DW_AT_declaration)) return;
    Dwarf_Attribute attr;
    if (dwarf_attr(die, DW_AT_location, &attr) == nullptr) return;
    Dwarf_Op* ops;
    size_t nops;
    if (dwarf_getlocation(&attr, &ops, &nops) != 0 || nops != 1) return;
    Dwarf_Addr addr = ops[0].number;
    if (ops[0].atom == DW_OP_addrx) {  // clang's DWARF 5: the address is .debug_addr's
      Dwarf_Attribute in_table;
      if (dwarf_getlocation_attr(&attr, &ops[0], &in_table) != 0 || dwarf_formaddr(&in_table, &addr) != 0) return;
    } else if (ops[0].atom != DW_OP_addr) {
      return;
    }
    std::optional<DwarfVariable> v = PlacedVariable(mapper_, dwarf_diename(die), addr, unit_id_);
    if (!v) return;
    v->decl_file = FileOf(die, DW_AT_decl_file);
    v->decl_line = LineOf(die, DW_AT_decl_line);
    v->external = dwarf_hasattr_integrate(die, DW_AT_external);
    out_.variables.push_back(std::move(*v));
  }

  Partial& out_;
  AddressMapper& mapper_;
  Dwarf_Die cu_{};
  uint64_t unit_end_ = 0;
  uint32_t unit_id_ = 0;
  std::string comp_dir_;
  Dwarf_Files* files_ = nullptr;  // libdw's table, or
  const LineSections* line_sections_;
  std::optional<LineTable> table_;  // ReadLineTable's
  size_t nfiles_ = 0;
  std::vector<uint32_t> local_files_;
};

// UnitWalker's walk over one unit of a linked file (or of a module's relocated copy), read by
// the DIE scanner (die_scanner.h) and ReadLineTable: the same rows, the same order, the same
// addresses mapped in the same order. Walk() false: the scanner does not read this unit as libdw
// would (or it is damaged); the caller then reads the whole file with libdw (a module: with
// libdwfl), which also words the damage.
class ScanWalker {
 public:
  ScanWalker(Partial& out, UnitScanner& scan, const DwarfSections& sections, AddressMapper& mapper)
      : out_(out), s_(scan), sections_(sections), mapper_(mapper) {}

  const LineTable* table() const { return table_ ? &*table_ : nullptr; }
  uint64_t cu_offset() const { return s_.die_offset(); }
  const std::string& comp_dir() const { return comp_dir_; }

  bool Walk(uint64_t header_offset) {
    if (!s_.Open(sections_, header_offset)) return false;
    ScanDie cu;
    if (!s_.UnitDie(cu)) return false;
    // UnitWalker skips such a unit, but its symbols' lines still come from libdw's reading of
    // the unit DIE's line table: libdw's to read.
    if (cu.tag() != DW_TAG_compile_unit && cu.tag() != DW_TAG_partial_unit) {
      return s_.Fail(cu.offset, "unit DIE is not a compile unit");
    }
    unit_id_ = static_cast<uint32_t>(out_.units.size());
    DwarfUnit unit;
    const char* name = s_.Name(cu);
    const char* comp_dir = nullptr;
    if (const ScanAttr* a = cu.get(At::kCompDir)) comp_dir = s_.String(*a);
    if (s_.failed()) return false;
    comp_dir_ = comp_dir ? comp_dir : "";
    unit.raw_name = name ? name : "";
    unit.comp_dir = comp_dir_;
    unit.die_offset = cu.offset;
    unit.name = SourceTreeRelative(JoinPath(comp_dir_, unit.raw_name), comp_dir_);
    out_.units.push_back(std::move(unit));
    if (const ScanAttr* stmt = cu.get(At::kStmtList)) {
      uint64_t offset = 0;
      if (!s_.SecOffset(*stmt, offset)) return false;
      auto t = ReadLineTable(sections_.lines(), offset, comp_dir, s_.address_size());
      if (!t.ok()) return s_.Fail(cu.offset, std::string(t.status().message()));
      table_ = std::move(*t);
      local_files_.assign(table_->files.size(), kNoFile);
    }
    return Children(cu, 0);
  }

 private:
  bool Children(const ScanDie& parent, int depth) {
    ScanDie buf[2];
    int cur = 0;
    int r = s_.Child(parent, buf[cur]);
    if (r < 0) return false;
    if (r != 0) return true;
    for (;;) {
      const ScanDie& die = buf[cur];
      switch (die.tag()) {
        case DW_TAG_subprogram:
          Function(die);
          break;
        case DW_TAG_variable:
          if (depth == 0) Variable(die);
          break;
        case DW_TAG_namespace:
        case DW_TAG_module:
          if (depth < 8 && !Children(die, depth + 1)) return false;
          break;
        default:
          break;
      }
      if (s_.failed()) return false;
      if ((r = s_.Sibling(die, buf[cur ^ 1])) != 0) break;
      cur ^= 1;
    }
    if (r < 0) return false;
    // UnitWalker's ChainReachesEnd: bytes after the chain's end are libdw's to report.
    if (depth == 0 && !s_.ChainReachesEnd(buf[cur])) return s_.Fail(buf[cur].offset, "unit's DIEs end early");
    return true;
  }

  uint32_t FileOf(const ScanDie& die, At at) {
    const ScanAttr* a = s_.Integrate(die, at);
    uint64_t idx = 0;
    if (a == nullptr || !s_.Udata(*a, idx)) return kNoFile;
    if (!table_ || idx >= table_->files.size()) return kNoFile;
    if (local_files_[idx] == kNoFile) {
      local_files_[idx] = out_.File(table_->FilePath(static_cast<uint32_t>(idx))->c_str(), comp_dir_);
    }
    return local_files_[idx];
  }

  uint32_t LineOf(const ScanDie& die, At at) {
    const ScanAttr* a = s_.Integrate(die, at);
    uint64_t v = 0;
    if (a == nullptr || !s_.Udata(*a, v)) return 0;
    return static_cast<uint32_t>(v);
  }

  void Function(const ScanDie& die) {
    if (die.has(At::kDeclaration)) return;
    if (!die.has(At::kLowPc) && !die.has(At::kRanges)) return;  // abstract
    const char* name = s_.Name(die);
    if (name == nullptr) return;
    DwarfFunction f;
    f.name = name;
    ranges_.clear();
    if (!s_.Ranges(die, ranges_)) return;
    uint64_t first_lo = 0;
    for (const auto& [start, end] : ranges_) AddRange(mapper_, start, end, f, first_lo);
    if (f.ranges.empty()) return;
    uint64_t entry = 0;
    if (!s_.EntryPc(die, entry)) {
      if (s_.failed()) return;
      entry = first_lo;
    }
    if (!mapper_.Map(entry, f.entry, f.entry_section)) return;
    if (!mapper_.relocatable() && entry == 0) return;  // discarded by the linker
    f.cu = unit_id_;
    f.decl_file = FileOf(die, At::kDeclFile);
    f.decl_line = LineOf(die, At::kDeclLine);
    if (table_) {
      if (const LineRow* row = table_->RowFor(entry)) {
        f.entry_line = static_cast<uint32_t>(row->line);
        const auto path = table_->FilePath(row->file);
        f.entry_file = out_.File(path ? path->c_str() : nullptr, comp_dir_);
      }
    }
    out_.TakeEntryPad(f, entry);
    f.external = s_.HasIntegrate(die, At::kExternal);
    if (const ScanAttr* origin_ref = die.get(At::kAbstractOrigin)) {
      ScanDie origin;
      uint64_t inl = 0;
      if (s_.RefDie(*origin_ref, origin)) {
        if (const ScanAttr* a = origin.get(At::kInline); a && s_.Udata(*a, inl)) {
          f.inline_copy = inl == DW_INL_declared_inlined || inl == DW_INL_declared_not_inlined;
        }
      }
    }
    if (s_.failed()) return;
    out_.functions.push_back(std::move(f));
  }

  void Variable(const ScanDie& die) {
    if (die.has(At::kDeclaration)) return;
    const ScanAttr* loc = die.get(At::kLocation);
    if (loc == nullptr) return;
    uint64_t addr = 0;
    if (!s_.SingleAddress(*loc, addr)) return;  // one DW_OP_addr or DW_OP_addrx op
    std::optional<DwarfVariable> v = PlacedVariable(mapper_, s_.Name(die), addr, unit_id_);
    if (!v) return;
    v->decl_file = FileOf(die, At::kDeclFile);
    v->decl_line = LineOf(die, At::kDeclLine);
    v->external = s_.HasIntegrate(die, At::kExternal);
    if (s_.failed()) return;
    out_.variables.push_back(std::move(*v));
  }

  Partial& out_;
  UnitScanner& s_;
  const DwarfSections& sections_;
  AddressMapper& mapper_;
  uint32_t unit_id_ = 0;
  std::string comp_dir_;
  std::optional<LineTable> table_;
  std::vector<uint32_t> local_files_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

// Where a part of the index starts in the whole: the files and units of the parts before it
// (DwarfIndexOptions::on_part; zero for an index made in one piece).
struct IndexBase {
  uint32_t files = 0;
  uint32_t units = 0;
};

// Appends `p` to `out`, remapping its file and unit ids (`out` starts at `base`).
void Merge(Partial& p, DwarfIndex& out, std::unordered_map<std::string, uint32_t>& file_ids, IndexBase base = {}) {
  std::vector<uint32_t> fmap(p.files.size());
  for (size_t i = 0; i < p.files.size(); ++i) {
    auto [it, fresh] = file_ids.emplace(p.files[i], static_cast<uint32_t>(base.files + out.raw_files.size()));
    if (fresh) {
      out.raw_files.push_back(p.files[i]);
      out.files.push_back(SourceTreeRelative(p.files[i], p.file_comp_dirs[i]));
    }
    fmap[i] = it->second;
  }
  auto remap = [&](uint32_t f) { return f == kNoFile ? kNoFile : fmap[f]; };
  const uint32_t unit_base = static_cast<uint32_t>(base.units + out.units.size());
  for (auto& u : p.units) out.units.push_back(std::move(u));
  for (auto& f : p.functions) {
    f.cu += unit_base;
    f.decl_file = remap(f.decl_file);
    f.entry_file = remap(f.entry_file);
    out.functions.push_back(std::move(f));
  }
  for (auto& v : p.variables) {
    v.cu += unit_base;
    v.decl_file = remap(v.decl_file);
    out.variables.push_back(std::move(v));
  }
}

// Text symbols (functions and code labels) of an ELF symbol table: (value, section index).
std::vector<std::pair<uint64_t, size_t>> TextSymbolAddresses(Elf* elf) {
  std::vector<std::pair<uint64_t, size_t>> out;
  size_t nsec = 0;
  if (elf_getshdrnum(elf, &nsec) != 0) return out;
  std::vector<bool> exec(nsec, false);
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) && elf_ndxscn(scn) < nsec) exec[elf_ndxscn(scn)] = (sh.sh_flags & SHF_EXECINSTR) != 0;
  }
  ForEachSymtabSymbol(elf, [&](const GElf_Sym& sym, const char*) {
    int type = GELF_ST_TYPE(sym.st_info);
    if ((type == STT_FUNC || type == STT_NOTYPE) && sym.st_shndx != SHN_UNDEF && sym.st_shndx < nsec &&
        exec[sym.st_shndx]) {
      out.emplace_back(sym.st_value, sym.st_shndx);
    }
    return true;
  });
  return out;
}

// The line-table row at a text symbol's address, before its file joins the index's file table.
struct RawSymbolLine {
  uint64_t addr = 0;
  uint16_t section = kNoSection;
  uint64_t cu_offset = UINT64_MAX;
  bool has_file = false;
  std::string file;  // copied: the Dwarf handle that named it may be recycled (BoundedDwarf)
  std::string comp_dir;
  uint32_t line = 0;
};

// Resolves symbol-address lines into `out`, interning file names into its file table. `out`
// starts at `base`; `units_before` are the unit DIE offsets of the parts before it, in order.
void AddSymbolLines(std::vector<RawSymbolLine>& raw, DwarfIndex& out,
                    std::unordered_map<std::string, uint32_t>& file_ids, IndexBase base = {},
                    const std::vector<uint64_t>& units_before = {}) {
  std::unordered_map<uint64_t, uint32_t> unit_of_offset;
  for (size_t i = 0; i < units_before.size(); ++i) unit_of_offset[units_before[i]] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < out.units.size(); ++i) {
    unit_of_offset[out.units[i].die_offset] = static_cast<uint32_t>(base.units + i);
  }
  for (auto& r : raw) {
    DwarfSymbolLine l;
    l.addr = r.addr;
    l.section = r.section;
    l.line = r.line;
    if (auto it = unit_of_offset.find(r.cu_offset); it != unit_of_offset.end()) l.cu = it->second;
    if (r.has_file) {
      auto [it, fresh] = file_ids.emplace(r.file, static_cast<uint32_t>(base.files + out.raw_files.size()));
      if (fresh) {
        out.raw_files.push_back(r.file);
        out.files.push_back(SourceTreeRelative(r.file, r.comp_dir));
      }
      l.file = it->second;
    }
    out.symbol_lines.push_back(l);
  }
  std::sort(out.symbol_lines.begin(), out.symbol_lines.end(), [](const DwarfSymbolLine& a, const DwarfSymbolLine& b) {
    return std::tie(a.section, a.addr) < std::tie(b.section, b.addr);
  });
}

// dwarf_getsrc_die's line for the address in a unit's ReadLineTable table (none: no line).
RawSymbolLine TableLineAt(uint64_t cu_offset, std::string comp_dir, uint64_t dwarf_addr, const LineTable* table) {
  RawSymbolLine r;
  r.cu_offset = cu_offset;
  r.comp_dir = std::move(comp_dir);
  if (table == nullptr) return r;
  if (const LineRow* row = table->RowFor(dwarf_addr)) {
    r.line = static_cast<uint32_t>(row->line);
    if (auto file = table->FilePath(row->file)) {
      r.has_file = true;
      r.file = std::move(*file);
    }
  }
  return r;
}

// dwarf_getsrc_die's line for the address; from `table` (the unit's, read by ReadLineTable)
// when given.
RawSymbolLine LineAt(Dwarf_Die* cudie, uint64_t dwarf_addr, const LineTable* table = nullptr) {
  const char* comp_dir = AttrString(cudie, DW_AT_comp_dir);
  if (table != nullptr) return TableLineAt(dwarf_dieoffset(cudie), comp_dir ? comp_dir : "", dwarf_addr, table);
  RawSymbolLine r;
  r.cu_offset = dwarf_dieoffset(cudie);
  r.comp_dir = comp_dir ? comp_dir : "";
  if (Dwarf_Line* line = dwarf_getsrc_die(cudie, dwarf_addr)) {
    int lineno = 0;
    dwarf_lineno(line, &lineno);
    r.line = static_cast<uint32_t>(lineno);
    if (const char* file = dwarf_linesrc(line, nullptr, nullptr)) {
      r.has_file = true;
      r.file = file;
    }
  }
  return r;
}

struct UnitRef {
  Dwarf_Off die_offset;
  Dwarf_Off size;
  Dwarf_Off end;
};

// Size of the file's .debug_info (0 if it has none).
uint64_t DebugInfoSize(Elf* elf) {
  size_t shstrndx;
  if (elf == nullptr || elf_getshdrstrndx(elf, &shstrndx) != 0) return 0;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type == SHT_NOBITS) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name && (std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0)) return sh.sh_size;
  }
  return 0;
}

absl::Status DamageError(const std::string& path, const std::string& damage) {
  return absl::DataLossError(StrCat(path, ": ", damage));
}

// h: the bounded handle dbg belongs to (its pages are dropped as the headers are read), if any.
absl::StatusOr<std::vector<UnitRef>> ListUnits(const std::string& path, Dwarf* dbg, BoundedDwarf* h = nullptr) {
  std::vector<UnitRef> units;
  Dwarf_Off off = 0, next;
  size_t hsize;
  int r;
  while ((r = dwarf_next_unit(dbg, off, &next, &hsize, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr)) == 0) {
    if (next <= off) break;  // defensive: libdw checks this, a loop here would never end
    units.push_back({off + hsize, next - off, next});
    off = next;
    if (h != nullptr) h->HeaderRead();
  }
  if (r < 0) {
    Partial p;
    p.Damage(".debug_info", off, "unit header unreadable");
    return DamageError(path, p.damage);
  }
  if (units.empty() && DebugInfoSize(dwarf_getelf(dbg)) > 0) {
    return DamageError(path, ".debug_info at 0x0: invalid DWARF (section is not empty but holds no unit)");
  }
  return units;
}

// ListUnits for the scanner's files without libdw: each unit header read with pread() (no page
// of the file's mapping touched, so none to drop; libdw's listing of vmlinux's 2,172 headers
// through the mapping, dropping pages every 128, took 11-23 ms). Only the plain case, where
// dwarf_next_unit would list the same units: 32-bit units of DWARF 2-4, or DWARF 5 compile and
// partial units, each header whole and each unit inside the section, the last one ending at its
// end and not starting in the section's last 64 bytes. nullopt on anything else: libdw lists
// those (and names what is wrong).
std::optional<std::vector<UnitRef>> ListPlainUnits(int fd, const DwarfSections& sections) {
  const uint64_t size = sections.info.size();
  if (fd < 0 || size == 0) return std::nullopt;
  std::vector<UnitRef> units;
  uint64_t off = 0;
  while (off < size) {
    // libdw ends its list where fewer than 24 bytes are left (room for a type unit's header),
    // whatever they hold: a unit that starts in the last 64 goes to libdw to list as it does
    // (a real last unit is far larger; the margin covers a libdw that asks for more room).
    unsigned char h[8];
    if (size - off < 64 || ::pread(fd, h, sizeof h, static_cast<off_t>(sections.info_file_offset + off)) !=
                               static_cast<ssize_t>(sizeof h)) {
      return std::nullopt;
    }
    ByteReader r(std::string_view(reinterpret_cast<const char*>(h), sizeof h));
    const uint32_t length = r.Int<uint32_t>();
    const unsigned version = r.Int<uint16_t>();
    const unsigned unit_type = r.Int<uint8_t>();  // DWARF 5; before it, the abbrev offset's first byte
    if (length >= 0xfffffff0u || version < 2 || version > 5) return std::nullopt;
    uint64_t header = 11;  // length 4, version 2, abbrev offset 4, address size 1
    if (version == 5) {
      if (unit_type != DW_UT_compile && unit_type != DW_UT_partial) return std::nullopt;
      header = 12;  // and the unit type
    }
    const uint64_t next = off + 4 + length;
    if (next > size || next < off + header) return std::nullopt;
    units.push_back({off + header, next - off, next});
    off = next;
  }
  return units;
}

// The first damage any part met, in unit order; and a file whose units yield nothing at all.
absl::Status CheckParts(const std::string& path, const std::vector<Partial*>& parts, size_t units_out = 0,
                        size_t functions_out = 0) {
  size_t units = units_out, functions = functions_out;
  for (const Partial* p : parts) {
    if (!p->damage.empty()) return DamageError(path, p->damage);
    units += p->units.size();
    functions += p->functions.size() + p->variables.size();
  }
  if (units > 0 && functions == 0) {
    return DamageError(path, ".debug_info at 0x0: invalid DWARF (units hold no function or variable with an address)");
  }
  return absl::OkStatus();
}

// Hands a linked file's index out in parts as its units are read (DwarfIndexOptions::on_part):
// in unit order, a part per chunk of ~1/kParts of .debug_info once all its units are read; the
// last chunk stays for the index returned. Thread-safe; parts go out one at a time.
class PartEmitter {
 public:
  static constexpr uint64_t kParts = 8;

  PartEmitter(std::vector<Partial>& partials, const std::vector<UnitRef>& units,
              const std::function<void(DwarfIndex&&)>& sink)
      : partials_(partials), sink_(sink), done_(units.size(), 0) {
    uint64_t total = 0;
    for (const UnitRef& u : units) total += u.size;
    uint64_t sum = 0, next_cut = total / kParts;
    for (size_t u = 0; u + 1 < units.size(); ++u) {
      sum += units[u].size;
      if (next_cut > 0 && sum >= next_cut) {
        chunk_end_.push_back(u + 1);
        while (next_cut <= sum) next_cut += total / kParts;
      }
    }
  }

  // Unit u is read: hands out every chunk now read to its end, in order.
  void UnitDone(size_t u) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[u] = 1;
    while (frontier_ < done_.size() && done_[frontier_]) ++frontier_;
    while (!hold_ && chunk_ < chunk_end_.size() && chunk_end_[chunk_] <= frontier_) {
      const size_t end = chunk_end_[chunk_];
      for (size_t k = next_; k < end; ++k) {
        // A damaged unit fails the file (CheckParts, in unit order): nothing past it goes out.
        if (!partials_[k].damage.empty()) hold_ = true;
      }
      if (hold_) return;
      DwarfIndex part;
      for (size_t k = next_; k < end; ++k) {
        units_out += partials_[k].units.size();
        functions_out += partials_[k].functions.size() + partials_[k].variables.size();
        Merge(partials_[k], part, file_ids, base);
        partials_[k] = Partial();  // its memory, now the part's
      }
      for (const DwarfUnit& unit : part.units) unit_offsets.push_back(unit.die_offset);
      base.files += static_cast<uint32_t>(part.raw_files.size());
      base.units += static_cast<uint32_t>(part.units.size());
      next_ = end;
      ++chunk_;
      sink_(std::move(part));
    }
  }

  bool any() const { return next_ > 0; }
  size_t next() const { return next_; }  // the first unit not handed out

  // What the parts handed out hold, for the rest (read after the threads are done).
  IndexBase base;
  std::unordered_map<std::string, uint32_t> file_ids;
  std::vector<uint64_t> unit_offsets;
  size_t units_out = 0, functions_out = 0;

 private:
  std::vector<Partial>& partials_;
  const std::function<void(DwarfIndex&&)>& sink_;
  std::mutex mu_;
  std::vector<char> done_;
  std::vector<size_t> chunk_end_;  // ascending, each < the unit count
  size_t frontier_ = 0, next_ = 0, chunk_ = 0;
  bool hold_ = false;
};

// Each text symbol's address, the unit dwarf_addrdie gives it (its line is read with that unit's
// walk), or none of the listed units (read afterwards).
struct SymbolsByUnit {
  std::vector<RawSymbolLine> raw;                // by address, one per address
  std::vector<std::vector<uint32_t>> unit_syms;  // per unit: indices into raw
  std::vector<uint32_t> other_syms;
};
SymbolsByUnit AssignSymbolsToUnits(BoundedDwarf& first, const std::vector<UnitRef>& units, const EntryPads& pads,
                                   const UnitsByAddress& units_by_address) {
  std::vector<std::pair<uint64_t, size_t>> syms = TextSymbolAddresses(first.elf());
  std::sort(syms.begin(), syms.end());
  syms.erase(std::unique(syms.begin(), syms.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
             syms.end());
  SymbolsByUnit out;
  out.raw.resize(syms.size());
  out.unit_syms.resize(units.size());
  std::unordered_map<Dwarf_Off, size_t> unit_at;
  for (size_t u = 0; u < units.size(); ++u) unit_at.emplace(units[u].die_offset, u);
  for (size_t i = 0; i < syms.size(); ++i) {
    out.raw[i].addr = syms[i].first;
    Dwarf_Die cu;
    if (units_by_address.Die(first.dwarf(), pads.LineAddress(syms[i].first), &cu) == nullptr) continue;
    auto it = unit_at.find(dwarf_dieoffset(&cu));
    (it == unit_at.end() ? out.other_syms : out.unit_syms[it->second]).push_back(static_cast<uint32_t>(i));
  }
  return out;
}

// The lines of the symbols in none of the listed units, each read with the unit dwarf_addrdie
// gives it.
void ReadOtherSymbolLines(BoundedDwarf& first, SymbolsByUnit& by_unit, const EntryPads& pads,
                          const UnitsByAddress& units_by_address) {
  if (!by_unit.other_syms.empty()) first.PrepareUnits();
  for (uint32_t i : by_unit.other_syms) {
    Dwarf_Die cu;
    const uint64_t at = pads.LineAddress(by_unit.raw[i].addr);
    if (units_by_address.Die(first.dwarf(), at, &cu) == nullptr) continue;
    RawSymbolLine r = LineAt(&cu, at);
    r.addr = by_unit.raw[i].addr;
    by_unit.raw[i] = std::move(r);
  }
}

enum class Scanned { kRead, kFastLines, kDeclined };
// The DIE scanner's read of one unit (die_scanner.h) into `part`, and the lines of its symbols
// `syms` into `raw`: kFastLines when its line table was read by the fast reader too; kDeclined,
// with `why`, when the scanner cannot read it.
Scanned ScanUnit(BoundedDwarf& h, const UnitRef& unit, Partial& part, UnitScanner& scanner, AddressMapper& mapper,
                 const std::vector<uint32_t>& syms, const EntryPads& pads, std::vector<RawSymbolLine>& raw,
                 std::string& why) {
  auto sections = LinkedDwarfSections(h.dwarf());  // per unit: a recycled handle maps anew
  if (!sections.ok()) {
    why = std::string(sections.status().message());
    return Scanned::kDeclined;
  }
  sections->fd = h.fd();
  ScanWalker walker(part, scanner, *sections, mapper);
  if (!walker.Walk(unit.end - unit.size)) {
    why = StrCat("unit at ", unit.die_offset, ": ", scanner.why());
    return Scanned::kDeclined;
  }
  for (uint32_t i : syms) {
    RawSymbolLine r = TableLineAt(walker.cu_offset(), walker.comp_dir(), pads.LineAddress(raw[i].addr), walker.table());
    r.addr = raw[i].addr;
    raw[i] = std::move(r);
  }
  return walker.table() != nullptr ? Scanned::kFastLines : Scanned::kRead;
}

// The index's rows from the partials not yet handed out in parts (from `first_kept` on), merged
// in unit order (the result does not depend on thread scheduling), then the symbols' lines.
void MergeInUnitOrder(std::vector<Partial>& partials, size_t first_kept, PartEmitter* emitter,
                      std::vector<RawSymbolLine>& raw, DwarfIndex& out) {
  std::unordered_map<std::string, uint32_t> file_ids;
  IndexBase base;
  std::vector<uint64_t> units_before;
  if (emitter) {
    file_ids = std::move(emitter->file_ids);
    base = emitter->base;
    units_before = std::move(emitter->unit_offsets);
  }
  {
    size_t units_n = 0, functions = 0, variables = 0;
    for (const Partial& p : partials) {
      units_n += p.units.size();
      functions += p.functions.size();
      variables += p.variables.size();
    }
    out.units.reserve(units_n);
    out.functions.reserve(functions);
    out.variables.reserve(variables);
  }
  for (size_t k = first_kept; k < partials.size(); ++k) Merge(partials[k], out, file_ids, base);
  std::vector<Partial>().swap(partials);
  AddSymbolLines(raw, out, file_ids, base, units_before);
}

// The order units are read in: largest first, so that no thread is left with one huge unit at the
// end; or as listed.
std::vector<size_t> UnitOrder(const std::vector<UnitRef>& units, bool largest_first) {
  std::vector<size_t> order(units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (largest_first) {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return units[a].size > units[b].size; });
  }
  return order;
}

// libdw's read of one unit into `part`, and the lines of its symbols `syms` into `raw`: whether
// its line table was read by the fast reader too; nullopt (the damage noted) when its DIE cannot
// be read.
std::optional<bool> WalkUnit(BoundedDwarf& h, const UnitRef& unit, Partial& part, AddressMapper& mapper,
                             const std::vector<uint32_t>& syms, const EntryPads& pads,
                             std::vector<RawSymbolLine>& raw) {
  h.PrepareUnits();
  Dwarf_Die cu;
  if (dwarf_offdie(h.dwarf(), unit.die_offset, &cu) == nullptr) {
    part.Damage(".debug_info", unit.die_offset, "unit DIE unreadable");
    return std::nullopt;
  }
  auto line_sections = LinkedLineSections(h.dwarf());  // per unit: a recycled handle maps anew
  UnitWalker walker(part, mapper, line_sections.ok() ? &*line_sections : nullptr);
  walker.Walk(&cu, unit.end);
  for (uint32_t i : syms) {
    RawSymbolLine r = LineAt(&cu, pads.LineAddress(raw[i].addr), walker.table());
    r.addr = raw[i].addr;
    raw[i] = std::move(r);
  }
  return walker.table() != nullptr;
}

absl::StatusOr<DwarfIndex> IndexLinked(const std::string& path, unsigned jobs, uint64_t budget,
                                       size_t* units_fast_lines, size_t* units_scanned,
                                       std::vector<std::string>* scan_misses, bool use_scanner,
                                       const std::function<void(DwarfIndex&&)>* on_part = nullptr) {
  // One bounded handle per thread (libdw_util.h): memory stays flat however many units are read.
  auto first = std::make_unique<BoundedDwarf>();
  RETURN_IF_ERROR(first->Open(path, budget));
  DwarfIndex out;
  out.build_id = ElfBuildId(first->elf());
  std::optional<std::vector<UnitRef>> plain;
  if (use_scanner) {
    if (auto sections = LinkedDwarfSections(first->dwarf()); sections.ok())
      plain = ListPlainUnits(first->fd(), *sections);
  }
  if (!plain) {
    ASSIGN_OR_RETURN(plain, ListUnits(path, first->dwarf(), first.get()));
  }
  const std::vector<UnitRef> units = std::move(*plain);
  std::vector<Dwarf_Off> unit_offsets;
  for (const UnitRef& u : units) unit_offsets.push_back(u.die_offset);
  first->SetUnits(unit_offsets);
  // Largest units first so that no thread is left with one huge CU at the end; in unit order
  // when parts are handed out (they go in unit order).
  const bool streaming = use_scanner && on_part != nullptr && *on_part;
  const std::vector<size_t> order = UnitOrder(units, /*largest_first=*/!streaming);

  // The line at every text symbol address is read with the walk of the unit dwarf_addrdie gives
  // it, while that unit's line table is loaded. (A unit outside the list: read afterwards.)
  const EntryPads pads = LinkedEntryPads(first->elf());
  first->PrepareUnits();
  // dwarf_addrdie, also without .debug_aranges
  const UnitsByAddress units_by_address(first->dwarf(), [&] { first->HeaderRead(); });
  SymbolsByUnit by_unit = AssignSymbolsToUnits(*first, units, pads, units_by_address);
  std::vector<RawSymbolLine>& raw = by_unit.raw;
  const std::vector<std::vector<uint32_t>>& unit_syms = by_unit.unit_syms;
  first->DropPages();

  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(std::max<size_t>(1, units.size()))));
  std::vector<Partial> partials(units.size());
  for (Partial& p : partials) p.pads = &pads;
  std::optional<PartEmitter> emitter;
  if (streaming) emitter.emplace(partials, units, *on_part);
  std::atomic<size_t> next{0};
  std::atomic<size_t> fast_units{0};
  std::vector<absl::Status> errors(jobs);
  std::atomic<bool> declined{false};
  std::atomic<size_t> scanned_units{0};
  std::mutex miss_mu;
  std::vector<std::string> misses;
  auto work = [&](unsigned tid, BoundedDwarf* h) {
    AddressMapper mapper;
    UnitScanner scanner;
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      size_t u = order[k];
      if (use_scanner) {
        // The scanner's read of the unit (die_scanner.h). Where it declines one, the whole file
        // is read again by libdw alone (below): libdw's answers for a damaged file depend on
        // which units it was asked for before, so a unit read by libdw in the middle of a
        // scanner pass could differ from a libdw-only read of the file.
        if (declined.load(std::memory_order_relaxed)) return;
        std::string why;
        switch (ScanUnit(*h, units[u], partials[u], scanner, mapper, unit_syms[u], pads, raw, why)) {
          case Scanned::kFastLines:
            ++fast_units;
            [[fallthrough]];
          case Scanned::kRead:
            ++scanned_units;
            if (auto recycled = h->Read(units[u].size); !recycled.ok()) {
              errors[tid] = recycled.status();
              return;
            }
            if (emitter) emitter->UnitDone(u);
            continue;
          case Scanned::kDeclined:
            break;
        }
        std::lock_guard<std::mutex> lock(miss_mu);
        if (misses.size() < 4) misses.push_back(std::move(why));
        declined = true;
        return;
      }
      const std::optional<bool> fast = WalkUnit(*h, units[u], partials[u], mapper, unit_syms[u], pads, raw);
      if (!fast) continue;
      if (*fast) ++fast_units;
      if (auto recycled = h->Read(units[u].size); !recycled.ok()) {
        errors[tid] = recycled.status();
        return;
      }
    }
  };
  RETURN_IF_ERROR(OnBoundedThreads(jobs, path, budget, unit_offsets, *first, work).status());
  for (const absl::Status& e : errors) RETURN_IF_ERROR(e);
  if (declined && emitter && emitter->any()) {
    return absl::AbortedError(StrCat(path, ": the DIE scanner declined a unit (", misses.empty() ? "" : misses.front(),
                                     ") after parts of the index went out: index it again without parts"));
  }
  if (declined) {
    first.reset();
    auto again = IndexLinked(path, jobs, budget, units_fast_lines, nullptr, nullptr, /*use_scanner=*/false);
    if (units_scanned != nullptr) *units_scanned = 0;
    if (scan_misses != nullptr) *scan_misses = std::move(misses);
    return again;
  }
  if (units_fast_lines != nullptr) *units_fast_lines = fast_units.load();
  if (units_scanned != nullptr) *units_scanned = scanned_units.load();
  if (scan_misses != nullptr) *scan_misses = std::move(misses);
  const size_t first_kept = emitter ? emitter->next() : 0;  // partials before it went out in parts
  {
    std::vector<Partial*> ps;
    for (size_t k = first_kept; k < partials.size(); ++k) ps.push_back(&partials[k]);
    RETURN_IF_ERROR(CheckParts(path, ps, emitter ? emitter->units_out : 0, emitter ? emitter->functions_out : 0));
  }
  ReadOtherSymbolLines(*first, by_unit, pads, units_by_address);
  first.reset();

  MergeInUnitOrder(partials, first_kept, emitter ? &*emitter : nullptr, raw, out);
  return out;
}

// A module's symbol lines in (section, offset) order, one per place (several text symbols may
// share one).
void SortUnique(std::vector<RawSymbolLine>& raw) {
  std::sort(raw.begin(), raw.end(), [](const RawSymbolLine& a, const RawSymbolLine& b) {
    return std::tie(a.section, a.addr) < std::tie(b.section, b.addr);
  });
  raw.erase(std::unique(raw.begin(), raw.end(),
                        [](const auto& a, const auto& b) { return a.section == b.section && a.addr == b.addr; }),
            raw.end());
}

absl::StatusOr<DwarfIndex> IndexRelocatable(const std::string& path) {
  RelocatedDwarf rd;
  RETURN_IF_ERROR(OpenRelocated(path, rd));
  Dwfl_Module* mod = rd.mod;
  const Dwarf_Addr bias = rd.bias;
  Dwarf* dbg = rd.dwarf;

  DwarfIndex out;
  out.relocatable = true;
  const unsigned char* bits;
  GElf_Addr vaddr;
  int len = dwfl_module_build_id(mod, &bits, &vaddr);
  if (len > 0) out.build_id = BuildId::FromRaw(std::string_view(reinterpret_cast<const char*>(bits), len));
  std::mutex mu;
  AddressMapper mapper(mod, bias, &out.sections, &mu);
  ASSIGN_OR_RETURN(std::vector<UnitRef> units, ListUnits(path, dbg));
  // The module's text symbols, as libdwfl lays them out: DWARF address (relocated - bias),
  // and whether each starts with the architecture's patchable-entry NOPs.
  struct TextSym {
    uint64_t addr = 0;
    bool padded = false;
  };
  std::vector<TextSym> text_syms;
  EntryPads pads;
  {
    GElf_Ehdr ehm;
    GElf_Addr elf_bias = 0;
    Elf* melf = dwfl_module_getelf(mod, &elf_bias);
    const KernelArch* arch = melf && gelf_getehdr(melf, &ehm) ? ArchOfMachine(ehm.e_machine) : nullptr;
    if (arch != nullptr) pads.bytes = arch->EntryPad();
    int nsyms = dwfl_module_getsymtab(mod);
    for (int i = 1; i < nsyms; ++i) {
      GElf_Sym sym;
      GElf_Addr addr;
      GElf_Word shndx;
      Elf* elf = nullptr;
      Dwarf_Addr sym_bias = 0;
      const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, &sym_bias);
      int type = GELF_ST_TYPE(sym.st_info);
      if (name == nullptr || (type != STT_FUNC && type != STT_NOTYPE) || shndx == SHN_UNDEF || shndx == SHN_ABS) {
        continue;
      }
      Elf_Scn* scn = elf ? elf_getscn(elf, shndx) : nullptr;
      GElf_Shdr sh;
      if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || !(sh.sh_flags & SHF_EXECINSTR)) continue;
      // (An ET_REL symbol's value is its offset in its section, whatever address libdwfl gave
      // the section; a linked one's is an address.)
      const uint64_t offset = ehm.e_type == ET_REL ? sym.st_value : sym.st_value - sh.sh_addr;
      const bool padded =
          arch != nullptr && arch->entry_pad_words != 0 && StartsWithEntryPad(elf, shndx, offset, *arch);
      text_syms.push_back({addr - bias, padded});
      if (padded) pads.at.insert(addr - bias);
    }
  }
  Partial p;
  p.pads = &pads;
  for (const auto& u : units) {
    Dwarf_Die cu;
    if (dwarf_offdie(dbg, u.die_offset, &cu) == nullptr) {
      p.Damage(".debug_info", u.die_offset, "unit DIE unreadable");
      break;
    }
    UnitWalker(p, mapper).Walk(&cu, u.end);
    if (!p.damage.empty()) break;
  }
  RETURN_IF_ERROR(CheckParts(path, {&p}));
  std::unordered_map<std::string, uint32_t> file_ids;
  Merge(p, out, file_ids);

  // Lines at every text symbol of the module's symbol table, in libdwfl's relocated layout
  // (dwfl_module_addrdie: the unit of a dwfl address less the module's bias).
  std::vector<RawSymbolLine> raw;
  const UnitsByAddress units_by_address(dbg);
  for (const TextSym& ts : text_syms) {
    RawSymbolLine r;
    uint64_t mapped;
    uint16_t section;
    if (!mapper.Map(ts.addr, mapped, section)) continue;
    const uint64_t at = ts.addr + (ts.padded ? pads.bytes : 0) + bias;  // libdwfl's address of the line
    Dwarf_Die cu;
    if (units_by_address.Die(dbg, at - bias, &cu) != nullptr) r = LineAt(&cu, at - bias);
    r.addr = mapped;
    r.section = section;
    raw.push_back(std::move(r));
  }
  SortUnique(raw);
  AddSymbolLines(raw, out, file_ids);
  return out;
}

// What DwarfIndex::reader says of a module read by IndexRelocatedCopy.
constexpr char kRelocatedReader[] = "symdex (relocated by symdex)";

// An ET_REL module read as a linked file is: by the DIE scanner and the line reader, from
// symdex's relocated copy of it (relocated_elf.h), each address mapped to section + offset
// through the copy's layout — IndexRelocatable's index, built the way it builds it: one thread,
// the units in order (sections are numbered as first met), then the text symbols in symbol
// table order. Any error — the scanner declines a unit, the file is damaged — is the caller's
// cue to read the module with IndexRelocatable instead (which words any damage).
absl::StatusOr<DwarfIndex> IndexRelocatedCopy(const std::string& path, const RelocatedElf& copy,
                                              size_t* units_fast_lines, size_t* units_scanned) {
  BoundedDwarf h;
  RETURN_IF_ERROR(h.Open(copy.path(), kUnitBytesPerDwarfHandle));
  DwarfIndex out;
  out.relocatable = true;
  out.build_id = LibdwflBuildId(h.elf());  // as IndexRelocatable's dwfl_module_build_id
  std::mutex mu;
  AddressMapper mapper(&copy.layout(), &out.sections, &mu);
  std::optional<std::vector<UnitRef>> listed;
  if (auto sections = LinkedDwarfSections(h.dwarf()); sections.ok()) {
    listed = ListPlainUnits(h.fd(), *sections);
  } else {
    return sections.status();
  }
  if (!listed) {
    ASSIGN_OR_RETURN(listed, ListUnits(path, h.dwarf(), &h));
  }
  const std::vector<UnitRef> units = std::move(*listed);
  std::vector<Dwarf_Off> unit_offsets;
  for (const UnitRef& u : units) unit_offsets.push_back(u.die_offset);
  h.SetUnits(unit_offsets);

  // The text symbols, as IndexRelocatable takes them from libdwfl: named FUNC/NOTYPE symbols of
  // executable sections, in symbol table order, at their layout addresses (the copy's values).
  struct TextSym {
    uint64_t addr = 0;
    bool padded = false;
  };
  std::vector<TextSym> text_syms;
  EntryPads pads;
  {
    Elf* elf = h.elf();
    GElf_Ehdr eh;
    const KernelArch* arch = gelf_getehdr(elf, &eh) ? ArchOfMachine(eh.e_machine) : nullptr;
    if (arch != nullptr) pads.bytes = arch->EntryPad();
    ForEachSymtabSymbol(elf, [&](const GElf_Sym& sym, const char* name) {
      const int type = GELF_ST_TYPE(sym.st_info);
      if (name == nullptr || (type != STT_FUNC && type != STT_NOTYPE) || sym.st_shndx == SHN_UNDEF ||
          sym.st_shndx == SHN_ABS) {
        return true;
      }
      Elf_Scn* scn = elf_getscn(elf, sym.st_shndx);
      GElf_Shdr sh;
      if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || !(sh.sh_flags & SHF_EXECINSTR)) return true;
      const uint64_t offset = (sh.sh_flags & SHF_ALLOC) ? sym.st_value - sh.sh_addr : sym.st_value;
      const bool padded =
          arch != nullptr && arch->entry_pad_words != 0 && StartsWithEntryPad(elf, sym.st_shndx, offset, *arch);
      text_syms.push_back({sym.st_value, padded});
      if (padded) pads.at.insert(sym.st_value);
      return true;
    });
  }
  // Each symbol's line is read with its unit (dwarf_addrdie's), while the unit's table is loaded.
  std::vector<RawSymbolLine> lines(text_syms.size());
  std::vector<std::vector<uint32_t>> unit_syms(units.size());
  std::vector<uint32_t> other_syms;
  h.PrepareUnits();
  const UnitsByAddress units_by_address(h.dwarf(), [&] { h.HeaderRead(); });
  {
    std::unordered_map<Dwarf_Off, size_t> unit_at;
    for (size_t u = 0; u < units.size(); ++u) unit_at.emplace(units[u].die_offset, u);
    for (size_t i = 0; i < text_syms.size(); ++i) {
      Dwarf_Die cu;
      if (units_by_address.Die(h.dwarf(), pads.LineAddress(text_syms[i].addr), &cu) == nullptr) continue;
      auto it = unit_at.find(dwarf_dieoffset(&cu));
      (it == unit_at.end() ? other_syms : unit_syms[it->second]).push_back(static_cast<uint32_t>(i));
    }
  }
  h.DropPages();

  Partial p;
  p.pads = &pads;
  UnitScanner scanner;
  size_t fast = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    ASSIGN_OR_RETURN(DwarfSections sections, LinkedDwarfSections(h.dwarf()));  // a recycled handle maps anew
    sections.fd = h.fd();
    ScanWalker walker(p, scanner, sections, mapper);
    if (!walker.Walk(units[u].end - units[u].size)) {
      return absl::FailedPreconditionError(StrCat("unit at ", units[u].die_offset, ": ", scanner.why()));
    }
    if (walker.table() != nullptr) ++fast;
    for (uint32_t i : unit_syms[u]) {
      lines[i] =
          TableLineAt(walker.cu_offset(), walker.comp_dir(), pads.LineAddress(text_syms[i].addr), walker.table());
    }
    RETURN_IF_ERROR(h.Read(units[u].size).status());
  }
  RETURN_IF_ERROR(CheckParts(path, {&p}));
  if (!other_syms.empty()) h.PrepareUnits();
  for (uint32_t i : other_syms) {
    Dwarf_Die cu;
    const uint64_t at = pads.LineAddress(text_syms[i].addr);
    if (units_by_address.Die(h.dwarf(), at, &cu) != nullptr) lines[i] = LineAt(&cu, at);
  }
  std::unordered_map<std::string, uint32_t> file_ids;
  Merge(p, out, file_ids);

  // IndexRelocatable's symbol lines: mapped in symbol table order (sections not met in the
  // units are numbered here), sorted, one per (section, offset).
  std::vector<RawSymbolLine> raw;
  for (size_t i = 0; i < text_syms.size(); ++i) {
    uint64_t mapped;
    uint16_t section;
    if (!mapper.Map(text_syms[i].addr, mapped, section)) continue;
    RawSymbolLine r = std::move(lines[i]);
    r.addr = mapped;
    r.section = section;
    raw.push_back(std::move(r));
  }
  SortUnique(raw);
  AddSymbolLines(raw, out, file_ids);
  if (units_fast_lines != nullptr) *units_fast_lines = fast;
  if (units_scanned != nullptr) *units_scanned = units.size();
  out.reader = kRelocatedReader;
  return out;
}

// A module (ET_REL): relocated and read by symdex (IndexRelocatedCopy), else through libdwfl
// (IndexRelocatable) — when symdex declines to relocate it, when the scanner declines one of its
// units, when anything is wrong with it, and when SYMDEX_MODULES_VIA=libdwfl or
// SYMDEX_DIE_READER/SYMDEX_LINE_READER=libdw ask for libdw's readers. One reader per file: a
// module is never read partly by one and partly by the other.
absl::StatusOr<DwarfIndex> IndexModule(const std::string& path, const DwarfIndexOptions& opts) {
  if (!ModulesViaLibdwflForced() && !LibdwDiesForced() && !LibdwLinesForced()) {
    std::string why;
    if (auto copy = RelocatedElf::Make(path); copy.ok()) {
      auto idx = IndexRelocatedCopy(path, *copy, opts.units_fast_lines, opts.units_scanned);
      if (idx.ok()) {
        if (opts.relocated_copy != nullptr) opts.relocated_copy->emplace(std::move(*copy));
        return idx;
      }
      why = StrCat(path, ": the relocated copy was not read by symdex (", idx.status().message(), ")");
    } else {
      why = std::string(copy.status().message());
    }
    if (opts.scan_misses != nullptr) opts.scan_misses->push_back(std::move(why));
  }
  if (opts.units_fast_lines != nullptr) *opts.units_fast_lines = 0;
  if (opts.units_scanned != nullptr) *opts.units_scanned = 0;
  return IndexRelocatable(path);
}

absl::StatusOr<DwarfIndex> IndexPlainFile(const std::string& path, unsigned jobs, const DwarfIndexOptions& opts) {
  bool relocatable = false;
  {
    OpenedDwarf probe;
    probe.fd.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!probe.fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
    probe.elf.reset(elf_begin(probe.fd.get(), ELF_C_READ_MMAP, nullptr));
    GElf_Ehdr eh;
    if (!probe.elf || elf_kind(probe.elf.get()) != ELF_K_ELF || gelf_getehdr(probe.elf.get(), &eh) == nullptr) {
      return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
    }
    relocatable = eh.e_type == ET_REL;
  }
  if (relocatable) return IndexModule(path, opts);
  return IndexLinked(path, jobs, opts.handle_budget ? opts.handle_budget : kUnitBytesPerDwarfHandle,
                     opts.units_fast_lines, opts.units_scanned, opts.scan_misses,
                     !LibdwDiesForced() && !LibdwLinesForced(), &opts.on_part);
}

}  // namespace

absl::StatusOr<DwarfIndex> IndexDwarfFile(const std::string& original, const DwarfIndexOptions& opts) {
  InitLibelf();
  // Compressed sections: read from a decompressed copy (plain_elf.h), as a plain file is.
  unsigned jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
  ASSIGN_OR_RETURN(const PlainElf plain, PlainElf::Open(original, jobs));
  size_t scanned = 0;
  std::vector<std::string> misses;
  DwarfIndexOptions o = opts;
  o.units_scanned = &scanned;
  o.scan_misses = &misses;
  auto idx = IndexPlainFile(plain.path(), jobs, o);
  if (opts.units_scanned != nullptr) *opts.units_scanned = scanned;
  if (opts.scan_misses != nullptr) *opts.scan_misses = misses;
  if (!idx.ok()) return plain.Explain(idx.status());
  if (idx->relocatable) {
    if (idx->reader.empty()) idx->reader = "libdwfl";  // (IndexRelocatedCopy names itself)
  } else if (scanned > 0 && misses.empty()) {          // (streamed: the parts' units are not in idx)
    idx->reader = "symdex";
  } else {
    idx->reader = misses.empty() ? "libdw" : StrCat("libdw (the scanner declined ", misses.front(), ")");
  }
  idx->reader = plain.ReadBy(idx->reader);
  return idx;
}

}  // namespace symdex::debuginfo
