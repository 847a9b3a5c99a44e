// One source frame of an address: what the symbolizer (libdw), the address maps and the query
// API's AddressInfo carry, leaf first in a chain.
#pragma once

#include <string>

namespace symdex::debuginfo {

struct Frame {
  std::string function;  // DWARF name of the (inlined) function
  std::string file;      // source-tree relative
  int line = 0;
  int column = 0;
  bool operator==(const Frame&) const = default;
};

}  // namespace symdex::debuginfo
