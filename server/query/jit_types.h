// The answers of the JIT and build-ID lookups (server/query/jit_query.h computes them; the query
// API hands them out, server/api/convert.h puts them on the wire).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/jit_records.h"
#include "server/common/status.h"
#include "server/query/fields.h"

namespace symdex::query {

// Error messages quote what the caller gave in full (a terminal), or at most this many
// characters, unprintable ones as '?' (the daemon: a hostile request is not echoed back).
inline constexpr size_t kQuoteInFull = std::string::npos;

// The canonical name of a build-ID scheme (symdex, sha1-symtab, sha1-code, md5-addr), or
// InvalidArgument naming the choices.
absl::StatusOr<std::string> JitSchemeArg(std::string_view scheme, size_t quote_max = kQuoteInFull);
// What produced an ID of `scheme`: "perf 6.17 (SHA-1 of the code ...)" etc.
std::string_view JitBuildIdSchemeEra(std::string_view scheme);

// The canonical (lower-case) hex of a build-ID argument, or InvalidArgument quoting it.
absl::StatusOr<std::string> CanonicalBuildId(std::string_view hex_in, size_t quote_max = kQuoteInFull);

// Kernel-side owners of a build-ID: targets (vmlinux), modules, debug files.
struct BuildIdHit {
  std::string kind;    // target | module | debug-file
  std::string name;    // target or module name, or the debug file's path
  std::string target;  // module: its target
};
using JitInstanceInfo = JitInstance;  // common/jit_records.h
template <>
struct FieldsOf<JitInstance> {
  static constexpr auto Fields() {
    return std::make_tuple(Field<JitInstance, int64_t>{"id", &JitInstance::id},
                           Field<JitInstance, uint32_t>{"pid", &JitInstance::pid},
                           Field<JitInstance, uint64_t>{"dump_timestamp", &JitInstance::dump_timestamp},
                           Field<JitInstance, uint32_t>{"elf_mach", &JitInstance::elf_mach},
                           Field<JitInstance, bool>{"big_endian", &JitInstance::big_endian},
                           Field<JitInstance, std::string>{"path", &JitInstance::path},
                           Field<JitInstance, std::string>{"status", &JitInstance::status},
                           Field<JitInstance, int64_t>{"loads", &JitInstance::loads});
  }
};

struct JitSourceLine {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;  // the entry's discrim (V8 writes the column there)
  uint64_t addr = 0;    // runtime address the entry starts at
};

// One CODE_LOAD, where it was at the time asked.
struct JitFunction {
  int64_t load_id = 0;
  JitInstanceInfo instance;
  uint32_t pid = 0;  // the CODE_LOAD's pid (names the DSO)
  uint64_t code_index = 0;
  std::string name;
  uint64_t code_addr = 0;  // where it was loaded
  uint64_t code_size = 0;
  uint64_t load_time = 0;
  uint64_t file_offset = 0;
  // Where the code is at the time asked (after CODE_MOVEs), from when, and until when.
  uint64_t addr = 0;
  uint64_t placed_time = 0;
  std::optional<uint64_t> until;
  std::string placed_by = "load";                // load | move
  std::map<std::string, std::string> build_ids;  // scheme name -> hex
  std::optional<JitSourceLine> line;             // nearest DEBUG_INFO entry <= the address asked
  int64_t line_entries = 0;

  // The file `perf inject -j` writes for this load.
  std::string DsoName() const;
};

struct PerfMapSymbol {
  std::string map_path;
  size_t map_line = 0;
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
  SYMDEX_FIELDS(PerfMapSymbol, map_path, map_line, start, size, name)
};

struct JitAddrRequest {
  uint32_t pid = 0;
  std::optional<uint64_t> time;      // dump timestamp to resolve at; nullopt: the latest placements
  std::optional<uint64_t> instance;  // the dump header timestamp (pid reuse)
  std::vector<uint64_t> addresses;
  SYMDEX_FIELDS(JitAddrRequest, pid, time, instance, addresses)
};
struct JitAddrResult {
  uint64_t address = 0;
  std::optional<JitFunction> function;    // from the jitdump
  std::optional<PerfMapSymbol> perf_map;  // only when the jitdump has nothing there
  bool found() const { return function || perf_map; }
};
struct JitAddrAnswer {
  std::optional<JitInstanceInfo> instance;  // the process instance chosen; none: perf map only
  std::vector<JitAddrResult> results;       // one per address, in order
  SYMDEX_FIELDS(JitAddrAnswer, instance, results)
};
struct JitCollision {
  std::string scheme;
  std::string build_id;
  std::vector<JitFunction> loads;  // name, pid, code_index, instance filled
  size_t distinct_names = 0;
  SYMDEX_FIELDS(JitCollision, scheme, build_id, loads, distinct_names)
};
struct JitSchemeCount {
  int64_t loads = 0;
  int64_t distinct_ids = 0;
  SYMDEX_FIELDS(JitSchemeCount, loads, distinct_ids)
};
struct JitBuildIdMatch {
  std::string scheme;
  JitFunction load;
};
struct BuildIdAnswer {
  std::string build_id;  // canonical lower-case hex
  std::vector<BuildIdHit> kernel;
  std::vector<JitBuildIdMatch> jitted;  // empty unless asked for
  bool empty() const { return kernel.empty() && jitted.empty(); }
};
// `symdex jit collisions`: the groups and, per scheme, how many loads and distinct IDs there are.
struct JitCollisionsAnswer {
  std::vector<JitCollision> collisions;
  std::map<std::string, JitSchemeCount> counts;
  SYMDEX_FIELDS(JitCollisionsAnswer, collisions, counts)
};

// What a DSO file says about itself (server/ingest/jitted_dso.h reads it).
struct JittedDsoKey {
  std::optional<uint32_t> pid;  // from a jitted-<pid>-<code_index>.so name; nullopt: other name
  uint64_t code_index = 0;
  std::string build_id;  // hex
  std::string symbol;
  SYMDEX_FIELDS(JittedDsoKey, pid, code_index, build_id, symbol)
};
struct DsoLoadCandidate {
  JitFunction load;                  // name, pid, code_index, code range, instance, build_ids
  std::vector<std::string> schemes;  // schemes whose ID for this load equals the DSO's
  bool symbol_matches = false;       // the DSO's symbol is the load's name
  SYMDEX_FIELDS(DsoLoadCandidate, load, schemes, symbol_matches)
};
struct DsoMatch {
  // matched      some load with the DSO's pid and code_index has its ID under `schemes`
  // unknown      such loads exist, but none of their scheme IDs is the DSO's ID
  // no-load      no load with that pid and code_index is ingested
  // unnamed      the file name is not jitted-<pid>-<idx>.so, so there is no load to compare with
  // no-index     (set by callers without an index)
  std::string status;
  std::vector<DsoLoadCandidate> candidates;  // loads with the DSO's pid + code_index (one per dump)
  // Loads (any pid/index) that have the DSO's ID under some scheme: tells a renamed or moved DSO
  // apart from a foreign one. Counted for every status but "matched".
  int64_t loads_with_id = 0;
  std::string message;  // human-readable why, for every status but "matched"
  SYMDEX_FIELDS(DsoMatch, status, candidates, loads_with_id, message)
};
}  // namespace symdex::query
