// symdexd: the symdex daemon. See `symdexd --help` and deploy/README.md.
#include <fmt/core.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <CLI/CLI.hpp>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>

#include "server/api/methods.h"
#include "server/common/strings.h"
#include "server/daemon/daemon.h"
#include "server/query/local_query.h"

// The daemon's command line: one statement an option, in --help's order. Long because the
// daemon has that many options; a table reads best whole (RunDaemon, daemon.cc, is the life).
int main(int argc, char** argv) {
  // Before any thread exists (gRPC starts its own): SIGTERM/SIGINT/SIGHUP go to sigwait().
  symdex::daemon::BlockTerminationSignals();
  // Nothing the daemon creates is for other users (the index and its maps hold live addresses;
  // they are created 0640 explicitly, this also covers SQLite's own temporary files).
  ::umask(::umask(0) | 027);
  symdex::daemon::DaemonOptions o;
  CLI::App app{
      "symdexd - the symdex daemon: serves symbol resolution, symbolization and JIT lookups over gRPC\n"
      "(symdex.v1.SymbolService, symdex.v1.JitService, grpc.health.v1.Health, server reflection),\n"
      "keeps the live host's index current as modules load and unload, and exports Prometheus metrics."};
  app.name("symdexd");
  app.set_version_flag("--version", "symdexd " + symdex::query::VersionText(SYMDEX_VERSION));
  app.set_config("--config", "",
                 "Config file: 'key = value' lines, keys are the long option names; "
                 "repeat a key (or use [a, b]) for listen/jit-watch/debug-dir. Command-line options win.");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error, not ignored
  app.add_option("--listen", o.listen,
                 "unix:PATH or HOST:PORT (repeatable). Default unix:/run/symdex/symdex.sock. TCP needs "
                 "--tls-cert/--tls-key unless --insecure-tcp");
  app.add_option_function<std::string>(
         "--socket-mode", [&o](const std::string& s) { o.socket_mode = static_cast<int>(std::stoul(s, nullptr, 8)); },
         "Unix socket permissions, octal (default 0660)")
      ->check(CLI::Validator(
          [](std::string& s) {
            return s.find_first_not_of("01234567") == std::string::npos && !s.empty() && s.size() <= 4
                       ? std::string()
                       : std::string("an octal mode like 0660");
          },
          "OCTAL"));
  app.add_option("--db", o.db,
                 "SQLite index (default /var/lib/symdex/index.db as root, else "
                 "$XDG_STATE_HOME/symdex/index.db); created if missing");
  app.add_option("--tls-cert", o.tls_cert, "PEM server certificate chain for TCP listeners");
  app.add_option("--tls-key", o.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", o.tls_client_ca, "PEM CA bundle: require and verify client certificates");
  app.add_flag("--insecure-tcp", o.insecure_tcp, "Allow plaintext TCP listeners (loopback tests and benchmarks)");
  app.add_option("--metrics-listen", o.metrics_listen, "HOST:PORT for Prometheus /metrics (default: off)");
  app.add_option("--log-level", o.log_level, "debug, info (default), warn or error");
  app.add_flag_function(
      "--index-live,!--no-index-live", [&o](int64_t n) { o.index_live = n > 0; },
      "Index the live host at start and follow its modules (default: when kallsyms shows addresses)");
  app.add_option("--modules-poll", o.modules_poll,
                 "Seconds between /proc/modules checks; a change re-indexes the live host (0 = never; default 2)");
  app.add_option("--jit-watch", o.jit_watch, "Directory to watch for jit-*.dump / perf-*.map (repeatable, e.g. /tmp)");
  app.add_option("--jit-poll", o.jit_poll, "Seconds between scans of --jit-watch directories (default 2)");
  app.add_option("--drain-seconds", o.drain_seconds, "On SIGTERM, wait this long for calls in flight (default 10)");
  app.add_option("--release-debuginfo-after", o.trim_idle_seconds,
                 "Seconds without DWARF lookups after which parsed debug info is released (default 30); "
                 "cached answers stay");
  app.add_option("--sysroot", o.sysroot, "Read the live host's /proc and /sys under this directory (tests)");
  app.add_option("--debug-dir", o.debug_dirs,
                 "Extra directory of debug files (repeatable; /usr/lib/debug is searched)");
  app.add_flag("--debuginfod,!--no-debuginfod", o.debuginfod,
               "Ask debuginfod servers (DEBUGINFOD_URLS) for missing debug files (default: yes)");
  // Who may see live addresses, and how much one peer may ask (README: "Access and limits").
  app.add_option("--fleet-cache", o.fleet_cache,
                 "Directory of kernels indexed on demand by build-ID (one DIR/<build-id>.db each): a request "
                 "for target build-id:HEX (or SymbolizeFrames with kernel_build_id) fetches the debug vmlinux "
                 "(and the modules it names) through debuginfod or --debug-dir and indexes it once");
  app.add_option("--fleet-cache-max-bytes", o.fleet_cache_max_bytes,
                 "Size bound of --fleet-cache; least recently used kernels are evicted (default 20 GiB)");
  app.add_option("--negative-cache-seconds", o.negative_cache_seconds,
                 "How long a failed fetch/index of a kernel or module is remembered and answered at once (300)");
  app.add_option("--fleet-index-jobs", o.fleet_index_jobs,
                 "Fleet kernels indexed at once (1; each run holds a kernel's symbols and DWARF join, ~0.75 GB for "
                 "Debian's cloud kernel)");
  app.add_option("--debuginfod-urls", o.debuginfod_urls,
                 "debuginfod servers to fetch debug files from (space-separated; DEBUGINFOD_URLS otherwise)");
  app.add_option("--fetch-timeout", o.fetch_timeout,
                 "debuginfod: give up a fetch after this many seconds without progress (DEBUGINFOD_TIMEOUT; 90)");
  app.add_option("--fetch-max-seconds", o.fetch_max_seconds,
                 "debuginfod: give up a fetch that takes longer than this in all (DEBUGINFOD_MAXTIME; no limit)");
  app.add_option("--fetch-max-bytes", o.fetch_max_bytes,
                 "debuginfod: refuse a file bigger than this (DEBUGINFOD_MAXSIZE; no limit)");
  app.add_option("--privileged-group", o.access.privileged_groups,
                 "Members of this group (Unix-socket peers) see absolute addresses of live targets (repeatable). "
                 "Root, the daemon's own user and, mirroring kptr_restrict, CAP_SYSLOG holders always do; others "
                 "get KASLR-free answers (_text+N, MOD:SECTION+off)");
  app.add_option("--privileged-cert-name", o.access.privileged_cert_names,
                 "TLS client certificates with this CN or SAN see absolute addresses (repeatable)");
  app.add_flag("--trust-tcp-peers", o.access.trust_tcp_peers,
               "Every TCP peer sees absolute addresses (a trusted network, or --insecure-tcp tests)");
  app.add_option("--max-calls-per-peer", o.limits.calls_per_peer,
                 "Calls in progress per peer (uid, certificate name or IP) (256)");
  app.add_option("--max-streams-per-peer", o.limits.streams_per_peer, "Open streams per peer (32)");
  app.add_option("--max-heavy-per-peer", o.limits.heavy_per_peer,
                 symdex::StrCat("Heavy calls (", symdex::api::HeavyMethodNames(), ") queued or running per peer (32)"));
  app.add_option("--max-unread-addresses-per-peer", o.limits.addresses_per_peer,
                 "Addresses in answers built but not yet read, per peer (131072)");
  app.add_option("--max-unread-addresses", o.limits.addresses,
                 "... over all peers (524288; bounds the memory unread answers hold)");
  app.add_option("--max-calls", o.limits.calls, "Calls in progress, all peers (4096)");
  app.add_option("--max-streams", o.limits.streams, "Open streams, all peers (512)");
  app.add_option("--max-heavy", o.limits.heavy, "Heavy calls queued or running, all peers (256)");
  app.add_option("--max-listings-per-peer", o.limits.listings_per_peer,
                 "Whole-target symbol listings (ListSymbols) in progress per peer (2)");
  app.add_option("--max-listings", o.limits.listings, "... over all peers (8; each holds a kernel's symbol list)");
  app.add_option("--heavy-threads", o.limits.heavy_threads, "Threads running heavy calls (2)");
  app.add_option("--max-connections-per-peer", o.max_connections_per_peer, "Unix-socket connections per uid (64)");
  app.add_option("--max-connections", o.max_connections, "Unix-socket connections, all peers (1024)");
  app.footer(
      "Signals: SIGTERM/SIGINT drain calls in flight and exit 0; SIGHUP re-indexes the live host.\n"
      "Exit codes: 0 clean shutdown, 2 bad option, 3 cannot open the index or listen.\n"
      "Example: symdexd --listen unix:/run/symdex/symdex.sock --metrics-listen 127.0.0.1:9464 --jit-watch /tmp\n"
      "         symdex --connect unix:/run/symdex/symdex.sock which name_show");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // CLI11 2.1 keeps only the first run of a repeated config key: a repetition further down would
  // be dropped without a word, so it is refused here.
  if (auto* cfg = app.get_config_ptr(); cfg != nullptr && cfg->count() > 0) {
    std::ifstream in(cfg->as<std::string>());
    std::map<std::string, int> last_line;
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos || line[b] == '#' || line[b] == ';' || line[b] == '[') continue;
      size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string key = line.substr(b, line.find_last_not_of(" \t", eq - 1) + 1 - b);
      auto [it, fresh] = last_line.try_emplace(key, n);
      if (!fresh && it->second != n - 1) {
        fmt::print(stderr,
                   "symdexd: {}:{}: '{}' repeats line {}'s key with other lines between: write repeated "
                   "keys on consecutive lines, or as a list `{} = [a, b]`\n",
                   cfg->as<std::string>(), n, key, it->second, key);
        return 2;
      }
      it->second = n;
    }
  }
  // Server reflection lives in its own library, linked into the daemon only (its descriptors
  // would clash with clients that carry their own copy of reflection.proto).
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  return symdex::daemon::RunDaemon(o);
}
