// Jitted DSO files on disk: which files a PATH list names (a directory and one level down, as
// perf's ~/.debug/jit/<name>/ holds them) and their bounded read. Parsing is
// server/ingest/jitted_dso.h; matching against the index, server/query/jit_query.h.
#pragma once

#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/ingest/jitted_dso.h"

namespace symdex::jit {

// Reads `path` (at most max_bytes; larger files are refused) and parses it. Errors name the path:
// not found, unreadable, too big, not an ELF file, truncated section headers, no build-ID note.
absl::StatusOr<JittedDso> ReadJittedDso(const std::string& path, size_t max_bytes = ingest::kMaxJittedDsoBytes);

struct JittedDsoScan {
  std::vector<std::string> files;    // sorted within each PATH, no duplicates
  std::vector<absl::Status> errors;  // PATHs that do not exist or cannot be listed
};
// Files are taken as given (whatever their name); a DIR contributes the regular files named
// jitted-*.so directly in it and in its immediate subdirectories (perf's ~/.debug/jit/<name>/).
JittedDsoScan ExpandJittedDsoPaths(const std::vector<std::string>& paths);

}  // namespace symdex::jit
