// Step 6 of an index run (steps.h): the address map (debuginfo/addr_map.h) of each linked
// debug file the target uses, built once per build-ID. Planned with the store, built without
// it, so that the build runs while step 7 writes the target.
#include <unistd.h>

#include <chrono>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/addr_map.h"
#include "server/debuginfo/worker_client.h"
#include "server/indexer/steps.h"

namespace symdex::indexer {

absl::StatusOr<std::vector<AddrMapBuild>> PlanAddrMaps(store::Db& db, const IndexRequest& req,
                                                       const std::vector<Part>& parts, IndexSummary& sum) {
  std::vector<AddrMapBuild> builds;
  const std::string map_dir = AddrMapDirFor(db.path());
  for (const Part& p : parts) {
    // Modules (ET_REL) have no map: only vmlinux's debug file is looked up.
    if (p.module >= 0 || !req.addr_maps || map_dir.empty() || !p.record.debug_file_id || p.record.build_id.empty()) {
      continue;
    }
    // The stored row, not the part: it says which file the index was made from.
    ASSIGN_OR_RETURN(auto df, store::FindDebugFile(db, p.record.build_id));
    if (!df || df->relocatable) continue;
    const std::string path = debuginfo::AddrMapPath(map_dir, df->build_id);
    auto existing = debuginfo::MappedAddrMap::Open(path, df->build_id);
    // A vmlinux parsed again because its file changed gets a new map (the old one was made from
    // the old file's DWARF).
    const bool reparsed = p.stale && p.record.status != target::DebugFileStatus::kParseError &&
                          p.record.debug_file_id == p.stale->id && p.record.status != target::DebugFileStatus::kCached;
    if (existing.ok() && !reparsed) {
      ++sum.addr_maps_present;
      continue;
    }
    // The map is rebuilt while the new target is written: the old file (same build-ID, made
    // from the old file's DWARF) must not be opened for the new generation meanwhile. Without
    // it, readers read DWARF until the new map is in place.
    if (existing.ok()) ::unlink(path.c_str());
    builds.push_back({df->path, path});
  }
  return builds;
}

AddrMapOutcome BuildAddrMaps(const std::vector<AddrMapBuild>& builds, const IndexRequest& req, unsigned jobs) {
  const auto start = std::chrono::steady_clock::now();
  AddrMapOutcome out;
  for (const AddrMapBuild& b : builds) {
    if (req.progress) req.progress("DWARF into an address map", 0, 1);
    // In a worker process, as the DWARF index was: the file is untrusted input.
    absl::StatusOr<std::string> bytes = absl::UnknownError("no worker");
    {
      auto exe = debuginfo::FindWorkerExecutable();
      if (!exe.ok()) {
        bytes = exe.status();
      } else {
        debuginfo::DwarfWorker w(*exe, debuginfo::WorkerLimits::FromEnvironment());
        bytes = w.AddrMap(b.debug_path, jobs);
      }
    }
    absl::Status written = bytes.ok() ? debuginfo::WriteAddrMapFile(b.map_path, *bytes) : bytes.status();
    if (req.progress) req.progress("DWARF into an address map", 1, 1);
    if (written.ok()) {
      ++out.built;
    } else {
      // Answers stay right without it (libdw is read instead), only slower: a warning.
      out.warnings.push_back(
          StrCat("no address map for ", b.debug_path, " (symdex addr reads DWARF instead): ", written.message()));
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace symdex::indexer
