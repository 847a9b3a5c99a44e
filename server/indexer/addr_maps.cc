// Step 6 of an index run (steps.h): the address map (debuginfo/symbolize/addr_map.h) of each debug file
// the target uses — vmlinux's and every module's — built once per build-ID. Planned as soon as
// the debug files are parsed, built without the store, so that the build runs while the debug
// files and the target are written.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/debuginfo/worker/worker_client.h"
#include "server/indexer/steps.h"

namespace symdex::indexer {

absl::StatusOr<std::vector<AddrMapBuild>> PlanAddrMaps(store::Db& db, const IndexRequest& req,
                                                       const DebugFilePlan& plan,
                                                       const std::vector<ParsedDebugFile>& parsed, IndexSummary& sum) {
  std::vector<AddrMapBuild> builds;
  const std::string map_dir = AddrMapDirFor(db.path());
  if (!req.addr_maps || map_dir.empty()) return builds;
  std::vector<const ParsedDebugFile*> parse_of(plan.parts.size(), nullptr);
  for (size_t k = 0; k < plan.to_parse.size(); ++k) parse_of[plan.to_parse[k]] = &parsed.at(k);
  std::set<std::string> planned;  // one build per map file, however many parts share a build-ID
  for (size_t i = 0; i < plan.parts.size(); ++i) {
    const Part& p = plan.parts[i];
    if (p.record.build_id.empty()) continue;
    std::string debug_path, build_id = p.record.build_id;
    bool relocatable = false;
    // A map made from an earlier file of this build-ID (which changed since) is made again.
    bool reparsed = false;
    if (const ParsedDebugFile* f = parse_of[i]) {
      // Parsed in this run: step 4b stored it under p.record.path, unless its parse failed
      // or the file turned out not to be the build-ID's.
      if (!f->index.ok()) continue;
      if (p.OtherBuildId(*f->index)) continue;
      debug_path = p.record.path;
      relocatable = f->index->relocatable;
      reparsed = p.stale.has_value();
    } else {
      if (!p.record.debug_file_id) continue;  // none, or the same build-ID as a part parsed now
      // The stored row, not the part: it says which file the index was made from.
      ASSIGN_OR_RETURN(auto df, store::FindDebugFile(db, p.record.build_id));
      if (!df) continue;
      debug_path = df->path;
      build_id = df->build_id;
      relocatable = df->relocatable;
    }
    const std::string path = debuginfo::AddrMapPath(map_dir, build_id);
    if (!planned.insert(path).second) continue;
    const bool made = parse_of[i] != nullptr && parse_of[i]->map_made;  // (ModuleMapsAhead's rule is this one)
    auto existing = debuginfo::MappedAddrMap::Open(path, build_id);
    if (existing.ok() && !reparsed && !made) {
      ++sum.addr_maps_present;
      continue;
    }
    // The map is rebuilt while the new target is written: the old file (same build-ID, made
    // from the old file's DWARF) must not be opened for the new generation meanwhile. Without
    // it, readers read DWARF until the new map is in place.
    if (existing.ok()) ::unlink(path.c_str());
    auto copy = plan.plain.find(debug_path);
    builds.push_back({.debug_path = debug_path,
                      .map_path = path,
                      .relocatable = relocatable,
                      .plain = copy == plan.plain.end() ? nullptr : copy->second,
                      .made = made});
  }
  return builds;
}

AddrMapOutcome BuildAddrMaps(const std::vector<AddrMapBuild>& builds, const IndexRequest& req, unsigned jobs,
                             PrivateFileBatch* made) {
  const auto start = std::chrono::steady_clock::now();
  AddrMapOutcome out;
  std::mutex mu;  // guards out and the progress count
  size_t done = 0;
  if (req.progress) req.progress("DWARF into address maps", 0, builds.size());
  // The worker's answer goes straight into the map's temporary file (vmlinux's is ~50 MB).
  auto build = [](debuginfo::DwarfWorker& w, const AddrMapBuild& b, unsigned threads) {
    return debuginfo::WriteAddrMapFileFrom(b.map_path,
                                           [&](int fd) { return w.AddrMapInto(b.ReadPath(), threads, fd); });
  };
  auto progress = [&] {  // (under mu)
    if (req.progress) req.progress("DWARF into address maps", ++done, builds.size());
  };
  auto finish = [&](const AddrMapBuild& b, absl::Status written, bool counted = false) {
    if (b.plain) written = b.plain->Explain(written);
    std::lock_guard<std::mutex> l(mu);
    if (written.ok()) {
      ++out.built;
    } else {
      // Answers stay right without it (libdw is read instead), only slower: a warning.
      out.warnings.push_back(
          StrCat("no address map for ", b.debug_path, " (symdex addr reads DWARF instead): ", written.message()));
    }
    if (!counted) progress();
  };
  // In worker processes, as the DWARF index was: the files are untrusted input.
  auto exe = debuginfo::FindWorkerExecutable();
  if (!exe.ok()) {
    for (const AddrMapBuild& b : builds) finish(b, exe.status());
    return out;
  }
  // Temporary files a killed writer left (symdexd writes maps too, and does not open the index
  // through open_index.cc): once per step, not once per file.
  if (!builds.empty()) {
    debuginfo::RemoveStaleAddrMapTempFiles(std::filesystem::path(builds.front().map_path).parent_path().string());
  }
  debuginfo::WorkerLimits limits = debuginfo::WorkerLimits::FromEnvironment();
  // Nothing waits for the maps (readers read DWARF until one is in place), while the debug
  // files' rows and the target written meanwhile are what answers need: the maps take the CPU
  // the writer leaves (on 2 cores the vmlinux DWARF phase took 0.48-0.73 s beside a map worker
  // of equal priority, against 0.55 alone), and all of it afterwards.
  limits.nice = debuginfo::kBackgroundNice;
  // Linked files (vmlinux) one at a time with every thread; then the modules, one per thread at
  // a time (most are small: a worker each, reused for many).
  std::vector<const AddrMapBuild*> modules, installed;  // (installed: the modules' maps, made or built)
  {
    debuginfo::DwarfWorker w(*exe, limits);
    for (const AddrMapBuild& b : builds) {
      if (b.made) {
        installed.push_back(&b);
        std::lock_guard<std::mutex> l(mu);
        progress();
      } else if (b.relocatable) {
        modules.push_back(&b);
      } else {
        finish(b, build(w, b, jobs));
      }
    }
  }
  installed.insert(installed.end(), modules.begin(), modules.end());
  // The modules' maps, many and small, are installed together: written as they come, then one
  // flush of the file system and the renames (common/file_util.h: PrivateFileBatch).
  PrivateFileBatch own(".tmp.", "addr-map-temp", "addr-map-installed");  // <id>.addrmap.tmp.<pid>
  PrivateFileBatch& batch = made != nullptr ? *made : own;
  std::atomic<size_t> next{0};
  auto work = [&] {
    debuginfo::DwarfWorker w(*exe, limits);
    for (size_t i; (i = next.fetch_add(1)) < modules.size();) {
      const AddrMapBuild& b = *modules[i];
      absl::Status written = batch.Write(b.map_path, [&](int fd) { return w.AddrMapInto(b.ReadPath(), 1, fd); });
      if (!written.ok()) {
        finish(b, std::move(written));
      } else {
        std::lock_guard<std::mutex> l(mu);
        progress();
      }
    }
  };
  {
    std::vector<std::jthread> threads;
    const size_t n = std::min<size_t>(std::max(1u, jobs), modules.size());
    for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
    if (n > 0) work();
  }
  {
    std::unordered_map<std::string, const AddrMapBuild*> by_path;
    for (const AddrMapBuild* b : installed) by_path.emplace(b->map_path, b);
    for (auto& [path, st] : batch.Commit()) {
      if (auto it = by_path.find(path); it != by_path.end()) finish(*it->second, std::move(st), /*counted=*/true);
    }
  }
  std::sort(out.warnings.begin(), out.warnings.end());  // the same order whatever the threads did
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace symdex::indexer
