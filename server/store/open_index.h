// The one way to open the index, by what the caller does with it. kCreate and kWrite create the
// parent directory and the file when missing; every use that may write migrates to the latest
// schema; a read-only open of a database that would need migrating fails.
// The index holds live kernel addresses: a directory and file it creates are 0750/0640 (group
// `symdex` as root) from the start, whatever the umask; an existing index, its -wal/-shm/
// -journal, its address maps (and its directory, when that is a default location) that any
// user may read are fixed when ours (one "symdex: … now 0640" line on stderr) or refused
// (FailedPrecondition with the chmod to run). See file_util.h EnsurePrivate.
#pragma once

#include <string>

#include "server/store/sqlite_db.h"

namespace symdex::store {

enum class IndexUse {
  kRead,    // a reader's connection (a query's pool, a JIT lookup): read-only
  kAsk,     // one process's questions (the CLI embedded, jit export): must exist and be readable
            // (PermissionDenied / FailedPrecondition naming the path and the cure); read-only, an
            // index of an older schema migrated first when this user may write it
  kCreate,  // the daemon's writer: created when missing, migrated
  kWrite,   // a writer's run (symdex index, jit ingest, a fleet kernel's index): kCreate, and the
            // temporary files of writers killed mid-way removed (as private as a finished file,
            // they would otherwise stay forever)
};
absl::StatusOr<Db> OpenIndex(const std::string& path, IndexUse use);

}  // namespace symdex::store
