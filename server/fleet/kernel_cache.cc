#include "server/fleet/kernel_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "server/common/build_id.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/indexer/indexer.h"
#include "server/store/open_index.h"

namespace symdex::fleet {

namespace fs = std::filesystem;

struct KernelCache::Entry {
  std::mutex mu;
  std::condition_variable cv;
  bool busy = false;  // an index run in progress
  Clock::time_point busy_since;
  bool on_disk = false;  // an index file exists (maybe not opened yet)
  std::shared_ptr<query::LocalQuery> q;
  std::map<std::string, std::string> modules;              // indexed: name -> build-ID
  std::map<std::string, Clock::time_point> module_failed;  // "name build-ID" -> remembered until
  std::optional<Clock::time_point> failed_until;
  absl::Status failure;
  double index_seconds = 0;
  Clock::time_point last_used = Clock::now();
};

namespace {

uint64_t PathBytes(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    uint64_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec)) {
      if (e.is_regular_file(ec)) n += e.file_size(ec);
    }
    return n;
  }
  uint64_t n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

std::vector<std::string> FilesOf(const std::string& db) {
  return {db, db + "-wal", db + "-shm", db + "-journal", AddrMapDirFor(db)};
}

std::string Seconds(double s) { return fmt::format("{:.0f} s", s); }

}  // namespace

absl::StatusOr<std::unique_ptr<KernelCache>> KernelCache::Create(KernelCacheOptions opts, metrics::Registry* registry) {
  if (opts.dir.empty()) return absl::InvalidArgumentError("--fleet-cache: a directory is required");
  std::error_code ec;
  fs::create_directories(opts.dir, ec);
  if (ec) return absl::FailedPreconditionError(StrCat("--fleet-cache ", opts.dir, ": ", ec.message()));
  ::chmod(opts.dir.c_str(), kPrivateDirMode);
  std::unique_ptr<KernelCache> c(new KernelCache(std::move(opts), registry));
  for (const auto& e : fs::directory_iterator(c->opts_.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".db")) continue;
    const std::string hex = name.substr(0, name.size() - 3);
    if (!BuildId::FromHex(hex) || Lower(hex) != hex) continue;
    auto entry = std::make_shared<Entry>();
    entry->on_disk = true;
    std::error_code tec;
    auto mtime = fs::last_write_time(e.path(), tec);
    if (!tec) {
      // Older files first in the LRU order, as they were last written.
      auto age = fs::file_time_type::clock::now() - mtime;
      entry->last_used = Clock::now() - std::chrono::duration_cast<Clock::duration>(age);
    }
    c->entries_.emplace(hex, std::move(entry));
  }
  if (registry) {
    KernelCache* self = c.get();
    registry->AddCollector([self](metrics::Registry& r) {
      uint64_t bytes = 0;
      int64_t kernels = 0;
      query::LocalQuery::CacheStats sum;
      for (const KernelEntryState& s : self->State()) {
        bytes += s.bytes;
        kernels += s.state == "indexed" || s.state == "on-disk";
      }
      {
        std::lock_guard<std::mutex> l(self->mu_);
        for (auto& [hex, e] : self->entries_) {
          std::lock_guard<std::mutex> el(e->mu);
          if (!e->q) continue;
          auto st = e->q->cache_stats();
          sum.addr_hits += st.addr_hits;
          sum.addr_misses += st.addr_misses;
          sum.name_hits += st.name_hits;
          sum.name_misses += st.name_misses;
        }
      }
      r.GetGauge("symdex_fleet_cache_bytes", "Bytes of kernel indexes in --fleet-cache")
          .Set(static_cast<double>(bytes));
      r.GetGauge("symdex_fleet_kernels", "Kernels indexed in --fleet-cache").Set(static_cast<double>(kernels));
      r.GetGauge("symdex_fleet_waiting", "Requests waiting for a kernel's index run")
          .Set(static_cast<double>(self->waiting()));
      auto g = [&](const char* kind, const char* result) -> metrics::Gauge& {
        return r.GetGauge("symdex_fleet_answer_cache", "Answer-cache lookups over the open fleet kernels",
                          {{"kind", kind}, {"result", result}});
      };
      g("address", "hit").Set(static_cast<double>(sum.addr_hits));
      g("address", "miss").Set(static_cast<double>(sum.addr_misses));
      g("name", "hit").Set(static_cast<double>(sum.name_hits));
      g("name", "miss").Set(static_cast<double>(sum.name_misses));
    });
  }
  return c;
}

KernelCache::KernelCache(KernelCacheOptions opts, metrics::Registry* registry)
    : opts_(std::move(opts)), registry_(registry) {}

KernelCache::~KernelCache() = default;

std::string KernelCache::DbPath(const std::string& hex) const { return (fs::path(opts_.dir) / (hex + ".db")).string(); }

int64_t KernelCache::waiting() const { return waiting_.load(); }

std::shared_ptr<KernelCache::Entry> KernelCache::EntryFor(const std::string& hex) {
  std::lock_guard<std::mutex> l(mu_);
  auto& e = entries_[hex];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

absl::Status KernelCache::OpenExisting(const std::string& hex, Entry& e) {
  ASSIGN_OR_RETURN(auto q, query::LocalQuery::Open(DbPath(hex), opts_.query));
  ASSIGN_OR_RETURN(query::IndexState st, q->Index({.details = true}));
  e.modules.clear();
  for (const query::TargetState& t : st.targets) {
    for (const query::DebugFileState& d : t.debuginfo) {
      if (!d.module.empty()) e.modules[d.module] = d.build_id;
    }
  }
  e.q = std::shared_ptr<query::LocalQuery>(std::move(q));
  return absl::OkStatus();
}

bool KernelCache::Ready(const std::string& build_id, const std::vector<ModuleByBuildId>& modules) {
  const std::optional<BuildId> id = BuildId::FromHex(build_id);
  if (!id || id->raw().size() > 64 || build_id.size() > 128) return true;
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(id->ToHex());
    if (it == entries_.end()) return false;
    entry = it->second;
  }
  std::lock_guard<std::mutex> l(entry->mu);
  const Clock::time_point now = FailureNow();
  if (entry->failed_until && now < *entry->failed_until) return true;
  if (entry->busy || !entry->q) return false;
  return MissingModules(*entry, modules, now).empty();
}

std::vector<ModuleByBuildId> KernelCache::MissingModules(const Entry& e, const std::vector<ModuleByBuildId>& modules,
                                                         Clock::time_point now) {
  std::vector<ModuleByBuildId> missing;
  for (const ModuleByBuildId& m : modules) {
    if (e.modules.count(m.name)) continue;  // indexed (a different build-ID is the query's to refuse)
    auto failed = e.module_failed.find(m.name + " " + Lower(m.build_id));
    if (failed != e.module_failed.end() && now < failed->second) continue;
    missing.push_back(m);
  }
  return missing;
}

absl::StatusOr<std::shared_ptr<query::LocalQuery>> KernelCache::Get(const std::string& build_id,
                                                                    const std::vector<ModuleByBuildId>& modules,
                                                                    Clock::time_point deadline, bool counted) {
  const std::optional<BuildId> id = BuildId::FromHex(build_id);
  if (!id || id->raw().size() > 64 || build_id.size() > 128) {
    return absl::InvalidArgumentError(
        StrCat("'", Excerpt(build_id, 80), "' is not a build-ID (hex digits, even count, at most 64 bytes)"));
  }
  const std::string hex = id->ToHex();
  std::shared_ptr<Entry> entry = EntryFor(hex);
  Entry& e = *entry;
  auto count = [&](const char* result) {
    if (registry_ && counted) {
      registry_
          ->GetCounter("symdex_fleet_requests_total", "Fleet requests by what the kernel cache did",
                       {{"result", result}})
          .Inc();
    }
  };
  std::unique_lock<std::mutex> l(e.mu);
  bool waited = false;
  for (;;) {
    const Clock::time_point now = Clock::now(), failure_now = FailureNow();
    if (e.failed_until && failure_now < *e.failed_until) {
      count("negative");
      return absl::Status(e.failure.code(),
                          StrCat(e.failure.message(), " (remembered; retried after ",
                                 Seconds(std::chrono::duration<double>(*e.failed_until - failure_now).count()), ")"));
    }
    if (!e.busy && !e.q && e.on_disk) {
      if (absl::Status s = OpenExisting(hex, e); !s.ok()) {
        // A damaged file from an earlier run: index again rather than refuse the kernel forever.
        e.on_disk = false;
        for (const std::string& f : FilesOf(DbPath(hex))) {
          std::error_code ec;
          fs::remove_all(f, ec);
        }
      }
    }
    const std::vector<ModuleByBuildId> missing = MissingModules(e, modules, failure_now);
    if (e.q && missing.empty()) {
      e.last_used = now;
      count(waited ? "waited" : "hit");
      return e.q;
    }
    if (e.busy) {
      waited = true;
      ++waiting_;
      const bool woke = e.cv.wait_until(l, deadline, [&] { return !e.busy; });
      --waiting_;
      if (!woke) {
        count("deadline");
        return absl::DeadlineExceededError(
            StrCat("kernel ", hex, " is still being indexed (for ",
                   Seconds(std::chrono::duration<double>(Clock::now() - e.busy_since).count()),
                   "); ask again: the run goes on"));
      }
      continue;
    }
    // This request runs the index; the others wait for it.
    e.busy = true;
    e.busy_since = now;
    std::vector<ModuleByBuildId> all;
    for (const auto& [name, bid] : e.modules) all.push_back({name, bid});
    for (const auto& m : missing) all.push_back(m);
    const char* why = e.q ? "modules" : "miss";
    l.unlock();
    count(why);
    absl::Status s = RunIndex(hex, e, all);
    l.lock();
    e.busy = false;
    const auto until = FailureNow() + std::chrono::milliseconds(static_cast<int64_t>(opts_.negative_seconds * 1000));
    if (!s.ok() && !e.q) {
      e.failure = s;
      e.failed_until = until;
    } else {
      // Done, or a run that only added modules failed (the index it would have replaced still
      // serves): the modules it did not add are remembered, the kernel is not.
      e.failed_until.reset();
      for (const auto& m : missing) {
        if (!e.modules.count(m.name)) e.module_failed[m.name + " " + Lower(m.build_id)] = until;
      }
    }
    e.cv.notify_all();
    if (!s.ok() && !e.q) return s;
    l.unlock();
    EvictOverLimit(hex);
    l.lock();
  }
}

absl::Status KernelCache::RunIndex(const std::string& hex, Entry& e, const std::vector<ModuleByBuildId>& modules) {
  {
    std::unique_lock<std::mutex> l(slots_mu_);
    slots_cv_.wait(l, [&] { return running_ < std::max(1, opts_.max_concurrent_index); });
    ++running_;
  }
  struct Release {
    KernelCache* c;
    ~Release() {
      std::lock_guard<std::mutex> l(c->slots_mu_);
      --c->running_;
      c->slots_cv_.notify_one();
    }
  } release{this};

  const std::string db_path = DbPath(hex);
  const bool fresh = !e.q;
  std::set<std::string> known_ids;  // debug files this index had before: not fetched now
  if (e.q) {
    if (auto st = e.q->Index({.details = true}); st.ok()) {
      for (const auto& t : st->targets) {
        for (const auto& d : t.debuginfo) known_ids.insert(d.build_id);
      }
    }
  }
  const auto start = Clock::now();
  absl::StatusOr<indexer::IndexSummary> sum = [&]() -> absl::StatusOr<indexer::IndexSummary> {
    ASSIGN_OR_RETURN(store::Db db, store::OpenIndex(db_path, store::IndexUse::kWrite));
    indexer::IndexRequest req;
    req.build_id = BuildIdTargetOptions{.build_id = hex, .name = hex, .modules = modules};
    req.finder = opts_.finder;
    req.jobs = opts_.jobs;
    return indexer::IndexTarget(db, req);
  }();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (registry_) {
    registry_
        ->GetCounter("symdex_fleet_index_runs_total", "Index runs of fleet kernels by outcome",
                     {{"result", sum.ok() ? "ok" : "error"}})
        .Inc();
    registry_
        ->GetHistogram("symdex_fleet_index_seconds", "Index run time per kernel (fetch + index)", {},
                       {0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600})
        .Observe(seconds);
  }
  if (opts_.log) {
    opts_.log(sum.ok() ? StrCat("fleet: indexed kernel ", hex, " (", sum->release, ") with ", modules.size(),
                                " module(s) requested in ", fmt::format("{:.1f}", seconds), " s: ", sum->symbols,
                                " symbols, debug files ", sum->debug_indexed, " indexed + ", sum->debug_cached,
                                " cached, ", sum->debug_missing, " missing")
                       : StrCat("fleet: kernel ", hex, " failed after ", fmt::format("{:.1f}", seconds),
                                " s (remembered for ", Seconds(opts_.negative_seconds), "): ", sum.status().message()));
  }
  if (!sum.ok()) {
    if (fresh) {
      for (const std::string& f : FilesOf(db_path)) {
        std::error_code ec;
        fs::remove_all(f, ec);
      }
    }
    return absl::Status(sum.status().code(), StrCat("kernel ", hex, ": ", sum.status().message()));
  }
  if (registry_) {
    registry_
        ->GetHistogram("symdex_fleet_load_seconds",
                       "Fetching and reading a fleet kernel's symbol table (its debug vmlinux)", {},
                       {0.1, 0.5, 1, 2, 5, 10, 30, 60, 120})
        .Observe(sum->load_seconds);
    auto files = [&](const char* result) -> metrics::Counter& {
      return registry_->GetCounter(
          "symdex_fleet_debug_files_total",
          "Debug files of fleet index runs: cached (already indexed), indexed, missing, failed", {{"result", result}});
    };
    files("cached").Inc(static_cast<double>(sum->debug_cached));
    files("indexed").Inc(static_cast<double>(sum->debug_indexed));
    files("missing").Inc(static_cast<double>(sum->debug_missing));
    files("failed").Inc(static_cast<double>(sum->debug_failed));
  }
  std::lock_guard<std::mutex> l(e.mu);
  e.index_seconds = seconds;
  e.on_disk = true;
  if (!e.q) {
    ASSIGN_OR_RETURN(auto q, query::LocalQuery::Open(db_path, opts_.query));
    e.q = std::shared_ptr<query::LocalQuery>(std::move(q));
  }
  ASSIGN_OR_RETURN(query::IndexState st, e.q->Index({.details = true}));
  e.modules.clear();
  uint64_t fetched = 0;
  for (const query::TargetState& t : st.targets) {
    for (const query::DebugFileState& d : t.debuginfo) {
      if (!d.module.empty()) e.modules[d.module] = d.build_id;
      if (d.origin == "debuginfod" && d.usable && !known_ids.count(d.build_id)) fetched += PathBytes(d.path);
    }
  }
  if (registry_) {
    registry_->GetCounter("symdex_fleet_fetch_bytes_total", "Bytes of debug files fetched from debuginfod")
        .Inc(static_cast<double>(fetched));
  }
  return absl::OkStatus();
}

void KernelCache::EvictOverLimit(const std::string& keep) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t total = 0;
  std::vector<std::pair<Clock::time_point, std::string>> order;
  std::map<std::string, uint64_t> size;
  for (auto& [hex, e] : entries_) {
    uint64_t b = 0;
    for (const std::string& f : FilesOf(DbPath(hex))) b += PathBytes(f);
    size[hex] = b;
    total += b;
    std::lock_guard<std::mutex> el(e->mu);
    if (!e->busy && hex != keep && (e->q || e->on_disk)) order.emplace_back(e->last_used, hex);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [used, hex] : order) {
    if (total <= opts_.max_bytes) break;
    auto& e = entries_[hex];
    {
      std::lock_guard<std::mutex> el(e->mu);
      if (e->busy) continue;
      // Calls holding the query keep it (and the unlinked files) until they finish.
      e->q.reset();
      e->on_disk = false;
      e->modules.clear();
    }
    for (const std::string& f : FilesOf(DbPath(hex))) {
      std::error_code ec;
      fs::remove_all(f, ec);
    }
    total -= size[hex];
    if (opts_.log) opts_.log(StrCat("fleet: evicted kernel ", hex, " (", size[hex], " bytes; least recently used)"));
    if (registry_) {
      registry_->GetCounter("symdex_fleet_evictions_total", "Kernel indexes evicted from --fleet-cache (LRU)").Inc();
    }
  }
}

std::vector<KernelEntryState> KernelCache::State() {
  std::vector<std::pair<std::string, std::shared_ptr<Entry>>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    all.assign(entries_.begin(), entries_.end());
  }
  std::vector<KernelEntryState> out;
  const auto now = FailureNow();
  for (auto& [hex, e] : all) {
    KernelEntryState s;
    s.build_id = hex;
    for (const std::string& f : FilesOf(DbPath(hex))) s.bytes += PathBytes(f);
    std::lock_guard<std::mutex> l(e->mu);
    s.state = e->busy ? "indexing" : e->q ? "indexed" : e->on_disk ? "on-disk" : "";
    if (e->failed_until && now < *e->failed_until) {
      s.state = "failed";
      s.error = StrCat(e->failure.message(), " (remembered for ",
                       Seconds(std::chrono::duration<double>(*e->failed_until - now).count()), " more)");
    }
    if (s.state.empty()) continue;  // evicted, or a failure no longer remembered
    s.modules = e->modules.size();
    for (const auto& [k, until] : e->module_failed) s.modules_failed += now < until;
    s.index_seconds = e->index_seconds;
    s.idle_seconds = std::chrono::duration<double>(now - e->last_used).count();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace symdex::fleet
