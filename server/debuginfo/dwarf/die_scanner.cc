// The libdw 0.188 functions each part follows are named at the part (dwarf_child.c,
// dwarf_siblingof.c, dwarf_attr_integrate.c, dwarf_ranges.c, dwarf_formudata.c, ...); the memo
// docs/architecture.md ("Reading DWARF") lists the semantics copied. Where the scanner is unsure it fails the
// unit instead of guessing: libdw then reads it.
#include "server/debuginfo/dwarf/die_scanner.h"

#include <dwarf.h>
#include <elf.h>
#include <gelf.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"
#include "server/debuginfo/dwarf/libdw_util.h"

namespace symdex::debuginfo {
namespace {

constexpr uint8_t kNoWant = 0xff;

uint8_t WantOf(uint64_t name) {
  switch (name) {
    case DW_AT_sibling:
      return static_cast<uint8_t>(At::kSibling);
    case DW_AT_name:
      return static_cast<uint8_t>(At::kName);
    case DW_AT_declaration:
      return static_cast<uint8_t>(At::kDeclaration);
    case DW_AT_external:
      return static_cast<uint8_t>(At::kExternal);
    case DW_AT_low_pc:
      return static_cast<uint8_t>(At::kLowPc);
    case DW_AT_high_pc:
      return static_cast<uint8_t>(At::kHighPc);
    case DW_AT_ranges:
      return static_cast<uint8_t>(At::kRanges);
    case DW_AT_entry_pc:
      return static_cast<uint8_t>(At::kEntryPc);
    case DW_AT_abstract_origin:
      return static_cast<uint8_t>(At::kAbstractOrigin);
    case DW_AT_specification:
      return static_cast<uint8_t>(At::kSpecification);
    case DW_AT_decl_file:
      return static_cast<uint8_t>(At::kDeclFile);
    case DW_AT_decl_line:
      return static_cast<uint8_t>(At::kDeclLine);
    case DW_AT_inline:
      return static_cast<uint8_t>(At::kInline);
    case DW_AT_location:
      return static_cast<uint8_t>(At::kLocation);
    case DW_AT_call_file:
      return static_cast<uint8_t>(At::kCallFile);
    case DW_AT_call_line:
      return static_cast<uint8_t>(At::kCallLine);
    case DW_AT_call_column:
      return static_cast<uint8_t>(At::kCallColumn);
    case DW_AT_comp_dir:
      return static_cast<uint8_t>(At::kCompDir);
    case DW_AT_stmt_list:
      return static_cast<uint8_t>(At::kStmtList);
    case DW_AT_str_offsets_base:
      return static_cast<uint8_t>(At::kStrOffsetsBase);
    case DW_AT_addr_base:
      return static_cast<uint8_t>(At::kAddrBase);
    case DW_AT_rnglists_base:
      return static_cast<uint8_t>(At::kRnglistsBase);
    default:
      return kNoWant;
  }
}

// Unit-DIE attributes of split DWARF (a skeleton unit and its .dwo, GNU's DWARF 4 extension):
// a unit carrying one is libdw's. DWARF 5's own bases (str_offsets, addr, rnglists, loclists)
// are read by the scanner.
bool BaseAttribute(uint64_t name) {
  switch (name) {
    case DW_AT_dwo_name:
    case DW_AT_GNU_dwo_name:
    case DW_AT_GNU_dwo_id:
    case DW_AT_GNU_ranges_base:
    case DW_AT_GNU_addr_base:
      return true;
    default:
      return false;
  }
}

}  // namespace

int FixedFormSize(uint64_t form, unsigned version, unsigned address_size, unsigned offset_size) {
  switch (form) {
    case DW_FORM_flag_present:
    case DW_FORM_implicit_const:
      return 0;
    case DW_FORM_data1:
    case DW_FORM_ref1:
    case DW_FORM_flag:
    case DW_FORM_strx1:
    case DW_FORM_addrx1:
      return 1;
    case DW_FORM_data2:
    case DW_FORM_ref2:
    case DW_FORM_strx2:
    case DW_FORM_addrx2:
      return 2;
    case DW_FORM_strx3:
    case DW_FORM_addrx3:
      return 3;
    case DW_FORM_data4:
    case DW_FORM_ref4:
    case DW_FORM_strx4:
    case DW_FORM_addrx4:
    case DW_FORM_ref_sup4:
      return 4;
    case DW_FORM_data8:
    case DW_FORM_ref8:
    case DW_FORM_ref_sig8:
    case DW_FORM_ref_sup8:
      return 8;
    case DW_FORM_data16:
      return 16;
    case DW_FORM_addr:
      return static_cast<int>(address_size);
    case DW_FORM_ref_addr:
      return static_cast<int>(version == 2 ? address_size : offset_size);
    case DW_FORM_strp:
    case DW_FORM_sec_offset:
    case DW_FORM_line_strp:
    case DW_FORM_strp_sup:
    case DW_FORM_GNU_ref_alt:
    case DW_FORM_GNU_strp_alt:
      return static_cast<int>(offset_size);
    case DW_FORM_udata:
    case DW_FORM_sdata:
    case DW_FORM_ref_udata:
    case DW_FORM_strx:
    case DW_FORM_addrx:
    case DW_FORM_loclistx:
    case DW_FORM_rnglistx:
    case DW_FORM_GNU_addr_index:
    case DW_FORM_GNU_str_index:
    case DW_FORM_string:
    case DW_FORM_block1:
    case DW_FORM_block2:
    case DW_FORM_block4:
    case DW_FORM_block:
    case DW_FORM_exprloc:
      return -1;
    default:
      return -2;
  }
}

namespace {

// Entry `index` of a table of `width`-byte values at `base` of `table` (.debug_str_offsets,
// .debug_addr, the offsets after a .debug_rnglists header): false when it lies outside.
bool TableEntry(std::string_view table, uint64_t base, uint64_t index, unsigned width, uint64_t& v) {
  if (base > table.size() || index >= (table.size() - base) / width) return false;
  v = LoadLittle(reinterpret_cast<const uint8_t*>(table.data()) + base + index * width, width);
  return true;
}

}  // namespace

bool LibdwDiesForced() {
  const char* v = std::getenv("SYMDEX_DIE_READER");
  return v != nullptr && std::strcmp(v, "libdw") == 0;
}

absl::StatusOr<DwarfSections> LinkedDwarfSections(Dwarf* dbg) {
  DwarfSections out;
  SectionSlot slots[] = {{".debug_info", &out.info, &out.info_file_offset},
                         {".debug_abbrev", &out.abbrev},
                         {".debug_str", &out.str},
                         {".debug_line_str", &out.line_str},
                         {".debug_rnglists", &out.rnglists},
                         {".debug_ranges", &out.ranges},
                         {".debug_line", &out.line},
                         {".debug_str_offsets", &out.str_offsets},
                         {".debug_addr", &out.addr}};
  RETURN_IF_ERROR(TakeLinkedSections(dbg, slots, "libdw reads its DIEs", "libdw reads it", /*whole_file=*/true));
  if (out.info.empty() || out.abbrev.empty()) return absl::NotFoundError("no .debug_info or .debug_abbrev");
  return out;
}

int ScanDie::tag() const { return abbrev ? abbrev->tag : 0; }
bool ScanDie::has_children() const { return abbrev && abbrev->children; }

bool UnitScanner::Fail(uint64_t offset, std::string_view what) {
  if (why_.empty()) why_ = fmt::format("at {:#x}: {}", offset, what);
  return false;
}

bool UnitScanner::Open(const DwarfSections& sections, uint64_t header_offset) {
  sec_ = sections;
  why_.clear();
  have_base_ = false;
  have_bases_ = have_str_base_ = have_rng_base_ = false;
  if (header_offset >= sec_.info.size()) return Fail(header_offset, "unit header past .debug_info");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(sec_.info.data()) + header_offset;
  const uint8_t* info_end = reinterpret_cast<const uint8_t*>(sec_.info.data()) + sec_.info.size();
  if (sec_.fd >= 0) {
    // The unit's bytes into our buffer (the same bytes: the file is read-only to us), without
    // touching the mapping's pages at all.
    if (!ReadUnitBytes(header_offset)) return false;
    p = buf_.get();
    info_end = p + buf_used_;
  }
  unit_offset_ = header_offset;
  start_ = p;
  end_ = info_end;  // until the unit's length is known
  auto have = [&](size_t n) { return static_cast<size_t>(info_end - p) >= n; };
  if (!have(4)) return Fail(header_offset, "truncated unit header");
  uint64_t length = LoadLittle(p, 4);
  p += 4;
  offset_size_ = 4;
  if (length == 0xffffffff) {
    if (!have(8)) return Fail(header_offset, "truncated unit header");
    length = LoadLittle(p, 8);
    p += 8;
    offset_size_ = 8;
  } else if (length >= 0xfffffff0) {
    return Fail(header_offset, "reserved unit length");
  }
  if (length > static_cast<uint64_t>(info_end - p)) return Fail(header_offset, "unit runs past .debug_info");
  end_ = p + length;
  end_offset_ = Offset(end_);
  if (!have(2)) return Fail(header_offset, "truncated unit header");
  const uint64_t version = LoadLittle(p, 2);
  p += 2;
  if (version < 2 || version > 5) return Fail(header_offset, "unit version outside 2-5");
  version_ = static_cast<uint8_t>(version);
  uint64_t abbrev_offset = 0;
  if (version_ >= 5) {
    if (!have(2u + offset_size_)) return Fail(header_offset, "truncated unit header");
    unit_type_ = p[0];
    address_size_ = p[1];
    abbrev_offset = LoadLittle(p + 2, offset_size_);
    p += 2 + offset_size_;
    if (unit_type_ != DW_UT_compile && unit_type_ != DW_UT_partial) return Fail(header_offset, "not a plain unit");
  } else {
    if (!have(1u + offset_size_)) return Fail(header_offset, "truncated unit header");
    unit_type_ = DW_UT_compile;
    abbrev_offset = LoadLittle(p, offset_size_);
    address_size_ = p[offset_size_];
    p += 1 + offset_size_;
  }
  if (address_size_ != 4 && address_size_ != 8) return Fail(header_offset, "address size not 4 or 8");
  if (p > end_) return Fail(header_offset, "unit shorter than its header");
  die_offset_ = Offset(p);
  return CompileAbbrevs(abbrev_offset);
}

// pread() of `size` bytes at `offset` of .debug_info into buf_ (grown as needed).
bool UnitScanner::Pread(uint64_t offset, size_t size) {
  if (size > buf_size_) {
    buf_size_ = std::max(size, buf_size_ * 2);
    buf_.reset(new uint8_t[buf_size_]);
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n =
        ::pread(sec_.fd, buf_.get() + done, size - done, static_cast<off_t>(sec_.info_file_offset + offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(offset, StrCat("reading .debug_info: ", n < 0 ? std::strerror(errno) : "end of file"));
    done += static_cast<size_t>(n);
  }
  buf_used_ = size;
  return true;
}

// The whole unit at `offset` into buf_ (its length read first); the header is parsed after.
bool UnitScanner::ReadUnitBytes(uint64_t offset) {
  const uint64_t left = sec_.info.size() - offset;
  if (!Pread(offset, static_cast<size_t>(std::min<uint64_t>(left, 12)))) return false;
  uint64_t length = 0, header = 4;
  if (buf_used_ >= 4) length = LoadLittle(buf_.get(), 4);
  if (length == 0xffffffff && buf_used_ >= 12) {
    length = LoadLittle(buf_.get() + 4, 8);
    header = 12;
  }
  if (buf_used_ < header || length >= 0xfffffff0 || length > left - header) {
    return true;  // Open() reports what is wrong with these bytes
  }
  return Pread(offset, static_cast<size_t>(header + length));
}

// The unit's abbreviation table, compiled into a dense table by code (gcc numbers them 1..n).
bool UnitScanner::CompileAbbrevs(uint64_t offset) {
  abbrevs_.clear();
  attrs_.clear();
  if (offset >= sec_.abbrev.size()) return Fail(die_offset_, "abbreviation offset past .debug_abbrev");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(sec_.abbrev.data()) + offset;
  const uint8_t* const end = reinterpret_cast<const uint8_t*>(sec_.abbrev.data()) + sec_.abbrev.size();
  for (;;) {
    uint64_t code = 0, tag = 0;
    if (!ReadUleb(p, end, code)) return Fail(die_offset_, "abbreviation table runs off .debug_abbrev");
    if (code == 0) break;
    if (!ReadUleb(p, end, tag) || p >= end) return Fail(die_offset_, "abbreviation table runs off .debug_abbrev");
    const uint8_t children = *p++;
    if (code > 0xffff || tag > 0xffff || children > 1)
      return Fail(die_offset_, "abbreviation the scanner does not take");
    if (code >= abbrevs_.size()) abbrevs_.resize(code + 1);
    ScanAbbrev& a = abbrevs_[code];
    if (a.defined) return Fail(die_offset_, "duplicated abbreviation code");
    a.defined = true;
    a.tag = static_cast<uint16_t>(tag);
    a.children = children != 0;
    a.attrs_begin = static_cast<uint32_t>(attrs_.size());
    for (;;) {
      uint64_t name = 0, form = 0;
      if (!ReadUleb(p, end, name) || !ReadUleb(p, end, form)) {
        return Fail(die_offset_, "abbreviation table runs off .debug_abbrev");
      }
      if (name == 0 && form == 0) break;
      ScanAbbrevAttr at;
      at.name = static_cast<uint16_t>(name);
      at.form = static_cast<uint16_t>(form);
      if (name > 0xffff || form > 0xffff) return Fail(die_offset_, "attribute the scanner does not take");
      if (form == DW_FORM_implicit_const && !ReadSleb(p, end, at.implicit)) {
        return Fail(die_offset_, "abbreviation table runs off .debug_abbrev");
      }
      const int size = FixedFormSize(form, version_, address_size_, offset_size_);
      if (size == -2) return Fail(die_offset_, fmt::format("form {:#x} the scanner does not read", form));
      at.size = static_cast<int16_t>(size);
      const uint8_t want = WantOf(name);
      if (want != kNoWant && (a.want_mask & (1u << want)) == 0) {
        at.want = want;
        a.want_mask |= 1u << want;
      }
      attrs_.push_back(at);
    }
    a.attrs_count = static_cast<uint32_t>(attrs_.size()) - a.attrs_begin;
  }
  return true;
}

bool UnitScanner::ReadDie(const uint8_t* p, ScanDie& die) {
  const uint8_t* const start = p;
  uint64_t code = 0;
  if (!ReadUleb(p, end_, code)) return Fail(Offset(start), "DIE runs past its unit");
  if (code == 0 || code >= abbrevs_.size() || !abbrevs_[code].defined) {
    return Fail(Offset(start), "DIE with an unknown abbreviation");
  }
  const ScanAbbrev& a = abbrevs_[code];
  // Tag 0 is what dwarf_tag says for an unreadable DIE (DW_TAG_invalid): libdw's to report.
  if (a.tag == 0) return Fail(Offset(start), "DIE with tag 0");
  die.offset = Offset(start);
  die.abbrev = &a;
  die.present = a.want_mask;
  const ScanAbbrevAttr* at = attrs_.data() + a.attrs_begin;
  const ScanAbbrevAttr* const at_end = at + a.attrs_count;
  for (; at != at_end; ++at) {
    if (at->want != kNoWant) die.attrs[at->want] = ScanAttr{at->form, p, at->implicit};
    if (at->size >= 0) {
      if (static_cast<size_t>(at->size) > static_cast<size_t>(end_ - p))
        return Fail(die.offset, "DIE runs past its unit");
      p += at->size;
      continue;
    }
    uint64_t len = 0;
    switch (at->form) {
      case DW_FORM_string: {
        const void* nul = p < end_ ? std::memchr(p, 0, static_cast<size_t>(end_ - p)) : nullptr;
        if (nul == nullptr) return Fail(die.offset, "unterminated string");
        p = static_cast<const uint8_t*>(nul) + 1;
        continue;
      }
      case DW_FORM_block1:
        if (p >= end_) return Fail(die.offset, "DIE runs past its unit");
        len = *p++;
        break;
      case DW_FORM_block2:
        if (end_ - p < 2) return Fail(die.offset, "DIE runs past its unit");
        len = LoadLittle(p, 2);
        p += 2;
        break;
      case DW_FORM_block4:
        if (end_ - p < 4) return Fail(die.offset, "DIE runs past its unit");
        len = LoadLittle(p, 4);
        p += 4;
        break;
      case DW_FORM_block:
      case DW_FORM_exprloc:
        if (!ReadUleb(p, end_, len)) return Fail(die.offset, "DIE runs past its unit");
        break;
      default:  // the LEB128 forms
        if (!ReadUleb(p, end_, len)) return Fail(die.offset, "DIE runs past its unit");
        continue;
    }
    if (len > static_cast<uint64_t>(end_ - p)) return Fail(die.offset, "block runs past its unit");
    p += len;
  }
  die.end = p;
  return true;
}

bool UnitScanner::UnitDie(ScanDie& cu) {
  if (!ReadAt(die_offset_, cu)) return false;
  const ScanAbbrevAttr* at = attrs_.data() + cu.abbrev->attrs_begin;
  for (uint32_t i = 0; i < cu.abbrev->attrs_count; ++i) {
    if (BaseAttribute(at[i].name)) return Fail(cu.offset, "unit with base attributes (split DWARF, index tables)");
  }
  return true;
}

bool UnitScanner::ReadAt(uint64_t offset, ScanDie& die) {
  if (offset < die_offset_ || offset >= end_offset_) return Fail(offset, "DIE offset outside its unit");
  return ReadDie(Ptr(offset), die);
}

// dwarf_child.c.
int UnitScanner::Child(const ScanDie& die, ScanDie& child) {
  if (!die.has_children()) return 1;
  const uint8_t* p = die.end;
  // A null entry first is "no children", also written as a padded ULEB128 0 (0x80 ... 0x00).
  const uint8_t* q = p;
  while (q < end_ && *q == 0x80) ++q;
  if (q >= end_ || *q == 0) return 1;  // (past the end: a truncated section, libdw says none)
  return ReadDie(p, child) ? 0 : -1;
}

// dwarf_siblingof.c: DW_AT_sibling trusted where present (after this DIE, inside the unit),
// else the subtree walked, one 0 byte closing a level.
int UnitScanner::Sibling(const ScanDie& die, ScanDie& next, uint64_t* stop) {
  const ScanDie* cur = &die;
  ScanDie walk;
  int level = 0;
  const uint64_t unit_size = static_cast<uint64_t>(end_ - start_);
  do {
    const uint8_t* p;
    if (const ScanAttr* sib = cur->get(At::kSibling)) {
      uint64_t off = 0;
      switch (sib->form) {
        case DW_FORM_ref1:
          off = sib->value[0];
          break;
        case DW_FORM_ref2:
          off = LoadLittle(sib->value, 2);
          break;
        case DW_FORM_ref4:
          off = LoadLittle(sib->value, 4);
          break;
        case DW_FORM_ref8:
          off = LoadLittle(sib->value, 8);
          break;
        case DW_FORM_ref_udata: {
          const uint8_t* q = sib->value;
          if (!ReadUleb(q, end_, off)) {
            Fail(cur->offset, "DW_AT_sibling unreadable");
            return -1;
          }
          break;
        }
        default:
          Fail(cur->offset, "DW_AT_sibling in a form the scanner does not read");
          return -1;
      }
      const uint64_t die_off = cur->offset - Offset(start_);
      if (off >= unit_size || off <= die_off) {
        Fail(cur->offset, "DW_AT_sibling outside the unit");
        return -1;
      }
      p = start_ + off;
    } else {
      p = cur->end;
      if (cur->has_children()) ++level;
    }
    for (;;) {
      if (p >= end_) {
        if (stop) *stop = end_offset_;
        return 1;
      }
      if (*p != 0) break;
      if (level-- == 0) {
        if (stop) *stop = Offset(p);
        return 1;
      }
      ++p;
    }
    if (level > 0) {
      if (!ReadDie(p, walk)) return -1;
      cur = &walk;
    } else {
      return ReadDie(p, next) ? 0 : -1;
    }
  } while (true);
}

// die_extent.cc End(): a DIE without children ends with its attributes; one with children ends
// one byte (their null entry) after its last child, found through dwarf_siblingof.
bool UnitScanner::SubtreeEnd(const ScanDie& die, uint64_t& end, int depth) {
  if (depth > 256 || die.offset >= end_offset_) return false;
  if (!die.has_children()) {
    end = Offset(die.end);
    return true;
  }
  ScanDie a, b;
  if (Child(die, a) != 0) return false;
  ScanDie* child = &a;
  ScanDie* next = &b;
  while (Sibling(*child, *next) == 0) std::swap(child, next);
  if (failed()) return false;
  uint64_t e = 0;
  if (!SubtreeEnd(*child, e, depth + 1) || e >= end_offset_ || *Ptr(e) != 0) return false;
  end = e + 1;
  return true;
}

bool UnitScanner::ChainReachesEnd(const ScanDie& last) {
  uint64_t e = 0;
  if (!SubtreeEnd(last, e, 0)) return false;
  for (uint64_t o = e; o < end_offset_; ++o) {
    if (*Ptr(o) != 0) return false;
  }
  return true;
}

// dwarf_formudata.c for the constant forms; other forms fail the unit (libdw's answers for
// them depend on the attribute's name and the unit's version).
bool UnitScanner::Udata(const ScanAttr& a, uint64_t& v) {
  const uint8_t* p = a.value;
  switch (a.form) {
    case DW_FORM_data1:
      v = p[0];
      return true;
    case DW_FORM_data2:
      v = LoadLittle(p, 2);
      return true;
    case DW_FORM_data4:
      v = LoadLittle(p, 4);
      return true;
    case DW_FORM_data8:
      v = LoadLittle(p, 8);
      return true;
    case DW_FORM_udata:
      return ReadUleb(p, end_, v) || Fail(Offset(a.value), "unreadable constant");
    case DW_FORM_sdata: {
      int64_t s = 0;
      if (!ReadSleb(p, end_, s)) return Fail(Offset(a.value), "unreadable constant");
      v = static_cast<uint64_t>(s);
      return true;
    }
    case DW_FORM_implicit_const:
      v = static_cast<uint64_t>(a.implicit);
      return true;
    default:
      return Fail(Offset(a.value), fmt::format("constant in form {:#x}", a.form));
  }
}

// dwarf_formaddr.c: DW_FORM_addr; the addrx forms need .debug_addr (the unit fails); any other
// form is no address (libdw: DWARF_E_NO_ADDR).
bool UnitScanner::Addr(const ScanAttr& a, uint64_t& v) {
  switch (a.form) {
    case DW_FORM_addr:
      v = LoadLittle(a.value, address_size_);
      return true;
    case DW_FORM_addrx:
    case DW_FORM_addrx1:
    case DW_FORM_addrx2:
    case DW_FORM_addrx3:
    case DW_FORM_addrx4: {
      uint64_t index = 0;
      return Index(a, index) && AddrIndex(index, v, Offset(a.value));
    }
    case DW_FORM_GNU_addr_index:
      return Fail(Offset(a.value), "address through split DWARF's .debug_addr");
    default:
      return false;
  }
}

// The index of an strx* / addrx* / rnglistx value.
bool UnitScanner::Index(const ScanAttr& a, uint64_t& index) {
  switch (a.form) {
    case DW_FORM_strx1:
    case DW_FORM_addrx1:
      index = a.value[0];
      return true;
    case DW_FORM_strx2:
    case DW_FORM_addrx2:
      index = LoadLittle(a.value, 2);
      return true;
    case DW_FORM_strx3:
    case DW_FORM_addrx3:
      index = LoadLittle(a.value, 3);
      return true;
    case DW_FORM_strx4:
    case DW_FORM_addrx4:
      index = LoadLittle(a.value, 4);
      return true;
    default: {  // the ULEB128 forms (ReadDie found the value inside the unit)
      const uint8_t* p = a.value;
      return ReadUleb(p, end_, index) || Fail(Offset(a.value), "unreadable index");
    }
  }
}

// The unit DIE's DWARF 5 bases (libdwP.h str_offsets_base_off, __libdw_cu_addr_base,
// __libdw_cu_ranges_base), where it states them. An absent str_offsets or rnglists base, which
// libdw would guess from the first table's header, fails the unit at first use instead; an
// absent addr base is 0, as in libdw.
bool UnitScanner::Bases() {
  if (have_bases_) return true;
  ScanDie cu;
  if (!ReadAt(die_offset_, cu)) return false;
  auto base = [&](At at, uint64_t& v) {
    const ScanAttr* a = cu.get(at);
    if (a == nullptr) return false;
    if (a->form == DW_FORM_sec_offset) {
      v = LoadLittle(a->value, offset_size_);
      return true;
    }
    return Udata(*a, v);
  };
  have_str_base_ = base(At::kStrOffsetsBase, str_base_);
  if (!have_str_base_ && version_ < 5) {
    str_base_ = 0;
    have_str_base_ = true;
  }
  addr_base_ = 0;
  base(At::kAddrBase, addr_base_);
  have_rng_base_ = base(At::kRnglistsBase, rng_base_);
  if (failed()) return false;
  have_bases_ = true;
  return true;
}

bool UnitScanner::SingleAddress(const ScanAttr& loc, uint64_t& addr) {
  if (loc.form == DW_FORM_sec_offset || loc.form == DW_FORM_loclistx) return false;  // a list
  if (loc.form == DW_FORM_data4 || loc.form == DW_FORM_data8) return false;          // a list before DWARF 4
  const uint8_t* p = nullptr;
  uint64_t len = 0;
  if (!Block(loc, p, len)) return false;  // (fails the unit: a form the scanner does not read)
  if (len > static_cast<uint64_t>(end_ - p)) return Fail(Offset(loc.value), "block runs past its unit");
  if (len == 1u + address_size_ && p[0] == DW_OP_addr) {
    addr = LoadLittle(p + 1, address_size_);
    return true;
  }
  if (len >= 2 && p[0] == DW_OP_addrx) {
    const uint8_t* q = p + 1;
    uint64_t index = 0;
    if (!ReadUleb(q, p + len, index) || q != p + len) return false;  // more than one op
    return AddrIndex(index, addr, Offset(loc.value));
  }
  return false;
}

bool UnitScanner::AddrIndex(uint64_t index, uint64_t& v, uint64_t at) {
  if (!Bases()) return false;
  return TableEntry(sec_.addr, addr_base_, index, address_size_, v) || Fail(at, "address index past .debug_addr");
}

// dwarf_formstring.c.
const char* UnitScanner::String(const ScanAttr& a) {
  std::string_view sec;
  switch (a.form) {
    case DW_FORM_string:
      return reinterpret_cast<const char*>(a.value);  // ReadDie found its NUL inside the unit
    case DW_FORM_strp:
      sec = sec_.str;
      break;
    case DW_FORM_line_strp:
      sec = sec_.line_str;
      break;
    case DW_FORM_strx:
    case DW_FORM_strx1:
    case DW_FORM_strx2:
    case DW_FORM_strx3:
    case DW_FORM_strx4: {
      // dwarf_formstring.c: entry `index` of the unit's .debug_str_offsets table, an offset
      // into .debug_str.
      uint64_t index = 0;
      if (!Index(a, index) || !Bases()) return nullptr;
      if (!have_str_base_) {
        Fail(Offset(a.value), "strx without DW_AT_str_offsets_base");
        return nullptr;
      }
      uint64_t off = 0;
      if (!TableEntry(sec_.str_offsets, str_base_, index, offset_size_, off)) {
        Fail(Offset(a.value), "string index past .debug_str_offsets");
        return nullptr;
      }
      if (off >= sec_.str.size() || std::memchr(sec_.str.data() + off, 0, sec_.str.size() - off) == nullptr) {
        Fail(Offset(a.value), "string offset past its section");
        return nullptr;
      }
      return sec_.str.data() + off;
    }
    case DW_FORM_GNU_str_index:
    case DW_FORM_strp_sup:
    case DW_FORM_GNU_strp_alt:
      Fail(Offset(a.value), "string through another section");
      return nullptr;
    default:
      return nullptr;
  }
  const uint64_t off = LoadLittle(a.value, offset_size_);
  if (off >= sec.size() || std::memchr(sec.data() + off, 0, sec.size() - off) == nullptr) {
    Fail(Offset(a.value), "string offset past its section");
    return nullptr;
  }
  return sec.data() + off;
}

// dwarf_formref_die.c for the unit-relative forms (offsets from the unit's header).
bool UnitScanner::RefDie(const ScanAttr& a, ScanDie& target) {
  uint64_t off = 0;
  const uint8_t* p = a.value;
  switch (a.form) {
    case DW_FORM_ref1:
      off = p[0];
      break;
    case DW_FORM_ref2:
      off = LoadLittle(p, 2);
      break;
    case DW_FORM_ref4:
      off = LoadLittle(p, 4);
      break;
    case DW_FORM_ref8:
      off = LoadLittle(p, 8);
      break;
    case DW_FORM_ref_udata:
      if (!ReadUleb(p, end_, off)) return Fail(Offset(a.value), "unreadable reference");
      break;
    default:
      return Fail(Offset(a.value), fmt::format("reference in form {:#x}", a.form));
  }
  if (off >= static_cast<uint64_t>(end_ - start_)) return Fail(Offset(a.value), "reference outside its unit");
  return ReadAt(Offset(start_) + off, target);
}

bool UnitScanner::SecOffset(const ScanAttr& a, uint64_t& offset) {
  if (a.form == DW_FORM_sec_offset) {
    offset = LoadLittle(a.value, offset_size_);
    return true;
  }
  if (version_ < 4 && (a.form == DW_FORM_data4 || a.form == DW_FORM_data8)) {
    offset = LoadLittle(a.value, a.form == DW_FORM_data4 ? 4 : 8);
    return true;
  }
  return Fail(Offset(a.value), fmt::format("section offset in form {:#x}", a.form));
}

bool UnitScanner::Block(const ScanAttr& a, const uint8_t*& data, uint64_t& len) {
  const uint8_t* p = a.value;
  switch (a.form) {
    case DW_FORM_block1:
      len = *p++;
      break;
    case DW_FORM_block2:
      len = LoadLittle(p, 2);
      p += 2;
      break;
    case DW_FORM_block4:
      len = LoadLittle(p, 4);
      p += 4;
      break;
    case DW_FORM_block:
    case DW_FORM_exprloc:
      if (!ReadUleb(p, end_, len)) return Fail(Offset(a.value), "unreadable block");
      break;
    default:
      return Fail(Offset(a.value), fmt::format("block in form {:#x}", a.form));
  }
  data = p;
  return true;
}

// dwarf_attr_integrate.c: the DIE, then abstract origin else specification, 17 DIEs at most.
const ScanAttr* UnitScanner::Integrate(const ScanDie& die, At a) {
  const ScanDie* cur = &die;
  for (int hops = 0, slot = 0;; ++hops, slot ^= 1) {
    if (const ScanAttr* found = cur->get(a)) return found;
    if (hops == 16) return nullptr;
    const ScanAttr* ref = cur->get(At::kAbstractOrigin);
    if (ref == nullptr) ref = cur->get(At::kSpecification);
    if (ref == nullptr || !RefDie(*ref, hop_[slot])) return nullptr;
    cur = &hop_[slot];
  }
}

bool UnitScanner::HasIntegrate(const ScanDie& die, At a) { return Integrate(die, a) != nullptr; }

const char* UnitScanner::Name(const ScanDie& die) {
  const ScanAttr* a = Integrate(die, At::kName);
  return a ? String(*a) : nullptr;
}

// __libdw_cu_base_address: the unit DIE's DW_AT_low_pc, else its DW_AT_entry_pc, else 0.
bool UnitScanner::CuBase(uint64_t& base) {
  if (!have_base_) {
    ScanDie cu;
    if (!ReadAt(die_offset_, cu)) return false;
    base_ = 0;
    uint64_t v = 0;
    if (const ScanAttr* lo = cu.get(At::kLowPc); lo && Addr(*lo, v)) {
      base_ = v;
    } else if (const ScanAttr* e = cu.get(At::kEntryPc); e && Addr(*e, v)) {
      base_ = v;
    }
    if (failed()) return false;
    have_base_ = true;
  }
  base = base_;
  return true;
}

// dwarf_ranges.c: low_pc/high_pc when both read (dwarf_highpc: an address, or a constant added
// to dwarf_lowpc), else the DW_AT_ranges list (.debug_rnglists from DWARF 5, .debug_ranges
// before) from the unit's base address.
bool UnitScanner::Ranges(const ScanDie& die, std::vector<std::pair<uint64_t, uint64_t>>& out) {
  const ScanAttr* lo = die.get(At::kLowPc);
  const ScanAttr* hi = die.get(At::kHighPc);
  uint64_t low = 0, high = 0, u = 0;
  bool have_high = false;
  if (hi != nullptr) {
    have_high = Addr(*hi, high);
    if (!have_high && !failed() && lo != nullptr && Addr(*lo, low) && Udata(*hi, u)) {
      high = low + u;
      have_high = true;
    }
  }
  if (have_high && lo != nullptr && Addr(*lo, low)) {
    out.emplace_back(low, high);
    return true;
  }
  if (failed()) return false;
  const ScanAttr* r = die.get(At::kRanges);
  if (r == nullptr) return true;
  uint64_t base = 0;
  if (!CuBase(base)) return false;
  uint64_t offset = 0;
  if (r->form == DW_FORM_rnglistx) {
    // dwarf_ranges.c initial_offset: entry `index` of the offsets table at the unit's
    // DW_AT_rnglists_base, an offset from that base.
    uint64_t index = 0;
    if (!Index(*r, index) || !Bases()) return false;
    if (!have_rng_base_) return Fail(die.offset, "rnglistx without DW_AT_rnglists_base");
    if (!TableEntry(sec_.rnglists, rng_base_, index, offset_size_, offset)) {
      return Fail(die.offset, "range list index past .debug_rnglists");
    }
    offset += rng_base_;
  } else if (!SecOffset(*r, offset)) {
    return false;
  }
  const std::string_view sec = version_ >= 5 ? sec_.rnglists : sec_.ranges;
  if (offset >= sec.size()) return Fail(die.offset, "range list offset past its section");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(sec.data()) + offset;
  const uint8_t* const end = reinterpret_cast<const uint8_t*>(sec.data()) + sec.size();
  const unsigned width = address_size_;
  auto bad = [&] { return Fail(die.offset, "range list unreadable"); };
  if (version_ < 5) {
    const uint64_t escape = width == 8 ? ~uint64_t{0} : uint64_t{0xffffffff};
    for (;;) {
      if (static_cast<size_t>(end - p) < 2u * width) return bad();
      const uint64_t b = LoadLittle(p, width), e = LoadLittle(p + width, width);
      p += 2 * width;
      if (b == escape) {
        if (e == escape) return bad();
        base = e;
        continue;
      }
      if (b == 0 && e == 0) return true;
      out.emplace_back(b + base, e + base);
    }
  }
  for (;;) {
    if (p >= end) return bad();
    const uint8_t code = *p++;
    uint64_t b = 0, e = 0;
    switch (code) {
      case DW_RLE_end_of_list:
        return true;
      case DW_RLE_offset_pair:
        if (p >= end || !ReadUleb(p, end, b) || p >= end || !ReadUleb(p, end, e)) return bad();
        out.emplace_back(b + base, e + base);
        break;
      case DW_RLE_base_address:
        if (static_cast<size_t>(end - p) < width) return bad();
        base = LoadLittle(p, width);
        p += width;
        break;
      case DW_RLE_start_end:
        if (static_cast<size_t>(end - p) < 2u * width) return bad();
        b = LoadLittle(p, width);
        e = LoadLittle(p + width, width);
        p += 2 * width;
        out.emplace_back(b, e);
        break;
      case DW_RLE_start_length:
        if (static_cast<size_t>(end - p) < width) return bad();
        b = LoadLittle(p, width);
        p += width;
        if (p >= end || !ReadUleb(p, end, e)) return bad();
        out.emplace_back(b, b + e);
        break;
      case DW_RLE_base_addressx:
        if (p >= end || !ReadUleb(p, end, b) || !AddrIndex(b, base, die.offset)) return bad();
        break;
      case DW_RLE_startx_endx: {
        uint64_t bi = 0, ei = 0;
        if (p >= end || !ReadUleb(p, end, bi) || p >= end || !ReadUleb(p, end, ei)) return bad();
        if (!AddrIndex(bi, b, die.offset) || !AddrIndex(ei, e, die.offset)) return false;
        out.emplace_back(b, e);
        break;
      }
      case DW_RLE_startx_length: {
        uint64_t bi = 0;
        if (p >= end || !ReadUleb(p, end, bi) || p >= end || !ReadUleb(p, end, e)) return bad();
        if (!AddrIndex(bi, b, die.offset)) return false;
        out.emplace_back(b, b + e);
        break;
      }
      default:  // unknown codes
        return Fail(die.offset, fmt::format("range list entry {:#x} the scanner does not read", code));
    }
  }
}

// dwarf_entrypc.c: DW_AT_entry_pc, else DW_AT_low_pc, as an address. An entry_pc in another
// form (DWARF 5 allows a constant) fails the unit: elfutils versions differ there.
bool UnitScanner::EntryPc(const ScanDie& die, uint64_t& pc) {
  const ScanAttr* a = die.get(At::kEntryPc);
  if (a != nullptr && a->form != DW_FORM_addr && (a->form < DW_FORM_addrx1 || a->form > DW_FORM_addrx4) &&
      a->form != DW_FORM_addrx) {
    return Fail(die.offset, "DW_AT_entry_pc not an address");
  }
  if (a == nullptr) a = die.get(At::kLowPc);
  return a != nullptr && Addr(*a, pc);
}

}  // namespace symdex::debuginfo
