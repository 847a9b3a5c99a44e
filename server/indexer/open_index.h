// The index opened by a writer (symdex index, symdex jit ingest): created when missing
// (private: 0640 in a 0750 directory, see common/file_util.h), migrated to this symdex's schema,
// and cleared of the temporary address maps writers killed mid-way left behind (as private as a
// finished map, they would otherwise stay forever).
#pragma once

#include <string>

#include "server/store/sqlite_db.h"

namespace symdex::indexer {

absl::StatusOr<store::Db> OpenIndexForWrite(const std::string& db_path);

}  // namespace symdex::indexer
