// The running daemon's state, shared by the threads RunDaemon starts (daemon.cc): the index and
// its writer, the live tracking (live_tracking.cc), the JIT watcher (jit_watcher.cc), the
// housekeeping, Status and /metrics. Internal to server/daemon/.
#pragma once

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "server/api/services.h"
#include "server/daemon/daemon.h"
#include "server/fleet/kernel_cache.h"
#include "server/indexer/index_request.h"
#include "server/metrics/metrics.h"
#include "server/query/local_query.h"
#include "server/store/sqlite_db.h"

namespace symdex::daemon {

inline std::atomic<LogLevel> g_level{LogLevel::kInfo};

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < g_level.load()) return;
  static const char* kNames[] = {"debug", "info", "warn", "error"};
  std::string line = fmt::format("symdexd: {}: ", kNames[static_cast<int>(level)]);
  line += fmt::format(f, std::forward<Args>(args)...);
  line += "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());  // one write: lines never interleave
}

// Sleeps up to `seconds`, returning early (true) when stop is requested.
class Stopper {
 public:
  bool WaitFor(double seconds) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)), [&] { return stop_; });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() {
    std::lock_guard<std::mutex> l(mu_);
    return stop_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

struct Daemon {
  const DaemonOptions& opts;
  std::string db_path;
  metrics::Registry registry;
  api::RpcStats stats{&registry};
  std::unique_ptr<query::LocalQuery> query;
  std::unique_ptr<fleet::KernelCache> kernels;  // --fleet-cache
  std::mutex writer_mu;
  std::optional<store::Db> writer;
  Stopper stopper;
  std::atomic<int64_t> live_updates{0};
  // The live target is behind the host: the last re-index failed (Status's live_behind).
  std::mutex live_mu;
  std::optional<query::LiveBehindState> live_behind;
  std::atomic<bool> reindex_requested{false};
  std::string live_tracking = "off";
  int64_t started_at = std::time(nullptr);

  explicit Daemon(const DaemonOptions& o) : opts(o) {}

  indexer::IndexRequest LiveRequest() const;
  // One live (re)index. Atomic: on failure the previous index stays as it was (the error is
  // returned, after it is logged).
  // `changed`: the modules /proc/modules says came, went or moved — only those are replaced
  // (indexer::UpdateModules); nullptr: the whole live target.
  absl::Status IndexLive(const std::string& why, const std::set<std::string>* changed = nullptr);
  // What Status says of the live target after an index run: nothing when it succeeded; when it
  // failed, since when the index is behind (the first failure since the last success), what
  // failed and why, and when the next attempt is (`retry_in` seconds; negative: none).
  void SetLiveBehind(const std::string& why, const absl::Status& s, double retry_in);
  // /proc/modules as a name -> "address state" map.
  std::map<std::string, std::string> ReadModules();
  // The first lines of kallsyms are enough: under kptr_restrict every address reads as zero.
  bool KallsymsHasAddresses();
  // The live-tracking thread: the first index when the index has no live target, then
  // /proc/modules polled every modules_poll seconds and the modules that changed re-indexed.
  void LiveTracker();
  // The JIT watcher thread: every jit_poll seconds, the jitdumps and perf maps in jit_watch that
  // grew or changed are ingested through the writer.
  void JitWatcher();
  // Gives back the memory of debug files nobody has needed for a while.
  void Housekeeping();
  // The daemon's own part of Status: version, live tracking, the fleet cache's kernels.
  void FillStatus(query::ServerState& r);
  // The gauges read when /metrics is scraped.
  void CollectMetrics(metrics::Registry& reg);
};

}  // namespace symdex::daemon
