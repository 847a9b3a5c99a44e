// symdexd's life: options, the index and its writer, live-target tracking, the JIT watcher,
// listeners, metrics, signals and the drain. Over ~500 lines because it is the one place these
// are wired together in order; each piece it starts lives in its own unit.
#include "server/api/daemon.h"

#include <absl/synchronization/mutex.h>
#include <fmt/core.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "server/api/services.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/fleet/kernel_cache.h"
#include "server/indexer/indexer.h"
#include "server/jit/ingest.h"
#include "server/metrics/http_server.h"
#include "server/metrics/metrics.h"
#include "server/store/open_index.h"

#ifndef SYMDEX_VERSION
#define SYMDEX_VERSION "dev"
#endif

namespace symdex::api {
namespace {
// Threads that calls for a fleet kernel not indexed yet wait on (serve.h): a wait sleeps, so
// this bounds how many different cold kernels are waited for at once, not CPU.
constexpr int kFleetWaitThreads = 32;

std::atomic<LogLevel> g_level{LogLevel::kInfo};

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

// A stale socket file from a previous run is removed; one a live daemon answers on is not.
absl::Status PrepareUnixSocket(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) {
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec)
      return absl::FailedPreconditionError(StrCat("cannot create ", p.parent_path().string(), ": ", ec.message()));
  }
  if (!std::filesystem::exists(p, ec)) return absl::OkStatus();
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(StrCat("socket path too long: ", path));
  }
  if (UnixSocketAnswers(path)) return absl::FailedPreconditionError(StrCat("another daemon is listening on ", path));
  std::filesystem::remove(p, ec);
  return absl::OkStatus();
}

struct Daemon {
  const DaemonOptions& opts;
  std::string db_path;
  metrics::Registry registry;
  RpcStats stats{&registry};
  std::unique_ptr<query::LocalQuery> query;
  std::unique_ptr<fleet::KernelCache> kernels;  // --fleet-cache
  std::mutex writer_mu;
  std::optional<store::Db> writer;
  Stopper stopper;
  std::atomic<int64_t> live_updates{0};
  // The live target is behind the host: the last re-index failed (Status's live_behind).
  std::mutex live_mu;
  std::optional<::symdex::v1::LiveBehind> live_behind;
  std::atomic<bool> reindex_requested{false};
  std::string live_tracking = "off";
  int64_t started_at = std::time(nullptr);

  explicit Daemon(const DaemonOptions& o) : opts(o) {}

  indexer::IndexRequest LiveRequest() const {
    indexer::IndexRequest req;
    req.live = target::LiveHostOptions{.sysroot = opts.sysroot, .name = "host"};
    req.finder = debuginfo::DebugFinderOptions{.debug_dirs = opts.debug_dirs,
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
  absl::Status IndexLive(const std::string& why, const std::set<std::string>* changed = nullptr) {
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
  void SetLiveBehind(const std::string& why, const absl::Status& s, double retry_in) {
    std::lock_guard<std::mutex> l(live_mu);
    if (s.ok()) {
      live_behind.reset();
      return;
    }
    const int64_t now = std::time(nullptr);
    if (!live_behind) {
      live_behind.emplace();
      live_behind->set_since(now);
    }
    live_behind->set_attempt(why);
    live_behind->set_error(std::string(s.message()));
    live_behind->set_failures(live_behind->failures() + 1);
    live_behind->set_next_attempt(retry_in < 0 ? 0 : now + static_cast<int64_t>(std::ceil(retry_in)));
  }

  // /proc/modules as a name -> "address state" map.
  std::map<std::string, std::string> ReadModules() {
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
  bool KallsymsHasAddresses() {
    std::ifstream f(SysrootPath(opts.sysroot, "/proc/kallsyms"));
    std::string line;
    for (int i = 0; i < 64 && std::getline(f, line); ++i) {
      auto fields = Split(line, ' ', true);
      if (!fields.empty() && fields[0].find_first_not_of('0') != std::string_view::npos) return true;
    }
    return false;
  }

  void LiveTracker() {
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

  void JitWatcher() {
    std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> seen;
    do {
      for (const auto& dir : opts.jit_watch) {
        auto files = jit::ExpandJitPaths({dir});
        if (!files.ok()) {
          Log(LogLevel::kDebug, "jit watch: {}", files.status().message());
          continue;
        }
        for (const auto& f : *files) {
          std::error_code ec;
          auto size = std::filesystem::file_size(f, ec);
          if (ec) continue;
          auto mtime = std::filesystem::last_write_time(f, ec);
          if (ec) continue;
          auto& s = seen[f];
          if (s.first == size && s.second == mtime) continue;
          s = {size, mtime};
          jit::IngestReport rep;
          {
            std::lock_guard<std::mutex> l(writer_mu);
            rep = jit::IngestJitFile(*writer, f);
          }
          registry.GetCounter("symdex_jit_ingests_total", "jitdump / perf-map ingest runs", {{"status", rep.status}})
              .Inc();
          if (rep.status == "error") {
            // The index busy past its timeout (a `symdex index` holding the write lock) is no fault
            // of the file: forget having seen it, so the next scan ingests it even if it never
            // changes again (a finished perf map, a closed dump). Faults of the file wait for
            // the file to change.
            const bool busy = rep.error.code() == absl::StatusCode::kUnavailable;
            if (busy) seen.erase(f);
            Log(LogLevel::kWarn, "jit ingest {}: {}{}", f, rep.message, busy ? " (retrying at the next scan)" : "");
          } else {
            // Nothing new (a record not yet complete, a file rewritten as it was): debug only.
            Log(rep.loads || rep.map_entries ? LogLevel::kInfo : LogLevel::kDebug,
                "jit ingest {}: {} loads, {} map entries ({})", f, rep.loads, rep.map_entries, rep.status);
          }
        }
      }
    } while (!stopper.WaitFor(opts.jit_poll));
  }

  // Gives back the memory of debug files nobody has needed for a while.
  void Housekeeping() {
    while (!stopper.WaitFor(opts.trim_poll)) {
      if (query->TrimIfIdle(opts.trim_idle_seconds)) {
        Log(LogLevel::kDebug, "released the parsed debug info after {} s without DWARF lookups",
            opts.trim_idle_seconds);
      }
    }
  }

  void FillStatus(::symdex::v1::StatusResponse* r) {
    r->set_version(SYMDEX_VERSION);
    r->set_started_at(started_at);
    r->set_live_tracking(live_tracking);
    r->set_live_updates(live_updates.load());
    {
      std::lock_guard<std::mutex> l(live_mu);
      if (live_behind) *r->mutable_live_behind() = *live_behind;
    }
    if (kernels) {
      r->set_fleet_cache(opts.fleet_cache);
      r->set_fleet_waiting(kernels->waiting());
      for (const fleet::KernelEntryState& k : kernels->State()) {
        auto* p = r->add_fleet_kernels();
        p->set_build_id(k.build_id);
        p->set_state(k.state);
        p->set_bytes(k.bytes);
        p->set_modules(k.modules);
        p->set_modules_failed(k.modules_failed);
        p->set_index_seconds(k.index_seconds);
        p->set_idle_seconds(k.idle_seconds);
        p->set_error(k.error);
      }
    }
  }

  void CollectMetrics(metrics::Registry& reg) {
    auto targets = query->Targets();
    if (targets.ok()) {
      for (const auto& t : *targets) {
        reg.GetGauge("symdex_index_symbols", "Symbols indexed, by target and owner",
                     {{"target", t.info.name}, {"owner", "vmlinux"}})
            .Set(static_cast<double>(t.counts.vmlinux_symbols));
        reg.GetGauge("symdex_index_symbols", "Symbols indexed, by target and owner",
                     {{"target", t.info.name}, {"owner", "modules"}})
            .Set(static_cast<double>(t.counts.module_symbols));
        reg.GetGauge("symdex_index_modules", "Modules indexed, by target", {{"target", t.info.name}})
            .Set(static_cast<double>(t.counts.modules));
        reg.GetGauge("symdex_index_generation", "Index generation, by target", {{"target", t.info.name}})
            .Set(static_cast<double>(t.info.generation));
      }
    }
    {
      std::lock_guard<std::mutex> l(live_mu);
      reg.GetGauge("symdex_live_behind_since_seconds",
                   "Unix time since which the live target is behind the host (its re-index failing); 0: current")
          .Set(live_behind ? static_cast<double>(live_behind->since()) : 0);
    }
    reg.GetGauge("symdex_debug_files", "Debug files indexed (by build-ID)")
        .Set(static_cast<double>(query->DebugFileCount()));
    auto c = query->cache_stats();
    reg.GetGauge("symdex_cache_lookups", "Query cache lookups since start, by cache and result",
                 {{"cache", "name"}, {"result", "hit"}})
        .Set(static_cast<double>(c.name_hits));
    reg.GetGauge("symdex_cache_lookups", "Query cache lookups since start, by cache and result",
                 {{"cache", "name"}, {"result", "miss"}})
        .Set(static_cast<double>(c.name_misses));
    reg.GetGauge("symdex_cache_lookups", "Query cache lookups since start, by cache and result",
                 {{"cache", "address"}, {"result", "hit"}})
        .Set(static_cast<double>(c.addr_hits));
    reg.GetGauge("symdex_cache_lookups", "Query cache lookups since start, by cache and result",
                 {{"cache", "address"}, {"result", "miss"}})
        .Set(static_cast<double>(c.addr_misses));
    reg.GetGauge("symdex_rpc_in_flight", "gRPC calls in progress").Set(static_cast<double>(stats.in_flight()));
    reg.GetGauge("symdex_start_time_seconds", "Unix time the daemon started").Set(static_cast<double>(started_at));
  }
};

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(StrCat("log level '", s, "': expected debug, info, warn or error"));
}

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int RunDaemon(const DaemonOptions& opts) {
  auto level = ParseLogLevel(opts.log_level);
  if (!level.ok()) {
    Log(LogLevel::kError, "{}", level.status().message());
    return 2;
  }
  g_level = *level;
  // Debian's abseil checks every Mutex acquisition for lock-order cycles (a debug aid that costs
  // microseconds per lock on the request path).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Daemon d(opts);
  d.db_path = opts.db.empty() ? DefaultIndexPath() : opts.db;  // OpenIndex creates its directory 0750
  // The writer connection creates / migrates the index; queries use their own read connections.
  auto writer = store::OpenIndex(d.db_path, store::IndexUse::kCreate);
  if (!writer.ok()) {
    Log(LogLevel::kError, "{}", writer.status().message());
    return 3;
  }
  d.writer.emplace(std::move(*writer));
  // Target info may be 100 ms old: calls answered from the caches then never touch SQLite, and a
  // re-index (ours or another process's) is picked up within 0.1 s, whole.
  auto q = query::LocalQuery::Open(d.db_path, query::LocalQuery::Options{.target_cache_seconds = 0.1});
  if (!q.ok()) {
    Log(LogLevel::kError, "{}", q.status().message());
    return 3;
  }
  d.query = std::move(*q);
  // debuginfod's client reads its limits from the environment, per fetch: set before any thread
  // fetches anything.
  if (!opts.debuginfod_urls.empty()) ::setenv("DEBUGINFOD_URLS", opts.debuginfod_urls.c_str(), 1);
  if (opts.fetch_timeout > 0) ::setenv("DEBUGINFOD_TIMEOUT", StrCat(static_cast<long>(opts.fetch_timeout)).c_str(), 1);
  if (opts.fetch_max_seconds > 0) {
    ::setenv("DEBUGINFOD_MAXTIME", StrCat(static_cast<long>(opts.fetch_max_seconds)).c_str(), 1);
  }
  if (opts.fetch_max_bytes > 0) ::setenv("DEBUGINFOD_MAXSIZE", StrCat(opts.fetch_max_bytes).c_str(), 1);
  if (!opts.fleet_cache.empty()) {
    fleet::KernelCacheOptions ko;
    ko.dir = opts.fleet_cache;
    ko.max_bytes = opts.fleet_cache_max_bytes;
    ko.negative_seconds = opts.negative_cache_seconds;
    ko.max_concurrent_index = opts.fleet_index_jobs;
    ko.log = [](const std::string& line) { Log(LogLevel::kInfo, "{}", line); };
    ko.finder = debuginfo::DebugFinderOptions{.debug_dirs = opts.debug_dirs,
                                              .sysroot = "",
                                              .vmlinux = "",
                                              .use_debuginfod = opts.debuginfod,
                                              .debuginfod_progress = false};
    auto kc = fleet::KernelCache::Create(std::move(ko), &d.registry);
    if (!kc.ok()) {
      Log(LogLevel::kError, "{}", kc.status().message());
      return 3;
    }
    d.kernels = std::move(*kc);
    Log(LogLevel::kInfo, "fleet cache {} ({} kernel(s) on disk, limit {} bytes); debuginfod: {}", opts.fleet_cache,
        d.kernels->State().size(), opts.fleet_cache_max_bytes,
        std::getenv("DEBUGINFOD_URLS") ? std::getenv("DEBUGINFOD_URLS") : "(DEBUGINFOD_URLS unset)");
  }
  QueryRouter router(*d.query, d.kernels.get());

  std::vector<std::string> listen = opts.listen;
  if (listen.empty()) listen.push_back("unix:/run/symdex/symdex.sock");
  AccessPolicyOptions access = opts.access;
  access.sysroot = opts.sysroot;
  auto policy = AccessPolicy::Create(access);
  if (!policy.ok()) {
    Log(LogLevel::kError, "{}", policy.status().message());
    return 2;
  }
  PeerRegistry peers;
  Limiter limiter(opts.limits);
  FairPool pool(opts.limits.heavy_threads);
  // Calls waiting for a fleet kernel's fetch and index run wait on threads of their own (they
  // sleep; the index runs themselves are bounded by --fleet-index-jobs).
  std::unique_ptr<FairPool> wait_pool;
  if (!opts.fleet_cache.empty()) wait_pool = std::make_unique<FairPool>(kFleetWaitThreads);
  const CallControl control{&*policy, &peers, &limiter, &pool, wait_pool.get()};
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(16 << 20);  // 65,536 addresses = 0.6 MB; specs are short
  builder.SetMaxSendMessageSize(256 << 20);
  // One connection cannot open more streams than this at once (HTTP/2 SETTINGS); the limiter
  // bounds what a peer holds over all its connections.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 128);
  {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(UndecodableRequestInterceptor());
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  std::vector<std::unique_ptr<UnixListener>> unix_listeners;
  std::map<std::string, int> tcp_ports;
  std::map<std::string, std::unique_ptr<int>> bound;
  for (const auto& l : listen) {
    if (l.starts_with("unix:")) {
      std::string path = l.substr(5);
      if (path.starts_with("//")) path = path.substr(2);
      if (auto s = PrepareUnixSocket(path); !s.ok()) {
        Log(LogLevel::kError, "listen {}: {}", l, s.message());
        return 3;
      }
      // Accepted here, not by gRPC: the peer's credentials (SO_PEERCRED) decide what it sees.
      auto ul = UnixListener::Bind(UnixListenerOptions{.path = path,
                                                       .mode = opts.socket_mode,
                                                       .max_connections = opts.max_connections,
                                                       .max_connections_per_peer = opts.max_connections_per_peer});
      if (!ul.ok()) {
        Log(LogLevel::kError, "listen {}: {}", l, ul.status().message());
        return 3;
      }
      unix_listeners.push_back(std::move(*ul));
      continue;
    }
    std::shared_ptr<grpc::ServerCredentials> creds;
    if (!opts.tls_cert.empty()) {
      grpc::SslServerCredentialsOptions ssl(opts.tls_client_ca.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      auto cert = ReadFileBounded(opts.tls_cert, 1 << 20);
      auto key = ReadFileBounded(opts.tls_key, 1 << 20);
      if (!cert.ok() || !key.ok()) {
        Log(LogLevel::kError, "TLS: {}", (!cert.ok() ? cert.status() : key.status()).message());
        return 3;
      }
      ssl.pem_key_cert_pairs.push_back({*key, *cert});
      if (!opts.tls_client_ca.empty()) {
        auto ca = ReadFileBounded(opts.tls_client_ca, 1 << 20);
        if (!ca.ok()) {
          Log(LogLevel::kError, "TLS client CA: {}", ca.status().message());
          return 3;
        }
        ssl.pem_root_certs = *ca;
      }
      creds = grpc::SslServerCredentials(ssl);
    } else if (opts.insecure_tcp) {
      creds = grpc::InsecureServerCredentials();
    } else {
      Log(LogLevel::kError,
          "listen {}: TCP needs --tls-cert and --tls-key (or --insecure-tcp for a trusted loopback/test setup)", l);
      return 2;
    }
    auto port = std::make_unique<int>(0);
    builder.AddListeningPort(l, creds, port.get());
    bound[l] = std::move(port);
  }
  SymbolServiceImpl symbols(router, d.stats, control, [&d](::symdex::v1::StatusResponse* r) { d.FillStatus(r); });
  jit::Ingester ingester(*d.writer, d.writer_mu);
  JitServiceImpl jits(*d.query, ingester, d.stats, control);
  builder.RegisterService(&symbols);
  builder.RegisterService(&jits);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    Log(LogLevel::kError, "could not start the gRPC server on {} (address in use or not permitted)",
        StrJoin(listen, ", "));
    return 3;
  }
  for (const auto& [l, port] : bound) {
    if (*port == 0) {
      Log(LogLevel::kError, "could not listen on {}", l);
      server->Shutdown();
      return 3;
    }
    Log(LogLevel::kInfo, "listening on {} (port {}, {})", l, *port,
        opts.tls_cert.empty()        ? "plaintext"
        : opts.tls_client_ca.empty() ? "TLS"
                                     : "TLS + client certificates");
  }
  for (auto& ul : unix_listeners) {
    ul->Start(server.get(), &peers, &*policy, [](const std::string& m) { Log(LogLevel::kWarn, "{}", m); });
    Log(LogLevel::kInfo, "listening on unix:{} (mode {:04o})", ul->path(), opts.socket_mode);
  }
  // Health: overall ("") and per service, as grpc.health.v1 clients ask.
  for (const char* svc : {"", "symdex.v1.SymbolService", "symdex.v1.JitService"}) {
    server->GetHealthCheckService()->SetServingStatus(svc, true);
  }

  std::unique_ptr<metrics::HttpServer> http;
  if (!opts.metrics_listen.empty()) {
    d.registry.AddCollector([&d, &limiter, &pool](metrics::Registry& r) {
      d.CollectMetrics(r);
      const std::pair<Limiter::Kind, const char*> kinds[] = {{Limiter::Kind::kCall, "calls"},
                                                             {Limiter::Kind::kStream, "streams"},
                                                             {Limiter::Kind::kHeavy, "heavy"},
                                                             {Limiter::Kind::kAddresses, "unread_addresses"},
                                                             {Limiter::Kind::kListing, "listings"}};
      for (const auto& [k, name] : kinds) {
        r.GetGauge("symdex_limiter_in_use", "Units held now, by kind (limits: symdexd --help)", {{"kind", name}})
            .Set(static_cast<double>(limiter.InUse(k)));
      }
      r.GetGauge("symdex_heavy_queue_depth", "Heavy calls waiting for a pool thread")
          .Set(static_cast<double>(pool.queued()));
    });
    auto h = metrics::HttpServer::Start(d.registry, opts.metrics_listen);
    if (!h.ok()) {
      Log(LogLevel::kError, "{}", h.status().message());
      server->Shutdown();
      return 3;
    }
    http = std::move(*h);
    Log(LogLevel::kInfo, "metrics on http://{}/metrics (port {})", opts.metrics_listen, http->port());
  }

  if (opts.index_live.value_or(true) && opts.modules_poll > 0) {
    d.live_tracking = StrCat("polling ", SysrootPath(opts.sysroot, "/proc/modules"), " every ", opts.modules_poll,
                             " s; a change re-reads kallsyms (debug info reused by build-ID)");
  }
  std::thread tracker([&d] { d.LiveTracker(); });
  std::thread housekeeping([&d] { d.Housekeeping(); });
  std::thread jit_watcher;
  if (!opts.jit_watch.empty()) {
    jit_watcher = std::thread([&d] { d.JitWatcher(); });
    Log(LogLevel::kInfo, "watching {} for jit-*.dump / perf-*.map every {} s", StrJoin(opts.jit_watch, ", "),
        opts.jit_poll);
  }
  Log(LogLevel::kInfo, "symdexd {} ready, index {}", SYMDEX_VERSION, d.db_path);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Log(LogLevel::kInfo, "SIGHUP: re-indexing the live host at the next poll");
      d.reindex_requested = true;
      continue;
    }
    Log(LogLevel::kInfo, "{}: draining {} call(s) in flight (up to {} s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
        d.stats.in_flight(), opts.drain_seconds);
    break;
  }
  server->GetHealthCheckService()->SetServingStatus(false);
  for (auto& ul : unix_listeners) ul->Stop();  // no new connections
  d.stopper.Stop();
  auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opts.drain_seconds * 1000));
  server->Shutdown(deadline);
  Log(LogLevel::kDebug, "gRPC server shut down");
  server->Wait();
  tracker.join();
  housekeeping.join();
  Log(LogLevel::kDebug, "background threads stopped");
  if (jit_watcher.joinable()) jit_watcher.join();
  if (http) http->Stop();
  Log(LogLevel::kInfo, "stopped after {} call(s)", d.stats.served());
  return 0;
}

}  // namespace symdex::api
