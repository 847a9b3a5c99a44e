// A target's text-symbol table (index_store.h: TextSymbolTable) as a file beside the index, so
// that a new process answering a batch of addresses maps it instead of reading ~50-120k rows out
// of SQLite (that read was a third of a 10,000-address `symdex addr` from a new process).
//
// "<db>-addrmaps/target-<id>.textsyms", written by `symdex index` after each write of the target
// (common/file_util.h: InstallPrivateFile, so a reader sees a whole file or none). It is a cache:
// the database stays the truth. The file carries the target's id, generation and symbols_stamp
// (schema/013: changed by every write of the target's symbol rows); a file whose stamp is not the
// target's, or that fails any check of its sizes and offsets, is not used and the table is read
// from the database as before. Native byte order and layout: the file is made and read on one
// host, and one of another byte order or layout version is ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/common/status.h"
#include "server/store/index_store.h"

namespace symdex::store {

inline constexpr char kTextSymbolTempMarker[] = ".textsyms.tmp.";

// `<dir>/target-<id>.textsyms`
std::string TextSymbolFilePath(const std::string& dir, int64_t target_id);

// Reads `t`'s table from the database and installs it as its file in AddrMapDirFor(db.path()).
// Nothing to do (OK) for an in-memory database or a target without a stamp.
absl::Status WriteTextSymbolFile(Db& db, const TargetInfo& t);

// The table in the file at `path`, if it is `t`'s at its current stamp; an error saying what is
// wrong with it otherwise (NotFound: no file).
absl::StatusOr<std::shared_ptr<const TextSymbolTable>> MapTextSymbolFile(const std::string& path, const TargetInfo& t);

// `t`'s table: from its file when that is current, else from the database. `from_file` (optional)
// says which.
absl::StatusOr<std::shared_ptr<const TextSymbolTable>> OpenTextSymbolTable(Db& db, const TargetInfo& t,
                                                                           bool* from_file = nullptr);

}  // namespace symdex::store
