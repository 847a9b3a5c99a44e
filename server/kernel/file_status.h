// What happened to each input file and which debug file each part of a target uses: closed
// sets of outcomes. The names are what the index stores (schema 002/003 CHECK the same lists)
// and what `symdex status` prints, so Name() is the only place they are spelled; Parse*()
// reads them back and refuses a name it does not know (an index written by a newer symdex).
#pragma once

#include <string_view>

#include "server/common/status.h"

namespace symdex::kernel {

// An input file of an index run (target_files.status).
enum class InputFileStatus {
  kUsed,     // "used"
  kMissing,  // "missing": optional input absent (no /sys/kernel/notes, ...)
  kError,    // "error": present but unreadable or malformed; the run goes on without it
  kSkipped,  // "skipped": deliberately not read
};

// The debug file of vmlinux or of one module (target_debuginfo.status).
enum class DebugFileStatus {
  kUsed,             // "used": found and indexed in this run
  kCached,           // "cached": its build-ID was indexed before
  kNotFound,         // "not-found"
  kBuildIdMismatch,  // "build-id-mismatch": a candidate was found but is another build
  kParseError,       // "parse-error": found, but its DWARF could not be read
  kNoBuildId,        // "no-build-id": the file has no GNU build-ID to key it by
};

std::string_view Name(InputFileStatus s);
std::string_view Name(DebugFileStatus s);

// InvalidArgument naming the value when it is not one of the names above.
absl::StatusOr<InputFileStatus> ParseInputFileStatus(std::string_view name);
absl::StatusOr<DebugFileStatus> ParseDebugFileStatus(std::string_view name);

}  // namespace symdex::kernel
