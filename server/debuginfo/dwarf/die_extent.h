// Where a DIE's bytes end in .debug_info, for the indexer's damage check: a unit whose
// top-level DIE chain stops (at a 0 byte, "no more siblings") before the unit's end has had
// its DIEs overwritten with zeros; libdw sees a short, valid-looking unit, and the index would
// silently lack every function after the hole.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <optional>

namespace symdex::debuginfo {

// Offset just past `die` and all its children (their terminating null entry included), or
// nullopt if it cannot be read within `limit` (an offset: the end of the unit) or nests deeper
// than 256 levels.
std::optional<uint64_t> DieEnd(Dwarf_Die* die, uint64_t limit);

// True if the unit holding `first_child`'s chain ends at `unit_end`: the chain's last DIE ends
// where only zero bytes (the chain's null entry, padding) remain before unit_end.
// `bad_offset` gets where the unexpected bytes start (or the unreadable DIE).
bool ChainReachesEnd(Dwarf_Die* last_child, uint64_t unit_end, uint64_t& bad_offset);

}  // namespace symdex::debuginfo
