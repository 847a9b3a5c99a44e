// File access with explicit size limits: symdex never reads an unbounded amount from a file
// whose size it does not control (procfs files report size 0; a hostile .ko can claim anything).
#pragma once

#include <cstddef>
#include <string>

#include "server/common/status.h"

namespace symdex {

inline constexpr size_t kDefaultMaxFileBytes = size_t{1} << 30;  // 1 GiB

// Reads the whole file. Fails with NotFound / PermissionDenied / ResourceExhausted (over
// max_bytes) / Internal, each message naming the path.
absl::StatusOr<std::string> ReadFileBounded(const std::string& path,
                                            size_t max_bytes = kDefaultMaxFileBytes);

// Joins a sysroot and an absolute path ("/proc/kallsyms"); an empty or "/" sysroot is the host.
std::string SysrootPath(const std::string& sysroot, const std::string& abs_path);

// Where the index lives when nobody says (--db, $SYMDEX_DB are the callers' business):
// /var/lib/symdex/index.db as root, else $XDG_STATE_HOME/symdex/index.db
// (~/.local/state/symdex/index.db). The CLI and the daemon share this rule.
std::string DefaultIndexPath();

// Where an index keeps its address maps (debuginfo/addr_map.h), one file per build-ID:
// "<db>-addrmaps" next to the database, as SQLite keeps "<db>-wal". "" for an in-memory database.
std::string AddrMapDirFor(const std::string& db_path);

// Does something accept a connection on this Unix socket? (A stale socket file does not.)
bool UnixSocketAnswers(const std::string& path);

}  // namespace symdex
