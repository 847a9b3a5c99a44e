// The metrics endpoint alone, for tests/bench/metrics_bench.sh: serves a Registry shaped like
// symdexd's (per-RPC counters and latency histograms, limiter gauges) on HOST:PORT until SIGTERM
// or SIGINT. Prints the bound port on stdout, then "ready".
//
//   metrics_serve 127.0.0.1:0
//
// Standalone rather than symdexd --metrics-listen so the benchmark measures the HTTP layer, not
// the daemon's collectors (which read SQLite on every scrape).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "server/metrics/http_server.h"
#include "server/metrics/metrics.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
    return 2;
  }
  symdex::metrics::Registry registry;
  const char* rpcs[] = {"Lookup", "Resolve",     "Symbolize",   "SymbolizeStream", "Kprobe",
                        "Status", "ListModules", "JitRegister", "JitUnregister",   "Reindex"};
  int i = 0;
  for (const char* rpc : rpcs) {
    for (const char* code : {"OK", "NOT_FOUND"}) {
      registry
          .GetCounter("symdex_rpcs_total", "RPCs finished, by method and status code", {{"rpc", rpc}, {"code", code}})
          .Inc(++i * 17);
    }
    auto& h = registry.GetHistogram("symdex_rpc_seconds", "RPC latency", {{"rpc", rpc}});
    for (int k = 0; k < 50; ++k) h.Observe(1e-5 * (k + 1) * (i + 1));
  }
  for (const char* kind : {"calls", "streams", "heavy", "unread_addresses"}) {
    registry.GetGauge("symdex_limiter_in_use", "Units held now, by kind", {{"kind", kind}}).Set(3);
  }
  // Runs on every scrape, as the daemon's collector does.
  registry.AddCollector([](symdex::metrics::Registry& r) {
    r.GetGauge("symdex_heavy_queue_depth", "Heavy calls waiting for a pool thread").Set(1);
  });

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before Start(): its threads inherit the mask

  auto server = symdex::metrics::HttpServer::Start(registry, argv[1]);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 3;
  }
  std::printf("%d\nready\n", (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  (*server)->Stop();
  return 0;
}
