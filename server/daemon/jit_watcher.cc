// jitdumps and perf maps appearing in the watched directories, ingested as they grow.
#include "server/daemon/daemon_state.h"

#include <filesystem>

#include "server/jit/ingest.h"

namespace symdex::daemon {

void Daemon::JitWatcher() {
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

}  // namespace symdex::daemon
