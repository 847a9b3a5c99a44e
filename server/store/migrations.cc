#include "server/store/migrations.h"

#include <filesystem>

#include "server/common/strings.h"

namespace symdex::store {

absl::Status Migrate(Db& db, const std::vector<Migration>& migrations) {
  ASSIGN_OR_RETURN(int64_t current, db.UserVersion());
  int64_t latest = migrations.empty() ? 0 : migrations.back().version;
  if (current > latest) {
    return absl::FailedPreconditionError(
        StrCat(db.path(), " has schema version ", current, ", newer than this symdex (",
                     latest, "): upgrade symdex or use another --db"));
  }
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
    if (absl::Status s = db.Exec(m.sql); !s.ok()) {
      return absl::Status(s.code(), StrCat("migration ", m.name, " failed: ", s.message()));
    }
    RETURN_IF_ERROR(db.Exec(StrCat("PRAGMA user_version=", m.version)));
    RETURN_IF_ERROR(tx.Commit());
  }
  return absl::OkStatus();
}

absl::StatusOr<Db> OpenIndex(const std::string& path, Db::Mode mode) {
  namespace fs = std::filesystem;
  if (mode == Db::Mode::kReadOnly) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(StrCat("no index at ", path, ": run 'symdex index' first"));
    }
    ASSIGN_OR_RETURN(Db db, Db::Open(path, mode));
    ASSIGN_OR_RETURN(int64_t v, db.UserVersion());
    if (v != Migrations().back().version) {
      return absl::FailedPreconditionError(StrCat(
          path, " has schema version ", v, ", this symdex expects ", Migrations().back().version,
          ": open it once with write access (any 'symdex index') to migrate it"));
    }
    return db;
  }
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          StrCat("cannot create ", parent.string(), ": ", ec.message(), " (use --db PATH)"));
    }
  }
  ASSIGN_OR_RETURN(Db db, Db::Open(path, mode));
  RETURN_IF_ERROR(Migrate(db, Migrations()));
  return db;
}

}  // namespace symdex::store
