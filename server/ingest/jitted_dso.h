// Jitted DSOs: the `jitted-<pid>-<code_index>.so` files that `perf inject -j` (in the dump's
// directory, or under ~/.debug/jit/<name>/) or `symdex jit export` write. Pure: parses a file
// name, or an ELF image already in memory, into its GNU build-ID note and symbol; finds the IDs
// several DSOs share. Reading the files is server/jit/jitted_dso_files.h; which ingested load and
// perf era a DSO is, server/query/jit_query.h (MatchJittedDso).
//
// The ELF is read by ingest::ReadElfSymbols (libelf; its note parsing is ingest::FindGnuBuildId),
// so a DSO without a .symtab is reported as unreadable -- perf's and symdex's always have one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/jit_records.h"
#include "server/common/status.h"

namespace symdex::ingest {

// Jitted DSOs are one function each (perf's are a few KiB); anything bigger is not one.
inline constexpr size_t kMaxJittedDsoBytes = size_t{64} << 20;  // 64 MiB

// "jitted-*.so": the names a directory scan picks up.
bool LooksLikeJittedDso(std::string_view file_name);

// "jitted-<pid>-<code_index>.so" (the file name, no directory), decimal, no sign; nullopt otherwise.
std::optional<JittedDsoName> ParseJittedDsoName(std::string_view file_name);

// Parses an ELF image already in memory (`image` is read in place by libelf). Errors name the
// path: not an ELF file, truncated section headers, no build-ID note.
absl::StatusOr<JittedDso> ParseJittedDso(std::string& image, const std::string& path);

// Build-IDs carried by more than one of `dsos`, most DSOs first, then by ID.
std::vector<SharedDsoId> SharedDsoIds(const std::vector<JittedDso>& dsos);

}  // namespace symdex::ingest
