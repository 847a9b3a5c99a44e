#include "server/indexer/open_index.h"

#include "server/common/file_util.h"
#include "server/debuginfo/addr_map.h"
#include "server/store/migrations.h"
#include "server/store/text_symbol_file.h"

namespace symdex::indexer {

absl::StatusOr<store::Db> OpenIndexForWrite(const std::string& db_path) {
  ASSIGN_OR_RETURN(auto db, store::OpenIndex(db_path, store::Db::Mode::kReadWriteCreate));
  if (const std::string dir = AddrMapDirFor(db_path); !dir.empty()) {
    debuginfo::RemoveStaleAddrMapTempFiles(dir);
    RemoveStaleTempFiles(dir, store::kTextSymbolTempMarker);
  }
  return db;
}

}  // namespace symdex::indexer
