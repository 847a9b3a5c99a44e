// JIT store: jitdump and perf-map files into SQLite (schema/004_jit.sql), and the queries the CLI
// (and later the daemon's directory watcher and a gRPC JitService) answer from it.
//
// Usage overview
//   auto files = ExpandJitPaths({"/tmp", "./jit-123.dump"});        // DIRs -> jit-*.dump, perf-*.map
//   for (f : *files) IngestReport r = IngestJitFile(db, f);          // one transaction per file
//   auto inst = FindInstances(db, pid);                                // process instances of a pid
//   auto hit  = LookupJitAddr(db, inst[0], addr, time);               // the code at addr at time
//   auto pm   = LookupPerfMap(db, pid, addr);                          // perf-<pid>.map answer
//   FindJitBuildId(db, "ab12..."), JitCollisions(db, scheme), LoadsOf(db, instance) for export.
//
// Ingest is incremental and idempotent: each (instance, path) remembers where it stopped (after
// the last CODE_LOAD/CODE_MOVE/CLOSE, so DEBUG_INFO/UNWINDING_INFO waiting for their CODE_LOAD are
// read again), and rows are keyed by the record's file offset, so re-reading a dump -- or a copy
// of it at another path -- adds only what is new. A truncated or still-growing dump yields what is
// complete (status "truncated", with the offset of the incomplete tail). A malformed record stops
// the file with an error naming file and offset; the records before it are committed, nothing
// ingested earlier is touched.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/jit/build_ids.h"
#include "server/jit/perf_map.h"
#include "server/store/sqlite_db.h"

namespace symdex::jit {

struct IngestReport {
  std::string path;
  std::string kind;  // "jitdump" | "perf-map"
  uint32_t pid = 0;
  uint64_t dump_timestamp = 0;  // jitdump only
  uint64_t start_offset = 0;    // where this run started reading
  uint64_t end_offset = 0;      // where the next run will start
  uint64_t file_size = 0;
  uint64_t bytes_read = 0;
  size_t loads = 0, moves = 0, debug_infos = 0, unknown_records = 0;
  size_t rejected_debug_infos = 0;  // DEBUG_INFO records whose entries contradict the record (dropped)
  size_t duplicates = 0;     // records already in the index (copy of a dump, overlapping reads)
  size_t orphan_moves = 0;   // CODE_MOVE for a code_index with no CODE_LOAD before it
  size_t map_entries = 0, malformed_lines = 0;  // perf-map only
  // closed (CLOSE seen) | complete | truncated (incomplete tail) | unchanged | error
  std::string status;
  std::string message;  // human-readable detail: truncation offset, error text
  absl::Status error;   // non-ok iff status == "error"
};

// Every jit-*.dump and perf-*.map directly in each DIR (sorted), files as given. A path that does
// not exist is an error naming it.
absl::StatusOr<std::vector<std::string>> ExpandJitPaths(const std::vector<std::string>& paths);

// Ingests one file, told apart by its first bytes (jitdump magic, either byte order) else as a
// perf map (whose pid comes from its name, perf-<pid>.map).
IngestReport IngestJitFile(store::Db& db, const std::string& path);

struct JitInstance {
  int64_t id = 0;
  uint32_t pid = 0;
  uint64_t dump_timestamp = 0;
  uint32_t elf_mach = 0;
  bool big_endian = false;
  std::string path;  // the first source it was read from
  std::string status;
  int64_t loads = 0;
};
// Instances of `pid` (all when nullopt), oldest dump first.
absl::StatusOr<std::vector<JitInstance>> FindInstances(store::Db& db, std::optional<uint32_t> pid);

// The instance of `pid` meant: `dump_ts` (its header timestamp), else the latest dump opened at
// or before `time`, else the only one; nullopt when the pid has none. Several and nothing to
// choose by: InvalidArgument listing them.
absl::StatusOr<std::optional<JitInstance>> SelectInstance(store::Db& db, uint32_t pid, std::optional<uint64_t> time,
                                                          std::optional<uint64_t> dump_ts);

struct JitLine {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;  // the entry's discrim (V8 writes the column there)
  uint64_t addr = 0;    // runtime address the entry starts at
};

struct JitLoadInfo {
  int64_t load_id = 0;
  JitInstance instance;
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
  std::string placed_by = "load";  // load | move
  std::map<std::string, std::string> build_ids;  // scheme name -> hex
  std::optional<JitLine> line;                    // nearest DEBUG_INFO entry <= the address asked
  int64_t line_entries = 0;

  // The file `perf inject -j` writes for this load.
  std::string DsoName() const;
};

// The code covering `addr` in `instance` at `time` (nullopt: the latest placements). Placements
// that a later CODE_MOVE moved away before `time` are used only when nothing else covers addr
// (then `until` <= time says so).
absl::StatusOr<std::optional<JitLoadInfo>> LookupJitAddr(store::Db& db, const JitInstance& instance, uint64_t addr,
                                                         std::optional<uint64_t> time);

struct PerfMapHit {
  std::string path;
  uint32_t pid = 0;
  PerfMapEntry entry;
};
// The latest ingested perf map of `pid`; nullopt when none or nothing covers addr.
absl::StatusOr<std::optional<PerfMapHit>> LookupPerfMap(store::Db& db, uint32_t pid, uint64_t addr);
absl::StatusOr<bool> HasPerfMap(store::Db& db, uint32_t pid);

struct BuildIdMatch {
  std::string scheme;
  JitLoadInfo load;
};
absl::StatusOr<std::vector<BuildIdMatch>> FindJitBuildId(store::Db& db, const std::string& hex);

struct CollisionGroup {
  std::string scheme;
  std::string build_id;
  std::vector<JitLoadInfo> loads;  // name, pid, code_index, instance filled
  size_t distinct_names = 0;
};
// Build-IDs shared by more than one load, per scheme (all schemes when nullopt), biggest first.
absl::StatusOr<std::vector<CollisionGroup>> JitCollisions(store::Db& db, std::optional<JitBuildIdScheme> scheme);
// scheme -> (loads, distinct IDs) over the whole index.
absl::StatusOr<std::map<std::string, std::pair<int64_t, int64_t>>> JitIdCounts(store::Db& db);

// What `jit export` needs for one load.
struct JitLoadForExport {
  JitLoadInfo info;
  std::string code;
  std::vector<JitLine> lines;  // runtime addresses, sorted
};
absl::StatusOr<std::vector<JitLoadForExport>> LoadsOf(store::Db& db, const JitInstance& instance);

}  // namespace symdex::jit
