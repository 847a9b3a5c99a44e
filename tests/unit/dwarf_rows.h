// What two reads of one debug file must agree on: the index's rows, not the name of the reader
// that made them (DwarfIndex::reader says "symdex" for the scanner, "libdw" for libdw).
#pragma once

#include <string>

#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/worker/worker_protocol.h"

namespace symdex::testing {

inline std::string EncodedRows(debuginfo::DwarfIndex idx) {
  idx.reader.clear();
  return debuginfo::EncodeDwarfIndex(idx);
}

}  // namespace symdex::testing
