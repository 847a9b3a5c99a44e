// Kernels known only by build-ID, indexed on demand: a fleet replica's cache.
//
// Each kernel's index is its own file, DIR/<build-id>.db (+ -addrmaps/, -wal), written by the
// same indexer `symdex index --build-id` runs: the debug vmlinux fetched by build-ID (a local
// debug root or debuginfod), its .symtab as the symbol table, and each module a request names
// (name + build-ID) fetched by the module's own build-ID when first needed. Persisted across
// restarts; bounded by size, least recently used evicted first.
//
// Concurrency: requests for one build-ID share one index run (the first starts it, the others
// wait for it, each up to its own deadline — a deadline passing leaves the run going, so the
// next request finds it done). Failures are remembered for `negative_seconds` (as debuginfod's
// client remembers misses): a request inside that window gets the same error at once, so a
// fleet asking for a kernel nobody has does not become a fetch storm. Module failures likewise,
// per module build-ID. At most `max_concurrent_index` runs at once (each holds a kernel's symbol
// table and DWARF join in memory).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/debuginfo/files/debug_finder.h"
#include "server/indexer/build_id_target.h"
#include "server/metrics/metrics.h"
#include "server/query/local_query.h"

namespace symdex::fleet {

struct KernelCacheOptions {
  std::string dir;                          // required; created 0750
  uint64_t max_bytes = uint64_t{20} << 30;  // all indexes and address maps together
  double negative_seconds = 300;            // how long a failure is remembered
  // What "now" is when a failure is remembered and when it is asked about again: the steady
  // clock when empty. Tests move it past negative_seconds instead of sleeping.
  std::function<std::chrono::steady_clock::time_point()> failure_clock;
  int max_concurrent_index = 1;  // index runs at once
  DebugFinderOptions finder;     // debug roots, debuginfod
  unsigned jobs = 0;             // threads per index run (0: all cores)
  query::LocalQuery::Options query{.target_cache_seconds = 0.1};
  // One line per index run and eviction, for the daemon's log.
  std::function<void(const std::string&)> log;
};

// One kernel as `symdex status` and metrics show it.
using KernelEntryState = query::FleetKernelState;

class KernelCache {
 public:
  // Scans `dir` for indexes left by an earlier run (kept, opened on first use).
  static absl::StatusOr<std::unique_ptr<KernelCache>> Create(KernelCacheOptions opts, metrics::Registry* registry);
  ~KernelCache();

  // The query over kernel `build_id`'s index, with every module of `modules` indexed or
  // remembered as failed. InvalidArgument for a malformed build-ID; NotFound/Unavailable/
  // DeadlineExceeded (the fetch) and InvalidArgument (a file whose build-ID does not match) from
  // the index run, or remembered from an earlier one; DeadlineExceeded when `deadline` passes
  // while waiting for a run.
  // `counted`: false for the second look of a call whose first (a wait off the heavy pool) was
  // counted in symdex_fleet_requests_total already.
  absl::StatusOr<std::shared_ptr<query::LocalQuery>> Get(const std::string& build_id,
                                                         const std::vector<ModuleByBuildId>& modules,
                                                         std::chrono::steady_clock::time_point deadline,
                                                         bool counted = true);

  // Would Get answer at once — the kernel indexed and open with those modules (or remembered as
  // failed), nothing to fetch, index, open or wait for? Never blocks on a run. A malformed
  // build-ID is "ready" too: Get refuses it at once.
  bool Ready(const std::string& build_id, const std::vector<ModuleByBuildId>& modules);

  std::vector<KernelEntryState> State();
  int64_t waiting() const;  // requests waiting for an index run

 private:
  struct Entry;
  // The modules of `modules` that `e` neither holds nor remembers as failed at `now` (e.mu held).
  static std::vector<ModuleByBuildId> MissingModules(const Entry& e, const std::vector<ModuleByBuildId>& modules,
                                                     std::chrono::steady_clock::time_point now);
  using Clock = std::chrono::steady_clock;
  KernelCache(KernelCacheOptions opts, metrics::Registry* registry);
  Clock::time_point FailureNow() const { return opts_.failure_clock ? opts_.failure_clock() : Clock::now(); }
  std::shared_ptr<Entry> EntryFor(const std::string& hex);
  absl::Status RunIndex(const std::string& hex, Entry& e, const std::vector<ModuleByBuildId>& modules);
  absl::Status OpenExisting(const std::string& hex, Entry& e);
  void EvictOverLimit(const std::string& keep);
  std::string DbPath(const std::string& hex) const;

  KernelCacheOptions opts_;
  metrics::Registry* registry_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::mutex slots_mu_;
  std::condition_variable slots_cv_;
  int running_ = 0;
  std::atomic<int64_t> waiting_{0};
};

}  // namespace symdex::fleet
