// RAII for libelf/libdw/libdwfl handles and the few DWARF walks that more than one reader of
// a debug file must do identically (the symbolizer and the address map built from it).
#pragma once

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/common/unique_fd.h"

namespace symdex::debuginfo {

struct ElfEnd {
  void operator()(Elf* e) const;
};
struct DwarfEnd {
  void operator()(Dwarf* d) const;
};
struct DwflEnd {
  void operator()(Dwfl* d) const;
};
using ElfPtr = std::unique_ptr<Elf, ElfEnd>;
using DwarfPtr = std::unique_ptr<Dwarf, DwarfEnd>;
using DwflPtr = std::unique_ptr<Dwfl, DwflEnd>;

void InitLibelf();

// A debug file opened for DWARF reading (read-only mmap).
struct OpenedDwarf {
  UniqueFd fd;  // declared first: closed after the Elf and Dwarf made from it are ended
  ElfPtr elf;
  DwarfPtr dwarf;
};
absl::Status OpenDwarf(const std::string& path, OpenedDwarf& o);

// Does one of the DIE's address ranges (low/high_pc or DW_AT_ranges) hold pc?
bool RangesContain(Dwarf_Die* die, Dwarf_Addr pc);

// A CU's top-level functions (DW_TAG_subprogram, through namespaces), one span per address
// range, sorted by start: where an address is looked up before its inline nesting is walked.
struct FunctionRange {
  uint64_t lo, hi;
  Dwarf_Off die;
};
std::vector<FunctionRange> CollectFunctionRanges(Dwarf_Die* cu);

// The index among `n` ranges sorted by lo (CollectFunctionRanges' order) of the one holding
// addr, or -1: the last range starting at or below addr that still covers it (ranges of
// distinct functions do not overlap), looking back at most 16 MiB.
template <typename Range>
ptrdiff_t FindFunctionRange(const Range* sorted, size_t n, uint64_t addr) {
  size_t lo = static_cast<size_t>(
      std::upper_bound(sorted, sorted + n, addr, [](uint64_t v, const Range& r) { return v < r.lo; }) - sorted);
  while (lo > 0) {
    --lo;
    if (addr < sorted[lo].hi) return static_cast<ptrdiff_t>(lo);
    if (addr - sorted[lo].lo > (uint64_t{1} << 24)) break;
  }
  return -1;
}

}  // namespace symdex::debuginfo
