// An abbreviation-driven reader of .debug_info (docs/architecture.md, "Reading DWARF") that
// gives the DWARF index and the address map what libdw 0.188 gives them — the same DIEs, the
// same attribute values, the same sibling jumps, the same address ranges — without libdw's
// per-DIE abbreviation lookup under a lock and its re-decoding of the attribute list for every
// dwarf_attr call. Each unit's abbreviations are compiled once into a dense table; a DIE is read
// in one pass that notes where the ~19 attributes symdex reads are and skips the rest by size.
//
// The scanner answers only where it answers exactly as libdw does: a linked (ET_EXEC/ET_DYN),
// little-endian file without compressed sections (plain_elf.h decompresses those first) or a
// dwz alternate file, units of DWARF 2-5 that are plain compile/partial units (not split DWARF),
// attribute forms within the unit or DWARF 5's index tables — gcc's forms and clang's strx*,
// addrx*, rnglistx (.debug_str_offsets, .debug_addr, .debug_rnglists from the unit DIE's
// DW_AT_str_offsets_base / addr_base / rnglists_base), the DW_RLE_*x range entries and
// DW_OP_addrx locations — but not ref_addr, ref_sig8, indirect or GNU split forms. Anything else — those forms, a value
// out of bounds, an unknown abbreviation, a sibling pointing backwards, a DIE of tag 0 — fails the unit (failed() and
// why()), and the caller then reads the WHOLE FILE through libdw (not just that unit: libdw's answers for a damaged
// file depend on which units it was asked for before): damage is reported in libdw's words, and a file the scanner read
// is one libdw reads the same way. libdw is the oracle in tests/unit/die_scanner_test.cc (the DWARF index and the
// address map of the fixture kernel at DWARF 4 and 5 and of the Debian vmlinux, byte for byte; damaged copies, the same
// answer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <elfutils/libdw.h>

#include "server/common/status.h"
#include "server/debuginfo/dwarf/line_table.h"

namespace symdex::debuginfo {

// A linked debug file's DWARF sections as libdw takes them (the first section of a name, not
// in a section group): views into the file's mapping.
struct DwarfSections {
  std::string_view info, abbrev, str, line_str, rnglists, ranges, line;
  // DWARF 5's index tables (clang's strx / addrx / rnglistx forms).
  std::string_view str_offsets, addr;
  // Where .debug_info lies in the file. With `fd` set (>= 0), each unit is read with pread()
  // into the scanner's own buffer instead of through the mapping: a walk over vmlinux through
  // the mapping spent ~40% of its time in the kernel mapping pages and dropping them again.
  int fd = -1;
  uint64_t info_file_offset = 0;
  LineSections lines() const { return LineSections{line, line_str, str}; }
};
// NotFound when the scanner does not read the file (relocatable, big-endian, a compressed or
// NOBITS debug section, a .gnu_debugaltlink, no .debug_info): libdw reads all of it.
absl::StatusOr<DwarfSections> LinkedDwarfSections(Dwarf* dbg);

// Bytes of a form's value in a DIE when they are fixed (libdw_form.c's table); -1 for the
// variable forms (LEB128, strings, blocks); -2 for an unknown form or DW_FORM_indirect.
int FixedFormSize(uint64_t form, unsigned version, unsigned address_size, unsigned offset_size);

// SYMDEX_DIE_READER=libdw in the environment: every unit through libdw (the tests' way to build
// the same output both ways, and a debugging escape hatch).
bool LibdwDiesForced();

// The attributes a ScanDie records (the first of each name, as dwarf_attr finds it).
enum class At : uint8_t {
  kSibling,
  kName,
  kDeclaration,
  kExternal,
  kLowPc,
  kHighPc,
  kRanges,
  kEntryPc,
  kAbstractOrigin,
  kSpecification,
  kDeclFile,
  kDeclLine,
  kInline,
  kLocation,
  kCallFile,
  kCallLine,
  kCallColumn,
  kCompDir,
  kStmtList,
  // The unit DIE's bases of DWARF 5's index tables (read by the strx, addrx, rnglistx forms).
  kStrOffsetsBase,
  kAddrBase,
  kRnglistsBase,
  kCount
};

// Valid only where the DIE's `present` bit is set: left uninitialized otherwise (a DIE is read
// millions of times; zeroing 19 of these each time was a third of the scanner's time).
struct ScanAttr {
  uint16_t form;
  const uint8_t* value;
  int64_t implicit;  // DW_FORM_implicit_const's value
};

struct ScanDie {
  uint64_t offset = 0;           // in .debug_info
  const uint8_t* end = nullptr;  // just past its attributes
  const struct ScanAbbrev* abbrev = nullptr;
  uint32_t present = 0;  // bit per At
  ScanAttr attrs[static_cast<size_t>(At::kCount)];

  int tag() const;
  bool has_children() const;
  bool has(At a) const { return (present >> static_cast<unsigned>(a)) & 1u; }
  const ScanAttr* get(At a) const { return has(a) ? &attrs[static_cast<size_t>(a)] : nullptr; }
};

struct ScanAbbrevAttr {
  uint16_t name = 0, form = 0;
  int16_t size = -1;    // bytes in the DIE when fixed, else -1
  uint8_t want = 0xff;  // At index, or 0xff
  int64_t implicit = 0;
};

struct ScanAbbrev {
  uint16_t tag = 0;
  bool children = false;
  bool defined = false;
  uint32_t attrs_begin = 0, attrs_count = 0;
  uint32_t want_mask = 0;  // which At the abbreviation has
};

// One unit of a file, read with its compiled abbreviations. Reuse one scanner per thread:
// Open() keeps the vectors' storage.
class UnitScanner {
 public:
  // The unit whose header starts at `header_offset` in .debug_info. False: the scanner does not
  // read this unit (why() says why); the caller reads the file with libdw.
  bool Open(const DwarfSections& sections, uint64_t header_offset);

  bool failed() const { return !why_.empty(); }
  const std::string& why() const { return why_; }
  uint8_t version() const { return version_; }
  uint8_t address_size() const { return address_size_; }
  uint64_t die_offset() const { return die_offset_; }
  uint64_t end_offset() const { return end_offset_; }

  // The unit DIE (false: failed).
  bool UnitDie(ScanDie& cu);
  // The DIE at a .debug_info offset inside the unit (false: failed, or a null entry there).
  bool ReadAt(uint64_t offset, ScanDie& die);

  // dwarf_child: 0 and the first child; 1: none; -1: failed.
  int Child(const ScanDie& die, ScanDie& child);
  // dwarf_siblingof: 0 and the next sibling; 1: none (`*stop`: the offset where the walk
  // ended); -1: failed.
  int Sibling(const ScanDie& die, ScanDie& next, uint64_t* stop = nullptr);
  // die_extent.h ChainReachesEnd for the last DIE of the unit's top-level chain: true if only
  // zero bytes follow its subtree up to the unit's end. False without failing: libdw's walk
  // reports the damage.
  bool ChainReachesEnd(const ScanDie& last);

  // Attribute values, as the libdw call named. Each returns false when libdw's call fails; a
  // form the scanner does not decode as libdw would fails the unit too (check failed()).
  bool Udata(const ScanAttr& a, uint64_t& v);       // dwarf_formudata (the constant forms)
  bool Addr(const ScanAttr& a, uint64_t& v);        // dwarf_formaddr
  const char* String(const ScanAttr& a);            // dwarf_formstring (nullptr: none)
  bool RefDie(const ScanAttr& a, ScanDie& target);  // dwarf_formref_die (same unit)
  // A section offset (DW_FORM_sec_offset; data4/data8 before DWARF 4).
  bool SecOffset(const ScanAttr& a, uint64_t& offset);
  // dwarf_formblock: a block or exprloc's bytes (ReadDie checked they lie inside the unit).
  bool Block(const ScanAttr& a, const uint8_t*& data, uint64_t& len);

  // dwarf_attr_integrate: the attribute on the DIE, else on its abstract origin, else on its
  // specification, at most 16 hops. nullptr: none. The pointer stays valid until the next call.
  const ScanAttr* Integrate(const ScanDie& die, At a);
  bool HasIntegrate(const ScanDie& die, At a);  // dwarf_hasattr_integrate
  const char* Name(const ScanDie& die);         // dwarf_diename
  // dwarf_ranges' whole list, appended in its order (empty ranges included). False: failed.
  bool Ranges(const ScanDie& die, std::vector<std::pair<uint64_t, uint64_t>>& out);
  // dwarf_entrypc. False: no entry pc (or failed).
  bool EntryPc(const ScanDie& die, uint64_t& pc);
  // A variable's DW_AT_location when it is one address, as dwarf_getlocation reads it: a
  // single DW_OP_addr, or a single DW_OP_addrx (dwarf_getlocation_attr + dwarf_formaddr).
  // False: a location list, another expression, or failed (check failed()).
  bool SingleAddress(const ScanAttr& loc, uint64_t& addr);
  // __libdw_addrx: entry `index` of the unit's .debug_addr table. False: failed (the unit too).
  bool AddrIndex(uint64_t index, uint64_t& v, uint64_t at);

  // Fails the unit.
  bool Fail(uint64_t offset, std::string_view what);

 private:
  bool ReadDie(const uint8_t* p, ScanDie& die);
  bool Pread(uint64_t offset, size_t size);
  bool ReadUnitBytes(uint64_t offset);
  bool CompileAbbrevs(uint64_t offset);
  bool SubtreeEnd(const ScanDie& die, uint64_t& end, int depth);
  bool CuBase(uint64_t& base);
  bool Bases();
  bool Index(const ScanAttr& a, uint64_t& index);
  uint64_t Offset(const uint8_t* p) const { return unit_offset_ + static_cast<uint64_t>(p - start_); }
  const uint8_t* Ptr(uint64_t offset) const { return start_ + (offset - unit_offset_); }

  DwarfSections sec_;
  uint64_t unit_offset_ = 0;        // the unit's header in .debug_info
  std::unique_ptr<uint8_t[]> buf_;  // the unit's bytes when read with pread
  size_t buf_size_ = 0, buf_used_ = 0;
  const uint8_t* start_ = nullptr;  // the unit's header
  const uint8_t* end_ = nullptr;    // the unit's end
  uint8_t version_ = 0, address_size_ = 0, offset_size_ = 0, unit_type_ = 0;
  uint64_t die_offset_ = 0, end_offset_ = 0;
  std::vector<ScanAbbrev> abbrevs_;
  std::vector<ScanAbbrevAttr> attrs_;
  std::string why_;
  bool have_base_ = false;
  uint64_t base_ = 0;
  bool have_bases_ = false, have_str_base_ = false, have_rng_base_ = false;
  uint64_t str_base_ = 0, addr_base_ = 0, rng_base_ = 0;
  ScanDie hop_[2];  // Integrate's chain
};

}  // namespace symdex::debuginfo
