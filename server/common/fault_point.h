// Named points in the work that changes files on disk (an index run, an address map written),
// where a crash-safety test makes the process die: "killed after the 300th debug file was
// stored", "killed while the target's commit writes the WAL". A test that kills at a point
// instead of after a guessed delay kills every stage every run, however fast the machine is.
//
// Usage, in the code that does the work:
//   FaultPoint("debug-file-stored");   // each time one more debug file is committed
// Each call is one position of that point: a test names the point and which of its positions.
//
// Nothing a user runs can stop at a point: the points do nothing until a handler is installed,
// and only a test program installs one (tests/hardening/fault_main.cc, which links the same CLI
// as `symdex`). No environment variable or option of `symdex` or `symdexd` reaches this. The
// check is one relaxed atomic load, so points can sit in loops over rows.
#pragma once

#include <atomic>
#include <string_view>

namespace symdex {

// Called at every point reached, from whichever thread reached it; it may end the process.
using FaultHandler = void (*)(std::string_view point);

namespace fault_internal {
extern std::atomic<FaultHandler> handler;
}  // namespace fault_internal

// For test programs only: every point reached from now on calls `h` (nullptr: none).
void SetFaultHandler(FaultHandler h);

inline void FaultPoint(std::string_view point) {
  if (FaultHandler h = fault_internal::handler.load(std::memory_order_relaxed)) h(point);
}

}  // namespace symdex
