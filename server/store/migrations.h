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

}  // namespace symdex::store
