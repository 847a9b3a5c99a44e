#include "server/debuginfo/dwarf/die_extent.h"

#include <dwarf.h>

#include <cstring>

#include "server/common/byte_reader.h"
#include "server/debuginfo/dwarf/die_scanner.h"

namespace symdex::debuginfo {
namespace {

constexpr int kMaxDepth = 256;

// Length of a ULEB/SLEB128 at p (not past end), 0 if it runs off the end.
struct AttrScan {
  const unsigned char* end_limit;  // the unit's end
  const unsigned char* max_end;    // furthest attribute end seen
  int address_size;
  int offset_size;
  bool ok = true;
};

// Byte length of an attribute value of `form` at p; -1 if unknown or out of bounds.
int64_t FormLength(unsigned form, const unsigned char* p, const AttrScan& s) {
  // (Version 4: DW_FORM_ref_addr is offset-sized, as in every DWARF a kernel is built with.)
  const int fixed = FixedFormSize(form, 4, static_cast<unsigned>(s.address_size), static_cast<unsigned>(s.offset_size));
  if (fixed >= 0) return fixed;
  if (fixed == -2) return -1;
  switch (form) {
    case DW_FORM_string: {
      const void* z = std::memchr(p, 0, static_cast<size_t>(s.end_limit - p));
      return z ? static_cast<const unsigned char*>(z) - p + 1 : -1;
    }
    case DW_FORM_block1:
      return p < s.end_limit ? 1 + int64_t{p[0]} : -1;
    case DW_FORM_block2:
      return s.end_limit - p >= 2 ? 2 + int64_t{LoadLittle<uint16_t>(p)} : -1;
    case DW_FORM_block4:
      return s.end_limit - p >= 4 ? 4 + int64_t{LoadLittle<uint32_t>(p)} : -1;
    case DW_FORM_block:
    case DW_FORM_exprloc: {
      size_t n = LebLength(p, s.end_limit);
      if (n == 0) return -1;
      uint64_t len = 0;
      const unsigned char* q = p;
      (void)DecodeUleb(q, p + n, len);  // the first 10 bytes' bits, as libdw reads a longer one
      return len > static_cast<uint64_t>(s.end_limit - p) ? -1 : static_cast<int64_t>(n + len);
    }
    default: {  // the LEB128 forms
      size_t n = LebLength(p, s.end_limit);
      return n ? static_cast<int64_t>(n) : -1;
    }
  }
}

int OnAttr(Dwarf_Attribute* attr, void* arg) {
  auto* s = static_cast<AttrScan*>(arg);
  // Values held in the abbreviation (or nowhere), not in the DIE.
  if (attr->form == DW_FORM_implicit_const || attr->form == DW_FORM_flag_present) return DWARF_CB_OK;
  const unsigned char* p = static_cast<const unsigned char*>(static_cast<void*>(attr->valp));
  int64_t len = p && p <= s->end_limit ? FormLength(attr->form, p, *s) : -1;
  if (len < 0 || len > s->end_limit - p) {
    s->ok = false;
    return DWARF_CB_ABORT;
  }
  if (p + len > s->max_end) s->max_end = p + len;
  return DWARF_CB_OK;
}

std::optional<uint64_t> End(Dwarf_Die* die, uint64_t limit, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  const Dwarf_Off off = dwarf_dieoffset(die);
  const unsigned char* start = static_cast<const unsigned char*>(die->addr);
  if (start == nullptr || off >= limit) return std::nullopt;
  const unsigned char* base = start - off;
  const unsigned char* end_limit = base + limit;
  if (dwarf_haschildren(die) > 0) {
    Dwarf_Die child, next;
    if (dwarf_child(die, &child) != 0) return std::nullopt;
    while (dwarf_siblingof(&child, &next) == 0) child = next;
    auto e = End(&child, limit, depth + 1);
    if (!e || *e >= limit || base[*e] != 0) return std::nullopt;
    return *e + 1;  // the null entry that ends the children
  }
  Dwarf_Die cudie;
  uint8_t address_size = 8, offset_size = 4;
  if (dwarf_diecu(die, &cudie, &address_size, &offset_size) == nullptr) return std::nullopt;
  size_t code_len = LebLength(start, end_limit);
  if (code_len == 0) return std::nullopt;
  AttrScan s{end_limit, start + code_len, address_size, offset_size};
  if (dwarf_getattrs(die, OnAttr, &s, 0) < 0 || !s.ok) return std::nullopt;
  return static_cast<uint64_t>(s.max_end - base);
}

}  // namespace

std::optional<uint64_t> DieEnd(Dwarf_Die* die, uint64_t limit) { return End(die, limit, 0); }

bool ChainReachesEnd(Dwarf_Die* last_child, uint64_t unit_end, uint64_t& bad_offset) {
  auto e = DieEnd(last_child, unit_end);
  if (!e) {
    bad_offset = dwarf_dieoffset(last_child);
    return false;
  }
  const unsigned char* base = static_cast<const unsigned char*>(last_child->addr) - dwarf_dieoffset(last_child);
  for (uint64_t o = *e; o < unit_end; ++o) {
    if (base[o] != 0) {
      bad_offset = *e;
      return false;
    }
  }
  return true;
}

}  // namespace symdex::debuginfo
