// Places in one function copy's body by source line: where `perf probe FUNC:RLN` and
// `perf probe FILE:LINE` would put a probe, kept to the copy symdex resolved (perf takes every
// function of the unit that holds the line).
//
// A place is an address inside the copy's ranges where the line table starts a statement of
// the line in the copy's own declaration file, the copy's entry for its declaration line, or
// the entry of a function inlined by a call written on that line. A line the compiler split
// has several places. An address whose own line (its first statement row in the table; a function
// entry's is its declaration line) is another line of the same file is not a place of this
// line: a probe there belongs to that other line (perf refuses such a line; symdex keeps the
// line's other places and names the shared ones).
//
// Over a FetchSite (fetch_args.h): no file is opened here.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/common/status.h"
#include "server/debuginfo/dwarf/fetch_args.h"

namespace symdex::debuginfo {

struct LinePlaces {
  std::string file;                                // the copy's declaration file, as its unit names it
  int decl_line = 0;                               // the copy's declaration line
  int line = 0;                                    // the absolute line asked for
  std::vector<Dwarf_Addr> pcs;                     // sorted, distinct
  std::vector<std::pair<Dwarf_Addr, int>> shared;  // skipped: (address, the line it belongs to)
};

// `line` absolute, or relative to the copy's declaration line when `relative` (perf's RLN).
// InvalidArgument when the line has no place in the copy (the message names the lines of its
// file that do, nearest first) or every place belongs to another line.
absl::StatusOr<LinePlaces> FindLinePlaces(const FetchSite& site, int line, bool relative);

}  // namespace symdex::debuginfo
