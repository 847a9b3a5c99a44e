#include "server/query/service.h"

#include "server/common/strings.h"
#include "server/store/debuginfo_store.h"
#include "server/store/migrations.h"

namespace symdex::query {

struct LocalQuery::Conn {
  store::Db db;
};

// A pooled connection, returned to the pool when the call ends.
class LocalQuery::ConnLease {
 public:
  ConnLease(LocalQuery* q, std::unique_ptr<Conn> c) : q_(q), c_(std::move(c)) {}
  ConnLease(ConnLease&&) = default;
  ~ConnLease() {
    if (!c_) return;
    std::lock_guard<std::mutex> l(q_->pool_mu_);
    q_->pool_.push_back(std::move(c_));
  }
  Conn& operator*() { return *c_; }
  Conn* operator->() { return c_.get(); }

 private:
  LocalQuery* q_;
  std::unique_ptr<Conn> c_;
};

// Answers for one generation of one target.
struct LocalQuery::Cache {
  int64_t generation = 0;
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<Instance>>> names;
  // group name + '\0' + instance identity -> canonical spec
  std::unordered_map<std::string, std::string> canonical;
  std::unordered_map<uint64_t, std::shared_ptr<const AddressInfo>> addrs;
  std::unordered_map<std::string, std::optional<store::DebugFileInfo>> debug_files;
};

// Which() through the cache; Containing() straight from the database.
class LocalQuery::CachedSource : public InstanceSource {
 public:
  CachedSource(LocalQuery& q, Conn& c, const store::TargetInfo& t, Cache* cache)
      : q_(q), db_(c.db, t), cache_(cache) {}
  absl::StatusOr<List> Which(const std::string& name, bool with_clones) override {
    if (cache_ == nullptr) return db_.Which(name, with_clones);
    std::string key = name;
    key.push_back(with_clones ? '\1' : '\0');
    {
      std::lock_guard<std::mutex> l(cache_->mu);
      if (auto it = cache_->names.find(key); it != cache_->names.end()) {
        ++q_.name_hits_;
        return it->second;
      }
    }
    ++q_.name_misses_;
    ASSIGN_OR_RETURN(auto v, db_.Which(name, with_clones));
    std::lock_guard<std::mutex> l(cache_->mu);
    if (cache_->names.size() >= q_.opts_.max_cached_names) cache_->names.clear();
    cache_->names.emplace(std::move(key), v);
    return v;
  }
  absl::StatusOr<std::optional<store::SymbolRecord>> Containing(uint64_t addr) override {
    return db_.Containing(addr);
  }

 private:
  LocalQuery& q_;
  DbSource db_;
  Cache* cache_;
};

absl::StatusOr<std::vector<BuildIdHit>> KernelBuildIdHits(store::Db& db, const std::string& hex) {
  std::vector<BuildIdHit> out;
  const std::pair<const char*, const char*> kQueries[] = {
      {"target", "SELECT name, '' FROM targets WHERE build_id=?"},
      {"module", "SELECT m.name, t.name FROM modules m JOIN targets t ON t.id = m.target_id WHERE m.build_id=?"},
      {"debug-file", "SELECT path, '' FROM debug_files WHERE build_id=?"},
  };
  for (const auto& [kind, sql] : kQueries) {
    ASSIGN_OR_RETURN(auto q, db.Prepare(sql));
    q.Bind(1, hex);
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      out.push_back(BuildIdHit{kind, q.Text(0), q.Text(1)});
    }
  }
  return out;
}

LocalQuery::LocalQuery(std::string path, Options opts) : path_(std::move(path)), opts_(opts) {}
LocalQuery::~LocalQuery() = default;

absl::StatusOr<std::unique_ptr<LocalQuery>> LocalQuery::Open(const std::string& db_path, Options opts) {
  std::unique_ptr<LocalQuery> q(new LocalQuery(db_path, opts));
  ASSIGN_OR_RETURN(auto lease, q->Acquire());
  (void)lease;
  return q;
}

absl::StatusOr<LocalQuery::ConnLease> LocalQuery::Acquire() {
  {
    std::lock_guard<std::mutex> l(pool_mu_);
    if (!pool_.empty()) {
      auto c = std::move(pool_.back());
      pool_.pop_back();
      return ConnLease(this, std::move(c));
    }
  }
  ASSIGN_OR_RETURN(auto db, store::OpenIndex(path_, store::Db::Mode::kReadOnly));
  return ConnLease(this, std::make_unique<Conn>(Conn{std::move(db)}));
}

std::shared_ptr<LocalQuery::Cache> LocalQuery::CacheFor(const store::TargetInfo& t) {
  if (!opts_.cache) return nullptr;
  std::lock_guard<std::mutex> l(cache_mu_);
  auto& slot = caches_[t.id];
  if (!slot || slot->generation != t.generation) {
    slot = std::make_shared<Cache>();
    slot->generation = t.generation;
  }
  return slot;
}

LocalQuery::CacheStats LocalQuery::cache_stats() const {
  return {name_hits_.load(), name_misses_.load(), addr_hits_.load(), addr_misses_.load()};
}

int64_t LocalQuery::DebugFileCount() {
  auto c = Acquire();
  if (!c.ok()) return 0;
  auto q = (*c)->db.Prepare("SELECT count(*) FROM debug_files");
  if (!q.ok()) return 0;
  auto row = q->Step();
  return row.ok() && *row ? q->Int(0) : 0;
}

absl::StatusOr<std::vector<TargetSummary>> LocalQuery::Targets() {
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto list, store::ListTargets(c->db));
  std::vector<TargetSummary> out;
  for (auto& t : list) {
    ASSIGN_OR_RETURN(auto counts, store::CountTarget(c->db, t.id));
    out.push_back({std::move(t), counts});
  }
  return out;
}

absl::StatusOr<WhichResult> LocalQuery::Which(const std::string& target, const std::string& name, bool exact) {
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto t, SelectTarget(c->db, target));
  auto cache = CacheFor(t);
  CachedSource src(*this, *c, t, cache.get());
  ASSIGN_OR_RETURN(auto v, src.Which(name, !exact));
  return WhichResult{std::move(t), *v};
}

absl::StatusOr<ResolveResult> LocalQuery::ResolveIn(Conn& c, const store::TargetInfo& t, const std::string& text) {
  if (text.size() > kMaxSpecLength) {
    return absl::InvalidArgumentError(StrCat("spec is ", text.size(), " bytes; the limit is ", kMaxSpecLength));
  }
  ASSIGN_OR_RETURN(auto spec, ParseSpec(text));
  auto cache = CacheFor(t);
  CachedSource src(*this, c, t, cache.get());
  std::string group_name;
  ASSIGN_OR_RETURN(auto matches, query::Resolve(src, t, spec, nullptr, &group_name));
  ResolveResult out{t, {}};
  out.matches.reserve(matches.size());
  // Canonical specs depend only on the group's instances: computed once per group and
  // generation, then cached.
  auto key_of = [&](const Instance& in) {
    return StrCat(group_name, std::string_view("\0", 1), in.module, std::string_view("\0", 1), in.section, "+",
                  in.addr.value_or(in.section_offset), "/", in.name);
  };
  std::vector<std::string> canon(matches.size());
  bool missing = cache == nullptr;
  if (cache) {
    std::lock_guard<std::mutex> l(cache->mu);
    for (size_t i = 0; i < matches.size() && !missing; ++i) {
      auto it = cache->canonical.find(key_of(matches[i].instance));
      if (it == cache->canonical.end()) missing = true;
      else canon[i] = it->second;
    }
  }
  if (missing) {
    std::vector<Instance> group;
    ASSIGN_OR_RETURN(auto again, query::Resolve(src, t, spec, &group));
    (void)again;
    for (size_t i = 0; i < matches.size(); ++i) canon[i] = CanonicalSpec(matches[i].instance, group);
    if (cache) {
      std::lock_guard<std::mutex> l(cache->mu);
      if (cache->canonical.size() >= opts_.max_cached_names) cache->canonical.clear();
      for (size_t i = 0; i < matches.size(); ++i) cache->canonical.emplace(key_of(matches[i].instance), canon[i]);
    }
  }
  for (size_t i = 0; i < matches.size(); ++i) out.matches.push_back({std::move(matches[i]), std::move(canon[i])});
  return out;
}

absl::StatusOr<ResolveResult> LocalQuery::Resolve(const std::string& target, const std::string& spec) {
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto t, SelectTarget(c->db, target));
  return ResolveIn(*c, t, spec);
}

absl::StatusOr<AddressInfo> LocalQuery::SymbolizeIn(Conn& c, const store::TargetInfo& t, Cache& cache,
                                                    uint64_t addr) {
  CachedSource src(*this, c, t, opts_.cache ? &cache : nullptr);
  auto debug_file_of = [&](const std::string& module) -> absl::StatusOr<std::optional<store::DebugFileInfo>> {
    {
      std::lock_guard<std::mutex> l(cache.mu);
      if (auto it = cache.debug_files.find(module); it != cache.debug_files.end()) return it->second;
    }
    ASSIGN_OR_RETURN(auto df, store::DebugFileOf(c.db, t.id, module));
    std::lock_guard<std::mutex> l(cache.mu);
    cache.debug_files.emplace(module, df);
    return df;
  };
  std::lock_guard<std::mutex> l(sym_mu_);
  return SymbolizeAddress(src, debug_file_of, t, symbolizer_, addr);
}

absl::StatusOr<SymbolizeResult> LocalQuery::Symbolize(const std::string& target, const std::vector<uint64_t>& addrs) {
  if (addrs.size() > kMaxAddressesPerRequest) {
    return absl::InvalidArgumentError(
        StrCat(addrs.size(), " addresses in one request; the limit is ", kMaxAddressesPerRequest));
  }
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto t, SelectTarget(c->db, target));
  auto cache = CacheFor(t);
  Cache scratch;  // uncached mode: per-call debug-file lookups only
  Cache& use = cache ? *cache : scratch;
  SymbolizeResult out{t, addrs, {}};
  out.results.reserve(addrs.size());
  for (uint64_t a : addrs) {
    if (cache) {
      std::shared_ptr<const AddressInfo> hit;
      {
        std::lock_guard<std::mutex> l(cache->mu);
        if (auto it = cache->addrs.find(a); it != cache->addrs.end()) hit = it->second;
      }
      if (hit) {
        ++addr_hits_;
        out.results.push_back(std::move(hit));
        continue;
      }
      ++addr_misses_;
    }
    ASSIGN_OR_RETURN(auto info, SymbolizeIn(*c, t, use, a));
    auto shared = std::make_shared<const AddressInfo>(std::move(info));
    if (cache) {
      std::lock_guard<std::mutex> l(cache->mu);
      if (cache->addrs.size() >= opts_.max_cached_addresses) cache->addrs.clear();
      cache->addrs.emplace(a, shared);
    }
    out.results.push_back(std::move(shared));
  }
  return out;
}

absl::StatusOr<SymbolizeResult> LocalQuery::Lines(const std::string& target, const std::string& file, int line) {
  if (file.empty() || line <= 0) {
    return absl::InvalidArgumentError(StrCat("expected PATH:LINE, got '", file, ":", line, "'"));
  }
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto t, SelectTarget(c->db, target));
  ASSIGN_OR_RETURN(auto df, store::DebugFileOf(c->db, t.id, ""));
  if (!df) return absl::FailedPreconditionError(StrCat("target '", t.name, "' has no vmlinux debug info"));
  std::vector<uint64_t> addrs;
  {
    std::lock_guard<std::mutex> l(sym_mu_);
    ASSIGN_OR_RETURN(addrs, symbolizer_.LineAddresses(df->path, file, line));
  }
  uint64_t slide = (t.text_addr && df->text_addr) ? *t.text_addr - *df->text_addr : 0;
  auto cache = CacheFor(t);
  Cache scratch;
  SymbolizeResult out{t, {}, {}};
  for (uint64_t a : addrs) {
    ASSIGN_OR_RETURN(auto info, SymbolizeIn(*c, t, cache ? *cache : scratch, a + slide));
    out.addresses.push_back(a + slide);
    out.results.push_back(std::make_shared<const AddressInfo>(std::move(info)));
  }
  return out;
}

absl::StatusOr<DupsResult> LocalQuery::Dups(const std::string& target, const DupsOptions& opts) {
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto t, SelectTarget(c->db, target));
  ASSIGN_OR_RETURN(auto groups, query::Dups(c->db, t, opts));
  return DupsResult{std::move(t), std::move(groups)};
}

absl::StatusOr<ProbeResult> LocalQuery::Probe(const std::string& target, const std::string& spec,
                                              const KprobeOptions& opts) {
  ASSIGN_OR_RETURN(auto c, Acquire());
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(c->db));
  ASSIGN_OR_RETURN(auto t, SelectTarget(c->db, target));
  ProbeResult out;
  ASSIGN_OR_RETURN(out.resolved, ResolveIn(*c, t, spec));
  if (out.resolved.matches.size() != 1) return out;
  const Match& m = out.resolved.matches[0].match;
  ASSIGN_OR_RETURN(out.kprobe, KprobeDefinition(m, opts));
  out.ftrace_filter = m.instance.module.empty() ? m.instance.name : StrCat(m.instance.name, ":mod:", m.instance.module);
  return out;
}

}  // namespace symdex::query
