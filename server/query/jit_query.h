// JIT lookups: the one implementation of every question `symdex jit ...`, `symdex buildid` and
// the daemon's JitService / LookupBuildId answer from the JIT tables. Plain result structs; the
// CLI prints them, the gRPC handlers convert them; neither runs SQL nor reads files for a lookup.
//
// Usage overview
//   auto a = JitAddresses(db, {.pid = 4242, .addresses = {0x7f6d5bf891d0}});  // jitdump, else perf map
//   auto c = JitCollisionGroups(db, "sha1-code");  JitSchemeCounts(db, "sha1-code");
//   auto b = LookupBuildId(db, "ab12...", /*include_jitted=*/true);   // kernel + jitted hits
//   auto e = JitExportInstances(db, pid, instance); JitExportLoads(db, e[0], "symdex");
//   JittedDsoMatcher(db).Match(key)                                    // which load a DSO is
//   JitReader(db_path).Addr(req) ...                                   // the same, own connection
// Every read runs in one read snapshot, so an ingest committing meanwhile is seen whole or not.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/jit_records.h"
#include "server/common/status.h"
#include "server/query/local_query.h"
#include "server/store/sqlite_db.h"

namespace symdex::query {

// ---------------------------------------------------------------------------------------------
// addr

// Each address: the jitdump load placed there (the instance chosen by `instance`, else the latest
// dump opened at or before `time`, else the only one), else the latest perf map's entry.
// NotFound when nothing is ingested for the pid; InvalidArgument when the pid has several
// instances and nothing to choose by (listing them).
absl::StatusOr<JitAddrAnswer> JitAddresses(store::Db& db, const JitAddrRequest& req);

// ---------------------------------------------------------------------------------------------
// collisions

// Build-IDs shared by more than one load, in `scheme` (a canonical name; all when nullopt), per
// scheme biggest group first.
absl::StatusOr<std::vector<JitCollision>> JitCollisionGroups(store::Db& db, std::optional<std::string> scheme);
// scheme -> counts over the whole index (only `scheme` when given).
absl::StatusOr<std::map<std::string, JitSchemeCount>> JitSchemeCounts(store::Db& db, std::optional<std::string> scheme);

// ---------------------------------------------------------------------------------------------
// buildid

// What has build-ID `hex_in`: kernels, modules, debug files, and (include_jitted) jitted loads
// under any scheme. InvalidArgument when `hex_in` is not hex. An empty answer is not an error.
absl::StatusOr<BuildIdAnswer> LookupBuildId(store::Db& db, std::string_view hex_in, bool include_jitted,
                                            size_t quote_max = kQuoteInFull);

// ---------------------------------------------------------------------------------------------
// export

// The instances to export: of `pid` (all when nullopt) and, when given, the dump with header
// timestamp `instance`. NotFound when none; InvalidArgument when a pid has several (their
// jitted-<pid>-*.so names would clash).
absl::StatusOr<std::vector<JitInstanceInfo>> JitExportInstances(store::Db& db, std::optional<uint32_t> pid,
                                                                std::optional<uint64_t> instance);
struct JitExportLoad {
  JitFunction function;  // build_ids of every scheme; line_entries counted
  std::string code;
  BuildId build_id;                // in the scheme asked
  std::vector<JitCodeLine> lines;  // the entries inside the code, by address
};
// Every load of `instance` in file order, with the ID of `scheme` (a canonical name).
absl::StatusOr<std::vector<JitExportLoad>> JitExportLoads(store::Db& db, const JitInstanceInfo& instance,
                                                          const std::string& scheme);

// ---------------------------------------------------------------------------------------------
// jitted DSOs on disk

// Matches DSOs against the ingested loads of `db` (reads only). Keeps the instance list between
// calls, so create one per batch.
class JittedDsoMatcher {
 public:
  explicit JittedDsoMatcher(store::Db& db) : db_(db) {}
  absl::StatusOr<DsoMatch> Match(const JittedDsoKey& dso);

 private:
  store::Db& db_;
  std::optional<std::map<int64_t, JitInstanceInfo>> instances_;
};

// ---------------------------------------------------------------------------------------------

// The lookups above on a read-only connection of their own per call (the daemon's JIT calls are
// rare next to symbol queries, and must not share the writer's connection).
class JitReader {
 public:
  explicit JitReader(std::string db_path) : db_path_(std::move(db_path)) {}
  absl::StatusOr<JitAddrAnswer> Addr(const JitAddrRequest& req) const;
  absl::StatusOr<std::vector<JitCollision>> Collisions(std::optional<std::string> scheme) const;
  absl::StatusOr<BuildIdAnswer> BuildIdHits(std::string_view hex_in, bool include_jitted, size_t quote_max) const;

 private:
  std::string db_path_;
};

}  // namespace symdex::query
