// symdexd's life: options, the index and its writer, listeners, metrics, signals and the drain,
// wired together in order. The threads it starts are their own units: live tracking
// (live_tracking.cc), the JIT watcher (jit_watcher.cc); their shared state is daemon_state.h.
#include "server/daemon/daemon.h"

#include "server/daemon/daemon_state.h"

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
#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "server/api/services.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/fleet/kernel_cache.h"
#include "server/jit/ingest.h"
#include "server/metrics/http_server.h"
#include "server/metrics/metrics.h"
#include "server/store/open_index.h"

#ifndef SYMDEX_VERSION
#define SYMDEX_VERSION "dev"
#endif

namespace symdex::daemon {

using api::AccessPolicy;
using api::AccessPolicyOptions;
using api::CallControl;
using api::FairPool;
using api::JitServiceImpl;
using api::Limiter;
using api::PeerRegistry;
using api::QueryRouter;
using api::RpcStats;
using api::SymbolServiceImpl;
using api::UndecodableRequestInterceptor;
using api::UnixListener;
using api::UnixListenerOptions;
namespace {
// Threads that calls for a fleet kernel not indexed yet wait on (serve.h): a wait sleeps, so
// this bounds how many different cold kernels are waited for at once, not CPU.
constexpr int kFleetWaitThreads = 32;

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

}  // namespace

// Gives back the memory of debug files nobody has needed for a while.
void Daemon::Housekeeping() {
  while (!stopper.WaitFor(opts.trim_poll)) {
    if (query->TrimIfIdle(opts.trim_idle_seconds)) {
      Log(LogLevel::kDebug, "released the parsed debug info after {} s without DWARF lookups", opts.trim_idle_seconds);
    }
  }
}

void Daemon::FillStatus(query::ServerState& r) {
  r.version = SYMDEX_VERSION;
  r.started_at = started_at;
  r.live_tracking = live_tracking;
  r.live_updates = live_updates.load();
  {
    std::lock_guard<std::mutex> l(live_mu);
    r.live_behind = live_behind;
  }
  if (kernels) {
    r.fleet_cache = opts.fleet_cache;
    r.fleet_waiting = kernels->waiting();
    r.fleet_kernels = kernels->State();
  }
}

void Daemon::CollectMetrics(metrics::Registry& reg) {
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
        .Set(live_behind ? static_cast<double>(live_behind->since) : 0);
  }
  reg.GetGauge("symdex_debug_files", "Debug files indexed (by build-ID)")
      .Set(static_cast<double>(query->DebugFileCount()));
  auto c = query->cache_stats();
  const std::tuple<const char*, const char*, int64_t> lookups[] = {
      {"name", "hit", c.name_hits},
      {"name", "miss", c.name_misses},
      {"address", "hit", c.addr_hits},
      {"address", "miss", c.addr_misses},
  };
  for (const auto& [cache, result, n] : lookups) {
    reg.GetGauge("symdex_cache_lookups", "Query cache lookups since start, by cache and result",
                 {{"cache", cache}, {"result", result}})
        .Set(static_cast<double>(n));
  }
  reg.GetGauge("symdex_rpc_in_flight", "gRPC calls in progress").Set(static_cast<double>(stats.in_flight()));
  reg.GetGauge("symdex_start_time_seconds", "Unix time the daemon started").Set(static_cast<double>(started_at));
}

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

namespace {

// A step that stops symdexd from starting: logged, and the exit code (2: the options are wrong,
// 3: a resource failed — the index, a socket, a port).
struct StartError {
  int exit_code = 3;
};

// The index: the writer connection creates or migrates it; queries use their own read
// connections, whose target info may be 100 ms old (calls answered from the caches never touch
// SQLite, and a re-index, ours or another process's, is picked up within 0.1 s, whole).
std::optional<StartError> OpenTheIndex(Daemon& d, const DaemonOptions& opts) {
  d.db_path = opts.db.empty() ? DefaultIndexPath() : opts.db;  // OpenIndex creates its directory 0750
  auto writer = store::OpenIndex(d.db_path, store::IndexUse::kCreate);
  if (!writer.ok()) {
    Log(LogLevel::kError, "{}", writer.status().message());
    return StartError{3};
  }
  d.writer.emplace(std::move(*writer));
  auto q = query::LocalQuery::Open(d.db_path, query::LocalQuery::Options{.target_cache_seconds = 0.1});
  if (!q.ok()) {
    Log(LogLevel::kError, "{}", q.status().message());
    return StartError{3};
  }
  d.query = std::move(*q);
  return std::nullopt;
}

// debuginfod's client reads its limits from the environment, per fetch: set before any thread
// fetches anything.
void SetDebuginfodLimits(const DaemonOptions& opts) {
  if (!opts.debuginfod_urls.empty()) ::setenv("DEBUGINFOD_URLS", opts.debuginfod_urls.c_str(), 1);
  if (opts.fetch_timeout > 0) ::setenv("DEBUGINFOD_TIMEOUT", StrCat(static_cast<long>(opts.fetch_timeout)).c_str(), 1);
  if (opts.fetch_max_seconds > 0) {
    ::setenv("DEBUGINFOD_MAXTIME", StrCat(static_cast<long>(opts.fetch_max_seconds)).c_str(), 1);
  }
  if (opts.fetch_max_bytes > 0) ::setenv("DEBUGINFOD_MAXSIZE", StrCat(opts.fetch_max_bytes).c_str(), 1);
}

// --fleet-cache: kernels by build-ID, fetched and indexed on first use.
std::optional<StartError> OpenTheFleetCache(Daemon& d, const DaemonOptions& opts) {
  if (opts.fleet_cache.empty()) return std::nullopt;
  fleet::KernelCacheOptions ko;
  ko.dir = opts.fleet_cache;
  ko.max_bytes = opts.fleet_cache_max_bytes;
  ko.negative_seconds = opts.negative_cache_seconds;
  ko.max_concurrent_index = opts.fleet_index_jobs;
  ko.log = [](const std::string& line) { Log(LogLevel::kInfo, "{}", line); };
  ko.finder = DebugFinderOptions{.debug_dirs = opts.debug_dirs,
                                 .sysroot = "",
                                 .vmlinux = "",
                                 .use_debuginfod = opts.debuginfod,
                                 .debuginfod_progress = false};
  auto kc = fleet::KernelCache::Create(std::move(ko), &d.registry);
  if (!kc.ok()) {
    Log(LogLevel::kError, "{}", kc.status().message());
    return StartError{3};
  }
  d.kernels = std::move(*kc);
  Log(LogLevel::kInfo, "fleet cache {} ({} kernel(s) on disk, limit {} bytes); debuginfod: {}", opts.fleet_cache,
      d.kernels->State().size(), opts.fleet_cache_max_bytes,
      std::getenv("DEBUGINFOD_URLS") ? std::getenv("DEBUGINFOD_URLS") : "(DEBUGINFOD_URLS unset)");
  return std::nullopt;
}

// What serves the calls, in the order it is made (and torn down in reverse): who the peer is and
// what it may ask, its slots, the pools, the listeners, the services and the gRPC server.
struct Serving {
  std::vector<std::string> listen;
  std::optional<AccessPolicy> policy;
  PeerRegistry peers;
  std::optional<Limiter> limiter;
  std::optional<FairPool> pool;
  // Calls waiting for a fleet kernel's fetch and index run wait on threads of their own (they
  // sleep; the index runs themselves are bounded by --fleet-index-jobs).
  std::unique_ptr<FairPool> wait_pool;
  grpc::ServerBuilder builder;
  std::vector<std::unique_ptr<UnixListener>> unix_listeners;
  std::map<std::string, std::unique_ptr<int>> bound;  // TCP address -> the port gRPC bound
  std::optional<QueryRouter> router;
  std::optional<SymbolServiceImpl> symbols;
  std::optional<jit::Ingester> ingester;
  std::optional<JitServiceImpl> jits;
  std::unique_ptr<grpc::Server> server;
};

// The access policy, the limiter and the pools.
std::optional<StartError> MakeTheLimits(Serving& s, const DaemonOptions& opts) {
  s.listen = opts.listen;
  if (s.listen.empty()) s.listen.push_back("unix:/run/symdex/symdex.sock");
  AccessPolicyOptions access = opts.access;
  access.sysroot = opts.sysroot;
  auto policy = AccessPolicy::Create(access);
  if (!policy.ok()) {
    Log(LogLevel::kError, "{}", policy.status().message());
    return StartError{2};
  }
  s.policy.emplace(std::move(*policy));
  s.limiter.emplace(opts.limits);
  s.pool.emplace(opts.limits.heavy_threads);
  if (!opts.fleet_cache.empty()) s.wait_pool = std::make_unique<FairPool>(kFleetWaitThreads);
  return std::nullopt;
}

// TLS (or, with --insecure-tcp, plaintext) credentials for a TCP listener `l`.
std::optional<StartError> TcpCredentials(const DaemonOptions& opts, const std::string& l,
                                         std::shared_ptr<grpc::ServerCredentials>& creds) {
  if (opts.tls_cert.empty()) {
    if (opts.insecure_tcp) {
      creds = grpc::InsecureServerCredentials();
      return std::nullopt;
    }
    Log(LogLevel::kError,
        "listen {}: TCP needs --tls-cert and --tls-key (or --insecure-tcp for a trusted loopback/test setup)", l);
    return StartError{2};
  }
  grpc::SslServerCredentialsOptions ssl(opts.tls_client_ca.empty()
                                            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto cert = ReadFileBounded(opts.tls_cert, 1 << 20);
  auto key = ReadFileBounded(opts.tls_key, 1 << 20);
  if (!cert.ok() || !key.ok()) {
    Log(LogLevel::kError, "TLS: {}", (!cert.ok() ? cert.status() : key.status()).message());
    return StartError{3};
  }
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!opts.tls_client_ca.empty()) {
    auto ca = ReadFileBounded(opts.tls_client_ca, 1 << 20);
    if (!ca.ok()) {
      Log(LogLevel::kError, "TLS client CA: {}", ca.status().message());
      return StartError{3};
    }
    ssl.pem_root_certs = *ca;
  }
  creds = grpc::SslServerCredentials(ssl);
  return std::nullopt;
}

// The server's settings and every listener: Unix sockets are bound here (accepted by symdex,
// not gRPC: the peer's SO_PEERCRED decides what it sees), TCP ports are handed to gRPC.
std::optional<StartError> Listen(Serving& s, const DaemonOptions& opts) {
  grpc::EnableDefaultHealthCheckService(true);
  s.builder.SetMaxReceiveMessageSize(16 << 20);  // 65,536 addresses = 0.6 MB; specs are short
  s.builder.SetMaxSendMessageSize(256 << 20);
  // One connection cannot open more streams than this at once (HTTP/2 SETTINGS); the limiter
  // bounds what a peer holds over all its connections.
  s.builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 128);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(UndecodableRequestInterceptor());
  s.builder.experimental().SetInterceptorCreators(std::move(interceptors));
  for (const auto& l : s.listen) {
    if (l.starts_with("unix:")) {
      std::string path = l.substr(5);
      if (path.starts_with("//")) path = path.substr(2);
      if (auto st = PrepareUnixSocket(path); !st.ok()) {
        Log(LogLevel::kError, "listen {}: {}", l, st.message());
        return StartError{3};
      }
      auto ul = UnixListener::Bind(UnixListenerOptions{.path = path,
                                                       .mode = opts.socket_mode,
                                                       .max_connections = opts.max_connections,
                                                       .max_connections_per_peer = opts.max_connections_per_peer});
      if (!ul.ok()) {
        Log(LogLevel::kError, "listen {}: {}", l, ul.status().message());
        return StartError{3};
      }
      s.unix_listeners.push_back(std::move(*ul));
      continue;
    }
    std::shared_ptr<grpc::ServerCredentials> creds;
    if (auto e = TcpCredentials(opts, l, creds)) return e;
    auto port = std::make_unique<int>(0);
    s.builder.AddListeningPort(l, creds, port.get());
    s.bound[l] = std::move(port);
  }
  return std::nullopt;
}

// The services on the server, the server started, each listener serving, health set.
std::optional<StartError> StartServing(Daemon& d, Serving& s, const DaemonOptions& opts) {
  const CallControl control{&*s.policy, &s.peers, &*s.limiter, &*s.pool, s.wait_pool.get()};
  s.router.emplace(*d.query, d.kernels.get());
  s.symbols.emplace(*s.router, d.stats, control, [&d](query::ServerState& r) { d.FillStatus(r); });
  s.ingester.emplace(*d.writer, d.writer_mu);
  s.jits.emplace(*s.symbols, *s.ingester);
  s.builder.RegisterService(&*s.symbols);
  s.builder.RegisterService(&*s.jits);
  s.server = s.builder.BuildAndStart();
  if (!s.server) {
    Log(LogLevel::kError, "could not start the gRPC server on {} (address in use or not permitted)",
        StrJoin(s.listen, ", "));
    return StartError{3};
  }
  for (const auto& [l, port] : s.bound) {
    if (*port == 0) {
      Log(LogLevel::kError, "could not listen on {}", l);
      s.server->Shutdown();
      return StartError{3};
    }
    Log(LogLevel::kInfo, "listening on {} (port {}, {})", l, *port,
        opts.tls_cert.empty()        ? "plaintext"
        : opts.tls_client_ca.empty() ? "TLS"
                                     : "TLS + client certificates");
  }
  for (auto& ul : s.unix_listeners) {
    ul->Start(s.server.get(), &s.peers, &*s.policy, [](const std::string& m) { Log(LogLevel::kWarn, "{}", m); });
    Log(LogLevel::kInfo, "listening on unix:{} (mode {:04o})", ul->path(), opts.socket_mode);
  }
  // Health: overall ("") and per service, as grpc.health.v1 clients ask.
  for (const char* svc : {"", "symdex.v1.SymbolService", "symdex.v1.JitService"}) {
    s.server->GetHealthCheckService()->SetServingStatus(svc, true);
  }
  return std::nullopt;
}

// --metrics-listen: /metrics, with the limiter's and the pool's state beside the daemon's.
std::optional<StartError> ServeMetrics(Daemon& d, Serving& s, const DaemonOptions& opts,
                                       std::unique_ptr<metrics::HttpServer>& http) {
  if (opts.metrics_listen.empty()) return std::nullopt;
  d.registry.AddCollector([&d, &s](metrics::Registry& r) {
    d.CollectMetrics(r);
    const std::pair<Limiter::Kind, const char*> kinds[] = {{Limiter::Kind::kCall, "calls"},
                                                           {Limiter::Kind::kStream, "streams"},
                                                           {Limiter::Kind::kHeavy, "heavy"},
                                                           {Limiter::Kind::kAddresses, "unread_addresses"},
                                                           {Limiter::Kind::kListing, "listings"}};
    for (const auto& [k, name] : kinds) {
      r.GetGauge("symdex_limiter_in_use", "Units held now, by kind (limits: symdexd --help)", {{"kind", name}})
          .Set(static_cast<double>(s.limiter->InUse(k)));
    }
    r.GetGauge("symdex_heavy_queue_depth", "Heavy calls waiting for a pool thread")
        .Set(static_cast<double>(s.pool->queued()));
  });
  auto h = metrics::HttpServer::Start(d.registry, opts.metrics_listen);
  if (!h.ok()) {
    Log(LogLevel::kError, "{}", h.status().message());
    s.server->Shutdown();
    return StartError{3};
  }
  http = std::move(*h);
  Log(LogLevel::kInfo, "metrics on http://{}/metrics (port {})", opts.metrics_listen, http->port());
  return std::nullopt;
}

// Until SIGTERM or SIGINT (blocked in every thread: BlockTerminationSignals); SIGHUP asks for a
// re-index of the live host and waits on.
void WaitForTheEnd(Daemon& d, const DaemonOptions& opts) {
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
    return;
  }
}

}  // namespace

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
  if (auto e = OpenTheIndex(d, opts)) return e->exit_code;
  SetDebuginfodLimits(opts);
  if (auto e = OpenTheFleetCache(d, opts)) return e->exit_code;
  Serving s;
  if (auto e = MakeTheLimits(s, opts)) return e->exit_code;
  if (auto e = Listen(s, opts)) return e->exit_code;
  if (auto e = StartServing(d, s, opts)) return e->exit_code;
  std::unique_ptr<metrics::HttpServer> http;
  if (auto e = ServeMetrics(d, s, opts, http)) return e->exit_code;

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
  WaitForTheEnd(d, opts);

  // The drain: no new calls or connections, the calls in flight given --drain-seconds.
  s.server->GetHealthCheckService()->SetServingStatus(false);
  for (auto& ul : s.unix_listeners) ul->Stop();
  d.stopper.Stop();
  auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opts.drain_seconds * 1000));
  s.server->Shutdown(deadline);
  Log(LogLevel::kDebug, "gRPC server shut down");
  s.server->Wait();
  tracker.join();
  housekeeping.join();
  Log(LogLevel::kDebug, "background threads stopped");
  if (jit_watcher.joinable()) jit_watcher.join();
  if (http) http->Stop();
  Log(LogLevel::kInfo, "stopped after {} call(s)", d.stats.served());
  return 0;
}

}  // namespace symdex::daemon
