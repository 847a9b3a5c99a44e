// symdexd: serves SymbolService + JitService (+ gRPC health and reflection) over a Unix socket
// and/or TLS TCP, keeps the live host's index current as modules come and go, ingests jitdumps
// appearing in watched directories, exports Prometheus metrics, and drains on SIGTERM.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/api/limits.h"
#include "server/api/peers.h"
#include "server/common/status.h"

namespace symdex::daemon {

struct DaemonOptions {
  std::vector<std::string> listen;  // unix:PATH or HOST:PORT; default unix:/run/symdex/symdex.sock
  int socket_mode = 0660;
  std::string db;
  std::string tls_cert, tls_key, tls_client_ca;
  bool insecure_tcp = false;
  std::string metrics_listen;  // HOST:PORT; "" = off
  std::string log_level = "info";
  std::optional<bool> index_live;  // nullopt: index the live host when its kallsyms has addresses
  double modules_poll = 2;         // seconds; 0 = no live tracking
  std::vector<std::string> jit_watch;
  double jit_poll = 2;  // seconds between scans of jit_watch
  double drain_seconds = 10;
  // Parsed debug info (libdw line tables, CU data) is released after this long without a DWARF
  // lookup; checked every trim_poll seconds.
  double trim_idle_seconds = 30;
  double trim_poll = 5;
  // Live host inputs (tests point these at a captured sysroot).
  std::string sysroot;
  std::vector<std::string> debug_dirs;
  bool debuginfod = true;
  // Kernels by build-ID on demand (fleet/kernel_cache.h): "" = off (a "build-id:HEX" target must
  // then be in the own index).
  std::string fleet_cache;
  uint64_t fleet_cache_max_bytes = uint64_t{20} << 30;
  double negative_cache_seconds = 300;
  int fleet_index_jobs = 1;  // fleet index runs at once
  // debuginfod client limits (libdebuginfod's DEBUGINFOD_TIMEOUT / _MAXTIME / _MAXSIZE), set for
  // every fetch this daemon makes; 0 = libdebuginfod's default (90 s without progress; none).
  std::string debuginfod_urls;  // set: DEBUGINFOD_URLS for this daemon (else the environment's)
  double fetch_timeout = 0;
  double fetch_max_seconds = 0;
  uint64_t fetch_max_bytes = 0;
  // Who sees absolute addresses of live targets (peers.h) and how much each peer may ask at
  // once (limits.h). access.sysroot is set from `sysroot`.
  api::AccessPolicyOptions access;
  api::CallLimits limits;
  int max_connections = 1024;         // Unix-socket connections, all peers
  int max_connections_per_peer = 64;  // ... per uid
};

// Runs until SIGTERM/SIGINT (the caller must have blocked them in every thread: call
// BlockTerminationSignals() first thing in main). Returns the process exit code.
int RunDaemon(const DaemonOptions& opts);
void BlockTerminationSignals();

enum class LogLevel { kDebug, kInfo, kWarn, kError };
absl::StatusOr<LogLevel> ParseLogLevel(const std::string& s);

}  // namespace symdex::daemon
