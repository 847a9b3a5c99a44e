#include "client/local_index.h"

#include "server/common/strings.h"

namespace symdex::cli {

absl::StatusOr<store::Db> OpenForRead(const GlobalOptions& g, std::string_view verb) {
  if (!g.connect.empty()) {
    return absl::FailedPreconditionError(
        StrCat("'", verb,
               "' works on files on this machine and reads the index file itself: run it where the index is, "
               "without --connect (--db names the index)"));
  }
  return store::OpenIndex(DbPath(g), store::IndexUse::kAsk);
}

absl::StatusOr<store::Db> OpenForWrite(const GlobalOptions& g) {
  return store::OpenIndex(DbPath(g), store::IndexUse::kWrite);
}

}  // namespace symdex::cli
