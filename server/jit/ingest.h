// JIT ingest: jitdump and perf-map files into the JIT tables (server/store/jit_store.h). The file
// I/O and the policy live here -- which files a directory holds, how a dump is read in chunks,
// where a re-read resumes, which DEBUG_INFO is believed, what status a file gets; the bytes are
// parsed by server/ingest/jitdump.h and perf_map.h, the rows written by the store.
//
// Usage overview
//   auto files = ExpandJitPaths({"/tmp", "./jit-123.dump"});        // DIRs -> jit-*.dump, perf-*.map
//   for (f : *files) IngestReport r = IngestJitFile(db, f);          // one transaction per file
//
// Ingest is incremental and idempotent: each (instance, path) remembers where it stopped (after
// the last CODE_LOAD/CODE_MOVE/CLOSE, so DEBUG_INFO/UNWINDING_INFO waiting for their CODE_LOAD are
// read again), and rows are keyed by the record's file offset, so re-reading a dump -- or a copy
// of it at another path -- adds only what is new. A truncated or still-growing dump yields what is
// complete (status "truncated", with the offset of the incomplete tail). A malformed record stops
// the file with an error naming file and offset; the records before it are committed, nothing
// ingested earlier is touched.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/common/jit_records.h"
#include "server/common/status.h"
#include "server/store/sqlite_db.h"

namespace symdex::jit {

using IngestReport = JitIngestReport;

// Every jit-*.dump and perf-*.map directly in each DIR (sorted), files as given. A path that does
// not exist is an error naming it.
absl::StatusOr<std::vector<std::string>> ExpandJitPaths(const std::vector<std::string>& paths);

// Ingests one file, told apart by its first bytes (jitdump magic, either byte order) else as a
// perf map (whose pid comes from its name, perf-<pid>.map).
IngestReport IngestJitFile(store::Db& db, const std::string& path);

// Ingest for a process whose writer connection is shared (the daemon: live re-index, the JIT
// watcher and JitService.Ingest write through one connection, one at a time).
class Ingester {
 public:
  Ingester(store::Db& writer, std::mutex& writer_mu) : writer_(writer), mu_(writer_mu) {}
  // ExpandJitPaths, then each file under the writer's lock (other writers wait one file at most).
  absl::StatusOr<std::vector<IngestReport>> Ingest(const std::vector<std::string>& paths);

 private:
  store::Db& writer_;
  std::mutex& mu_;
};

}  // namespace symdex::jit
