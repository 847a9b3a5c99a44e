// The live host's index kept current: the first index, /proc/modules polled, the modules that
// came, went or moved re-indexed, and Status's live_behind while a re-index fails.
#include "server/daemon/daemon_state.h"

#include <filesystem>
#include <fstream>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/indexer/indexer.h"

namespace symdex::daemon {

indexer::IndexRequest Daemon::LiveRequest() const {
  indexer::IndexRequest req;
  req.live = LiveHostOptions{.sysroot = opts.sysroot, .name = "host"};
  req.finder = DebugFinderOptions{.debug_dirs = opts.debug_dirs,
                                  .sysroot = opts.sysroot,
                                  .vmlinux = "",
                                  .use_debuginfod = opts.debuginfod,
                                  .debuginfod_progress = false};
  req.jobs = 0;
  return req;
}

// One live (re)index. Atomic: on failure the previous index stays as it was (the error is
// returned, after it is logged).
// `changed`: the modules /proc/modules says came, went or moved — only those are replaced
// (indexer::UpdateModules); nullptr: the whole live target.
absl::Status Daemon::IndexLive(const std::string& why, const std::set<std::string>* changed) {
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<indexer::IndexSummary> sum;
  {
    std::lock_guard<std::mutex> l(writer_mu);
    sum = changed ? indexer::UpdateModules(*writer, LiveRequest(), *changed)
                  : indexer::IndexTarget(*writer, LiveRequest());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!sum.ok()) {
    Log(LogLevel::kError, "indexing the live host ({}) failed; the previous index is kept: {}", why,
        sum.status().message());
    registry.GetCounter("symdex_index_runs_total", "Index runs of the live host", {{"result", "error"}}).Inc();
    return sum.status();
  }
  registry.GetCounter("symdex_index_runs_total", "Index runs of the live host", {{"result", "ok"}}).Inc();
  Log(LogLevel::kInfo,
      "indexed the live host ({}): {} symbols, {} modules, generation {}, {}, debug files {} parsed / {} cached / {} "
      "missing, {:.2f} s (read {:.2f} s, store {:.2f} s)",
      why, sum->symbols, sum->modules, sum->generation,
      sum->delta_modules.empty() ? std::string("whole target")
                                 : StrCat("replaced modules ", StrJoin(sum->delta_modules, ",")),
      sum->debug_indexed, sum->debug_cached, sum->debug_missing, secs, sum->load_seconds, sum->store_seconds);
  for (const auto& w : sum->warnings) Log(LogLevel::kWarn, "{}", w);
  return absl::OkStatus();
}

// What Status says of the live target after an index run: nothing when it succeeded; when it
// failed, since when the index is behind (the first failure since the last success), what
// failed and why, and when the next attempt is (`retry_in` seconds; negative: none).
void Daemon::SetLiveBehind(const std::string& why, const absl::Status& s, double retry_in) {
  std::lock_guard<std::mutex> l(live_mu);
  if (s.ok()) {
    live_behind.reset();
    return;
  }
  const int64_t now = std::time(nullptr);
  if (!live_behind) live_behind = query::LiveBehindState{.since = now};
  live_behind->attempt = why;
  live_behind->error = std::string(s.message());
  ++live_behind->failures;
  live_behind->next_attempt = retry_in < 0 ? 0 : now + static_cast<int64_t>(std::ceil(retry_in));
}

// /proc/modules as a name -> "address state" map.
std::map<std::string, std::string> Daemon::ReadModules() {
  std::map<std::string, std::string> out;
  auto text = ReadFileBounded(SysrootPath(opts.sysroot, "/proc/modules"), 16 << 20);
  if (!text.ok()) return out;
  for (std::string_view l : Split(*text, '\n', true)) {
    auto f = Split(l, ' ', true);
    if (f.empty()) continue;
    std::string v;
    if (f.size() >= 6) v = StrCat(f[5], " ", f[4]);
    out.emplace(std::string(f[0]), v);
  }
  return out;
}

// The first lines of kallsyms are enough: under kptr_restrict every address reads as zero.
bool Daemon::KallsymsHasAddresses() {
  std::ifstream f(SysrootPath(opts.sysroot, "/proc/kallsyms"));
  std::string line;
  for (int i = 0; i < 64 && std::getline(f, line); ++i) {
    auto fields = Split(line, ' ', true);
    if (!fields.empty() && fields[0].find_first_not_of('0') != std::string_view::npos) return true;
  }
  return false;
}

void Daemon::LiveTracker() {
  bool index = opts.index_live.value_or(KallsymsHasAddresses());
  if (!index) {
    Log(LogLevel::kInfo, "not indexing the live host ({})",
        opts.index_live ? "--no-index-live" : "kallsyms shows no addresses: needs root or CAP_SYSLOG");
    return;
  }
  // The module list is read before the first index, not after it: a module loaded while
  // indexing (or in the moment after) differs from this snapshot, so the first poll sees it.
  // Read after, it would be taken as already indexed and missed until the next change.
  auto last = ReadModules();
  absl::Status first = IndexLive("start");
  SetLiveBehind("start", first, opts.modules_poll > 0 ? opts.modules_poll : -1);
  if (opts.modules_poll <= 0) return;
  bool failed = !first.ok();
  // After a failed re-index (kallsyms unreadable or hidden for a while, a debug file being
  // replaced) the index is behind the host: it is retried as a whole re-index, first after one
  // poll, then at doubling intervals up to kMaxRetrySeconds, until one succeeds — a module
  // change is never dropped because the index failed when it happened.
  constexpr double kMaxRetrySeconds = 60;
  double backoff = opts.modules_poll;
  auto next_retry = std::chrono::steady_clock::now();
  while (!stopper.WaitFor(opts.modules_poll)) {
    auto now = ReadModules();
    bool requested = reindex_requested.exchange(false);
    bool due = requested || (failed ? std::chrono::steady_clock::now() >= next_retry : now != last);
    if (!due) continue;
    std::string change;
    std::set<std::string> changed;
    for (const auto& [m, v] : now) {
      auto it = last.find(m);
      if (it == last.end())
        change += " +" + m;
      else if (it->second != v)
        change += " ~" + m;
      else
        continue;
      changed.insert(m);
    }
    for (const auto& [m, v] : last) {
      if (!now.count(m)) {
        change += " -" + m;
        changed.insert(m);
      }
    }
    const std::string why = requested ? "SIGHUP"
                            : failed  ? (change.empty() ? "retry" : "retry, modules changed:" + change)
                                      : "modules changed:" + change;
    absl::Status st = requested || failed ? IndexLive(why) : IndexLive(why, &changed);
    if (st.ok()) {
      ++live_updates;
      last = std::move(now);
      failed = false;
      backoff = opts.modules_poll;
    } else {
      if (failed) backoff = std::min(backoff * 2, kMaxRetrySeconds);
      failed = true;
      next_retry = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(backoff));
      Log(LogLevel::kInfo, "live host: retrying in {:.1f} s", backoff);
    }
    SetLiveBehind(why, st, backoff);
  }
}

}  // namespace symdex::daemon
