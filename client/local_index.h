// The index file itself, for the verbs that stay in this process (the README's Architecture
// lists why): `symdex index` and `symdex jit ingest` write it (no daemon needed); `jit export`
// writes ELF files here from the code bytes in it. Every other verb asks the query API
// (cli_common.h OpenQuery).
#pragma once

#include <string_view>

#include "client/cli_common.h"
#include "server/store/open_index.h"

namespace symdex::cli {

// For reading (jit export): FailedPrecondition with --connect, which it cannot honour; the
// index checked and migrated as the embedded query API opens it (store::IndexUse::kAsk).
absl::StatusOr<store::Db> OpenForRead(const GlobalOptions& g, std::string_view verb);
// For a writer's run (store::IndexUse::kWrite).
absl::StatusOr<store::Db> OpenForWrite(const GlobalOptions& g);

}  // namespace symdex::cli
