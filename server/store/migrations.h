// Schema migrations: schema/NNN_name.sql, embedded at build time (cmake/EmbedSchema.cmake).
// PRAGMA user_version holds the number of the last migration applied.
#pragma once

#include <vector>

#include "server/store/sqlite_db.h"

namespace symdex::store {

struct Migration {
  int version;
  const char* name;
  const char* sql;
};

// The migrations built into this binary, in order.
const std::vector<Migration>& Migrations();

// Applies every migration newer than the database's user_version, each in its own
// transaction. A database newer than `migrations` is refused (FailedPrecondition) rather than
// half understood.
absl::Status Migrate(Db& db, const std::vector<Migration>& migrations);

// Opens (creating the parent directory and the file when writable) and migrates to the
// latest schema. A read-only open of a database that would need migrating fails.
// The index holds live kernel addresses: a directory and file it creates are 0750/0640 (group
// `symdex` as root) from the start, whatever the umask; an existing index, its -wal/-shm/
// -journal, its address maps (and its directory, when that is a default location) that any
// user may read are fixed when ours (one "symdex: … now 0640" line on stderr) or refused
// (FailedPrecondition with the chmod to run). See file_util.h EnsurePrivate.
absl::StatusOr<Db> OpenIndex(const std::string& path, Db::Mode mode);

}  // namespace symdex::store
