#include "server/store/migrations.h"

#include "server/common/strings.h"

namespace symdex::store {

absl::Status Migrate(Db& db, const std::vector<Migration>& migrations) {
  ASSIGN_OR_RETURN(int64_t current, db.UserVersion());
  int64_t latest = migrations.empty() ? 0 : migrations.back().version;
  if (current > latest) {
    return absl::FailedPreconditionError(StrCat(db.path(), " has schema version ", current,
                                                ", newer than this symdex (", latest,
                                                "): upgrade symdex or use another --db"));
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

}  // namespace symdex::store
