// Jitted DSOs already on disk: the `jitted-<pid>-<code_index>.so` files that `perf inject -j` (in
// the dump's directory, or under ~/.debug/jit/<name>/) or `symdex jit export` wrote. Reads each
// one's GNU build-ID note and symbol, and tells which ingested CODE_LOAD it is and which scheme --
// i.e. which perf era -- produced its ID (server/jit/build_ids.h).
//
// Usage overview
//   auto scan = ExpandJittedDsoPaths({"~/.debug/jit", "./jitted-4242-7.so"});  // files + errors
//   for (f : scan.files) auto dso = ReadJittedDso(f);                          // bounded read
//   JittedDsoMatcher m(db); auto match = m.Match(*dso);                        // load + scheme
//   SharedDsoIds(dsos)                                                         // IDs shared on disk
//
// The ELF is read by ingest::ReadElfSymbols (libelf; its note parsing is ingest::FindGnuBuildId),
// so a DSO without a .symtab is reported as unreadable -- perf's and symdex's always have one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/status.h"
#include "server/jit/jit_store.h"
#include "server/store/sqlite_db.h"

namespace symdex::jit {

// Jitted DSOs are one function each (perf's are a few KiB); anything bigger is not one.
inline constexpr size_t kMaxJittedDsoBytes = size_t{64} << 20;  // 64 MiB

struct JittedDsoName {
  uint32_t pid = 0;
  uint64_t code_index = 0;
};
// "jitted-<pid>-<code_index>.so" (the file name, no directory), decimal, no sign; nullopt otherwise.
std::optional<JittedDsoName> ParseJittedDsoName(std::string_view file_name);

struct JittedDso {
  std::string path;
  std::optional<JittedDsoName> name;  // from the file name
  BuildId build_id;                   // the NT_GNU_BUILD_ID note's bytes
  std::string symbol;                 // the first named symbol in .symtab (the function), or empty
  uint64_t file_size = 0;
};

// Pure: parses an ELF image already in memory (`image` is read in place by libelf).
absl::StatusOr<JittedDso> ParseJittedDso(std::string& image, const std::string& path);
// Reads `path` (at most max_bytes; larger files are refused) and parses it. Errors name the path:
// not found, unreadable, too big, not an ELF file, truncated section headers, no build-ID note.
absl::StatusOr<JittedDso> ReadJittedDso(const std::string& path, size_t max_bytes = kMaxJittedDsoBytes);

struct JittedDsoScan {
  std::vector<std::string> files;    // sorted within each PATH, no duplicates
  std::vector<absl::Status> errors;  // PATHs that do not exist or cannot be listed
};
// Files are taken as given (whatever their name); a DIR contributes the regular files named
// jitted-*.so directly in it and in its immediate subdirectories (perf's ~/.debug/jit/<name>/).
JittedDsoScan ExpandJittedDsoPaths(const std::vector<std::string>& paths);

// What produced an ID of `scheme` (a JitBuildIdSchemeName): "perf 6.17 (SHA-1 of the code)" etc.
std::string_view JitBuildIdSchemeEra(std::string_view scheme);

struct DsoLoadCandidate {
  JitLoadInfo load;                  // name, pid, code_index, code range, instance, build_ids
  std::vector<std::string> schemes;  // schemes whose ID for this load equals the DSO's
  bool symbol_matches = false;       // the DSO's symbol is the load's name
};

struct DsoMatch {
  // matched      some load with the DSO's pid and code_index has its ID under `schemes`
  // unknown      such loads exist, but none of their scheme IDs is the DSO's ID
  // no-load      no load with that pid and code_index is ingested
  // unnamed      the file name is not jitted-<pid>-<idx>.so, so there is no load to compare with
  std::string status;
  std::vector<DsoLoadCandidate> candidates;  // loads with the DSO's pid + code_index (one per dump)
  // Loads (any pid/index) that have the DSO's ID under some scheme: tells a renamed or moved DSO
  // apart from a foreign one. Counted for every status but "matched".
  int64_t loads_with_id = 0;
  std::string message;  // human-readable why, for every status but "matched"
};

// Matches DSOs against the ingested loads of `db` (reads only). Keeps the instance list between
// calls, so create one per batch.
class JittedDsoMatcher {
 public:
  explicit JittedDsoMatcher(store::Db& db) : db_(db) {}
  absl::StatusOr<DsoMatch> Match(const JittedDso& dso);

 private:
  store::Db& db_;
  std::optional<std::map<int64_t, JitInstance>> instances_;
};

struct SharedDsoId {
  std::string build_id;         // hex
  std::vector<size_t> dsos;     // indexes into the input, in input order
  std::vector<std::string> symbols;  // the distinct function names they merge, sorted
};
// Build-IDs carried by more than one of `dsos`, most DSOs first, then by ID.
std::vector<SharedDsoId> SharedDsoIds(const std::vector<JittedDso>& dsos);

}  // namespace symdex::jit
