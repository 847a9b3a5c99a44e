#include "server/debuginfo/files/symtab_file.h"

#include "server/common/mapped_file.h"
#include "server/common/strings.h"

namespace symdex::debuginfo {

absl::StatusOr<ingest::ElfSymbolTable> ReadSymtabFile(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile m, MappedFile::MapPrivate(path));
  // A file truncated while mapped would fault in libelf; debug files are immutable once
  // found (they are keyed by build-ID), and the store rechecks their stamp before reuse.
  auto table = ingest::ReadElfSymbols(m.bytes().data(), m.bytes().size());
  if (!table.ok()) return absl::Status(table.status().code(), StrCat(path, ": ", table.status().message()));
  return table;
}

}  // namespace symdex::debuginfo
