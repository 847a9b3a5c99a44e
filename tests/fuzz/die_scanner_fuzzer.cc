// Fuzzes the DIE scanner (die_scanner.h: .debug_info / .debug_abbrev of debug files from anywhere —
// debuginfod, a fleet's uploads). Input: a u32 length each for .debug_abbrev, .debug_str,
// .debug_line_str and the range lists (used as .debug_rnglists and .debug_ranges), those bytes,
// then .debug_info. Every unit is opened and its whole DIE tree walked the ways the DWARF index
// and the address map walk it: names through origins, ranges, entry pcs, constants, blocks, the
// end-of-chain check. Any bytes give answers or a declined unit, never a read outside the input
// (each section is its own heap copy: ASan sees the bounds) and never a loop; a sibling always
// lies after its DIE. Seeds: sections of small gcc-built programs, DWARF 4 and 5
// (tests/fuzz/corpus/die_scanner/, made by tests/fuzz/make_die_scanner_seed.py).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "server/debuginfo/dwarf/die_scanner.h"

using namespace symdex::debuginfo;

namespace {

struct Walk {
  UnitScanner& s;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  size_t dies = 0;

  void Visit(const ScanDie& die) {
    if (die.offset < s.die_offset() || die.offset >= s.end_offset()) __builtin_trap();
    ++dies;
    (void)s.Name(die);
    ranges.clear();
    (void)s.Ranges(die, ranges);
    uint64_t v = 0;
    (void)s.EntryPc(die, v);
    if (const ScanAttr* a = s.Integrate(die, At::kDeclFile)) (void)s.Udata(*a, v);
    (void)s.HasIntegrate(die, At::kExternal);
    if (const ScanAttr* a = die.get(At::kAbstractOrigin)) {
      ScanDie origin;
      (void)s.RefDie(*a, origin);
    }
    if (const ScanAttr* a = die.get(At::kLocation)) {
      const uint8_t* p = nullptr;
      uint64_t len = 0;
      if (s.Block(*a, p, len) && len > 0) v += p[len - 1];  // the block's last byte is readable
    }
    if (const ScanAttr* a = die.get(At::kCallLine)) (void)s.Udata(*a, v);
    if (const ScanAttr* a = die.get(At::kCompDir)) (void)s.String(*a);
  }

  // Returns false once the unit failed (the callers stop, as the index and the map do).
  bool Children(const ScanDie& parent, int depth) {
    if (depth > 64 || dies > 100000) return true;
    ScanDie buf[2];
    int cur = 0;
    int r = s.Child(parent, buf[cur]);
    if (r != 0) return r > 0;
    for (;;) {
      Visit(buf[cur]);
      if (!Children(buf[cur], depth + 1)) return false;
      const uint64_t here = buf[cur].offset;
      r = s.Sibling(buf[cur], buf[cur ^ 1]);
      if (r != 0) break;
      if (buf[cur ^ 1].offset <= here) __builtin_trap();  // siblings move forward: no loop
      cur ^= 1;
    }
    if (r < 0) return false;
    if (depth == 0) (void)s.ChainReachesEnd(buf[cur]);
    return true;
  }
};

std::string_view Take(const uint8_t*& p, size_t& left, std::vector<std::unique_ptr<char[]>>& keep) {
  if (left < 4) return {};
  uint32_t n = 0;
  std::memcpy(&n, p, 4);
  p += 4, left -= 4;
  if (n > left) n = static_cast<uint32_t>(left);
  keep.emplace_back(new char[n ? n : 1]);
  std::memcpy(keep.back().get(), p, n);
  p += n, left -= n;
  return {keep.back().get(), n};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::unique_ptr<char[]>> keep;
  const uint8_t* p = data;
  size_t left = size;
  DwarfSections sec;
  sec.abbrev = Take(p, left, keep);
  sec.str = Take(p, left, keep);
  sec.line_str = Take(p, left, keep);
  sec.rnglists = sec.ranges = Take(p, left, keep);
  keep.emplace_back(new char[left ? left : 1]);
  std::memcpy(keep.back().get(), p, left);
  sec.info = std::string_view(keep.back().get(), left);
  UnitScanner s;
  for (uint64_t off = 0, units = 0; off < sec.info.size() && units < 64; ++units) {
    if (!s.Open(sec, off)) break;
    if (s.end_offset() <= off || s.end_offset() > sec.info.size()) __builtin_trap();
    ScanDie cu;
    if (s.UnitDie(cu)) {
      Walk w{s, {}, 0};
      w.Visit(cu);
      w.Children(cu, 0);
    }
    off = s.end_offset();
  }
  return 0;
}
