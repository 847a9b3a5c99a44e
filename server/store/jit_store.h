// The JIT tables (schema/004_jit.sql): every statement that writes or reads them. No file I/O
// and no policy: what to ingest and how a dump maps to rows is server/jit/ingest.h; what an
// answer is (which placement, which line) is server/query/jit_query.h.
//
// Usage overview
//   Writes (inside the caller's transaction):
//     int64_t inst = UpsertJitInstance(db, header);  auto resume = JitSourceResume(db, inst, path);
//     JitLoadWriter w(db); w.InsertLoad(...), w.InsertPlacement(...), w.InsertLine(...), ...
//     UpsertJitSource(db, ...); RaiseJitMaxCodeSize(db, inst, size);
//     perf maps: LatestPerfMap(db, path), InsertPerfMap(...), InsertPerfMapEntries(...), UpdatePerfMap(...)
//   Reads: FindJitInstances, JitInstanceById, JitPlacementAt, JitBuildIdsOf, JitLinesOf,
//     HasPerfMap, PerfMapEntryAt, JitLoadsWithBuildId, JitSharedBuildIdRows, JitBuildIdCounts,
//     JitLoadsOfInstance, JitLoadsByPidIndex, CountJitLoadsWithBuildId.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/common/jit_records.h"
#include "server/common/jit_schemes.h"
#include "server/common/status.h"
#include "server/ingest/jitdump.h"
#include "server/ingest/perf_map.h"
#include "server/store/sqlite_db.h"

namespace symdex::store {

// ---------------------------------------------------------------------------------------------
// rows

using JitInstanceRow = JitInstance;  // common/jit_records.h

struct JitLoadRow {
  int64_t load_id = 0;
  int64_t instance_id = 0;
  uint32_t pid = 0;  // the CODE_LOAD's pid (names the DSO)
  uint64_t code_index = 0;
  std::string name;
  uint64_t code_addr = 0;
  uint64_t code_size = 0;
  uint64_t load_time = 0;
  uint64_t file_offset = 0;
};

// Where a load's code lives from `time` on (its CODE_LOAD, or a CODE_MOVE).
struct JitPlacementRow {
  JitLoadRow load;
  uint64_t addr = 0;
  uint64_t time = 0;
  std::optional<uint64_t> until;  // moved away at
  std::string kind;               // load | move
};

// A DEBUG_INFO entry at the address the code was loaded at (the producer's bias removed).
struct JitLineRow {
  std::string file;
  uint32_t line = 0;
  uint32_t discrim = 0;
  uint64_t addr = 0;
};

struct JitSourceState {
  uint64_t resume_offset = 0;
  std::string status;
};

struct PerfMapRow {
  int64_t id = 0;
  int64_t generation = 0;
  uint64_t consumed = 0;
  int64_t next_line = 1;
};

struct PerfMapEntryRow {
  std::string path;  // of the map
  ingest::PerfMapEntry entry;
};

struct JitBuildIdRow {
  std::string scheme;
  std::string build_id;
  JitLoadRow load;
};

struct JitLoadWithCode {
  JitLoadRow load;
  std::string code;
};

// ---------------------------------------------------------------------------------------------
// writes

// The instance row of (pid, dump timestamp), created if new; its id.
absl::StatusOr<int64_t> UpsertJitInstance(Db& db, const ingest::JitdumpHeader& header);
// Where the last ingest of `path` into `instance_id` stopped; nullopt when never read.
absl::StatusOr<std::optional<JitSourceState>> JitSourceResume(Db& db, int64_t instance_id, const std::string& path);

struct JitSourceUpdate {
  int64_t instance_id = 0;
  std::string path;
  uint64_t resume_offset = 0;
  uint64_t file_size = 0;
  int64_t new_records = 0;
  std::string status;
  std::string message;
  int64_t ingested_at = 0;
};
absl::Status UpsertJitSource(Db& db, const JitSourceUpdate& u);
absl::Status RaiseJitMaxCodeSize(Db& db, int64_t instance_id, uint64_t size);

// The per-record inserts of one dump ingest, prepared once.
class JitLoadWriter {
 public:
  static absl::StatusOr<JitLoadWriter> Prepare(Db& db);

  // The jit_code row of these bytes (keyed by their SHA-1 hex), inserted if new.
  absl::StatusOr<int64_t> CodeId(const std::string& sha1, std::string_view code);
  // The new load's id; nullopt when (instance, file offset) is already there.
  absl::StatusOr<std::optional<int64_t>> InsertLoad(int64_t instance_id, const ingest::CodeLoad& load, int64_t code_id,
                                                    uint64_t line_bias);
  // False when (instance, file offset) is already there.
  absl::StatusOr<bool> InsertPlacement(int64_t load_id, int64_t instance_id, uint64_t addr, uint64_t size,
                                       uint64_t time, uint64_t file_offset, std::string_view kind);
  absl::Status InsertLine(int64_t load_id, const ingest::DebugEntry& e);
  absl::Status InsertBuildId(int64_t load_id, std::string_view scheme, const std::string& hex);
  // The latest load of `code_index` before `file_offset` (what a CODE_MOVE there moves).
  absl::StatusOr<std::optional<int64_t>> LoadBefore(int64_t instance_id, uint64_t code_index, uint64_t file_offset);
  // Ends the load's open placements recorded before `file_offset` at `until`.
  absl::Status ClosePlacements(int64_t load_id, uint64_t until, uint64_t file_offset);

 private:
  explicit JitLoadWriter(Db& db) : db_(&db) {}
  Db* db_;
  std::unordered_map<std::string, int64_t> code_ids_;
  Stmt ins_code_, sel_code_, ins_load_, ins_place_, ins_line_, ins_id_, sel_index_, close_prev_;
};

// The latest generation of the perf map at `path`; nullopt when never read.
absl::StatusOr<std::optional<PerfMapRow>> LatestPerfMap(Db& db, const std::string& path);
absl::StatusOr<int64_t> InsertPerfMap(Db& db, uint32_t pid, const std::string& path, int64_t generation,
                                      int64_t ingested_at);
absl::Status InsertPerfMapEntries(Db& db, int64_t map_id, const std::vector<ingest::PerfMapEntry>& entries);
struct PerfMapUpdate {
  int64_t map_id = 0;
  uint64_t consumed = 0;
  int64_t next_line = 1;
  int64_t new_entries = 0;
  int64_t new_malformed = 0;
  uint64_t max_size = 0;
  int64_t ingested_at = 0;
};
absl::Status UpdatePerfMap(Db& db, const PerfMapUpdate& u);

// ---------------------------------------------------------------------------------------------
// reads

// Instances of `pid` (all when nullopt), oldest dump first.
absl::StatusOr<std::vector<JitInstanceRow>> FindJitInstances(Db& db, std::optional<uint32_t> pid);
absl::StatusOr<JitInstanceRow> JitInstanceById(Db& db, int64_t id);

// The placement covering `addr` in the instance at `time` (nullopt: the latest placements).
// Placements that a later CODE_MOVE moved away before `time` come only when nothing else covers
// addr; among the rest, the latest placed wins.
absl::StatusOr<std::optional<JitPlacementRow>> JitPlacementAt(Db& db, int64_t instance_id, uint64_t addr,
                                                              std::optional<uint64_t> time);
// scheme name -> hex.
absl::StatusOr<std::map<std::string, std::string>> JitBuildIdsOf(Db& db, int64_t load_id);
// The load's DEBUG_INFO entries by address (then as written).
absl::StatusOr<std::vector<JitLineRow>> JitLinesOf(Db& db, int64_t load_id);

absl::StatusOr<bool> HasPerfMap(Db& db, uint32_t pid);
// The entry covering addr in the latest ingested perf map of `pid` (later lines win).
absl::StatusOr<std::optional<PerfMapEntryRow>> PerfMapEntryAt(Db& db, uint32_t pid, uint64_t addr);

// Loads having build-ID `hex` under some scheme: (scheme, load), by instance, offset, scheme.
absl::StatusOr<std::vector<std::pair<std::string, JitLoadRow>>> JitLoadsWithBuildId(Db& db, const std::string& hex);
// Distinct loads having build-ID `hex` under any scheme.
absl::StatusOr<int64_t> CountJitLoadsWithBuildId(Db& db, const std::string& hex);
// Every (scheme, build-ID, load) whose ID is shared by more than one load, in `scheme` (all when
// empty), ordered by scheme, ID, instance, offset.
absl::StatusOr<std::vector<JitBuildIdRow>> JitSharedBuildIdRows(Db& db, std::optional<std::string_view> scheme);
// scheme -> (loads, distinct IDs) over the whole index.
absl::StatusOr<std::map<std::string, std::pair<int64_t, int64_t>>> JitBuildIdCounts(Db& db);
// Every load of the instance with its code, in file order.
absl::StatusOr<std::vector<JitLoadWithCode>> JitLoadsOfInstance(Db& db, int64_t instance_id);
// Loads of `pid` with `code_index` in any instance (unordered).
absl::StatusOr<std::vector<JitLoadRow>> JitLoadsByPidIndex(Db& db, uint32_t pid, uint64_t code_index);

}  // namespace symdex::store
