// Refuses input that looks cut short before it replaces a good index. A System.map truncated
// at a line boundary parses cleanly (every line it has is well formed), and a kallsyms read that
// stopped early looks the same: without these checks either would silently replace a complete
// index with half of it, and every query would then answer "not found" for the missing half.
#pragma once

#include "server/common/status.h"
#include "server/kernel/kernel_target.h"
#include "server/store/sqlite_db.h"

namespace symdex::indexer {

// The share of the current index's vmlinux symbols a re-index must have to replace it.
inline constexpr double kMinVmlinuxSymbolShare = 0.9;

// OK, or FailedPrecondition naming the file, what is wrong and the cure, when
//  - `t` is an offline kernel whose System.map lacks _etext or _end (every System.map has both:
//    they are near its end, so a truncated file loses them first);
//  - the target named t.name is already indexed and `t` has fewer than 90% of its vmlinux
//    symbols (modules are not counted: they come and go).
// `force` skips both checks.
absl::Status CheckInputLooksComplete(store::Db& db, const kernel::KernelTarget& t, bool force);

}  // namespace symdex::indexer
