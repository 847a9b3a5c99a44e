// One index run: load a kernel target (live host or offline), find and index the debug file
// of vmlinux and of every module (by build-ID; already-indexed build-IDs cost nothing), join
// every text symbol to its DWARF function instance, and swap the target in atomically.
// The CLI's `symdex index` and the daemon both call this.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "server/debuginfo/files/debug_finder.h"
#include "server/indexer/build_id_target.h"
#include "server/indexer/index_request.h"
#include "server/kernel/live_host.h"
#include "server/kernel/offline_kernel.h"
#include "server/store/sqlite_db.h"

namespace symdex::indexer {

absl::StatusOr<IndexSummary> IndexTarget(store::Db& db, const IndexRequest& req);

// A live host after module loads/unloads: loads the target as IndexTarget does, then replaces
// only the modules named in `changed` (plus pseudo-modules such as [bpf]) — their symbols, debug
// info and join — leaving vmlinux and every other module's rows untouched (store::ReplaceModules,
// one transaction, generation + 1). Falls back to IndexTarget when the target is not indexed yet
// or vmlinux is not the one indexed. The summary's text-symbol counts are the replaced modules'.
absl::StatusOr<IndexSummary> UpdateModules(store::Db& db, const IndexRequest& req,
                                           const std::set<std::string>& changed);

}  // namespace symdex::indexer
