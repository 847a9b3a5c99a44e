// LocalQuery's private machinery, shared by the files that implement it (local_query.cc: the
// lookups; listing.cc: whole-target listings and the index's state; inlined.cc: the Inlined verb). Not for other users.
#pragma once

#include <optional>
#include <string_view>
#include <unordered_map>

#include "server/query/local_query.h"
#include "server/store/debuginfo_store.h"
#include "server/store/sqlite_db.h"

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

// What a canonical spec is cached under: the name group it was made against and the instance.
// Looked up without building a key (a 10k-frame answer does 10k lookups: the formatted string
// key it replaced cost a quarter of the daemon's time for that call).
struct CanonicalKeyView {
  std::string_view group, module, section, name;
  uint64_t at = 0;  // the instance's address, or its section offset
  static CanonicalKeyView Of(std::string_view group, const Instance& in) {
    return {group, in.module, in.section, in.name, in.addr.value_or(in.section_offset)};
  }
  bool operator==(const CanonicalKeyView&) const = default;
};
struct CanonicalKey {
  std::string group, module, section, name;
  uint64_t at = 0;
  explicit CanonicalKey(const CanonicalKeyView& v)
      : group(v.group), module(v.module), section(v.section), name(v.name), at(v.at) {}
  CanonicalKeyView view() const { return {group, module, section, name, at}; }
};
struct CanonicalKeyHash {
  using is_transparent = void;
  size_t operator()(const CanonicalKeyView& k) const {
    std::hash<std::string_view> h;
    size_t x =
        h(k.name) ^ (h(k.module) * 31) ^ (h(k.section) * 131) ^ (std::hash<uint64_t>()(k.at) * 0x9e3779b97f4a7c15ull);
    return k.group == k.name ? x : x ^ (h(k.group) * 7);
  }
  size_t operator()(const CanonicalKey& k) const { return (*this)(k.view()); }
};
struct CanonicalKeyEq {
  using is_transparent = void;
  static CanonicalKeyView V(const CanonicalKeyView& k) { return k; }
  static CanonicalKeyView V(const CanonicalKey& k) { return k.view(); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return V(a) == V(b);
  }
};
using CanonicalCache = std::unordered_map<CanonicalKey, std::string, CanonicalKeyHash, CanonicalKeyEq>;

// Answers for one generation of one target.
struct LocalQuery::Cache {
  int64_t generation = 0;
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<Instance>>> names;
  CanonicalCache canonical;
  // An address's answer, and its symbol's canonical spec once a Frames call has made it (kept
  // beside the answer: a warm 10k-frame call then does one lookup per frame, not two).
  struct CachedAddress {
    std::shared_ptr<const AddressInfo> info;
    std::string canonical;  // "" until made
  };
  std::unordered_map<uint64_t, CachedAddress> addrs;
  std::unordered_map<std::string, std::shared_ptr<const store::DebugFileInfo>> debug_files;  // null: none
  // Loaded by the first batch large enough to repay reading every text symbol at once.
  std::shared_ptr<const store::TextSymbolTable> text_symbols;
  size_t addresses_asked = 0;
  // Duplicate lists by options ("module\0all_types with_init"): the most expensive answer
  // (~1.5 s for a distro kernel), computed once per generation by the first caller while later
  // callers wait for it (one computation however many ask at once).
  struct DupsSlot {
    std::mutex mu;  // held while computing
    std::shared_ptr<const std::vector<DupGroup>> groups;
  };
  std::unordered_map<std::string, std::shared_ptr<DupsSlot>> dups;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<std::pair<std::string, uint64_t>>>> sections;
};

// One call's access to the database: a pooled connection inside one read snapshot, taken only
// when something is not cached. When the call started from cached target info (Expect) and the
// target has since been re-indexed, Db() fails and stale() is set: the call is retried from
// fresh target info, so no answer mixes two generations.
class LocalQuery::Session {
 public:
  explicit Session(LocalQuery& q) : q_(q) {}
  absl::StatusOr<store::Db*> Db() {
    if (stale_) return absl::AbortedError("the index changed during the call");
    if (!lease_) {
      ASSIGN_OR_RETURN(auto l, q_.Acquire());
      lease_.emplace(std::move(l));
      ASSIGN_OR_RETURN(auto s, store::ReadSnapshot::Begin((*lease_)->db));
      snap_.emplace(std::move(s));
      if (expect_) {
        ASSIGN_OR_RETURN(auto now, store::FindTarget((*lease_)->db, expect_->name));
        if (!now || now->id != expect_->id || now->generation != expect_->generation) {
          stale_ = true;
          return absl::AbortedError("the index changed during the call");
        }
      }
    }
    return &(*lease_)->db;
  }
  // The call's target came from the target cache, not from this session's snapshot.
  void Expect(const TargetInfo& t) {
    if (!lease_) expect_ = t;
  }
  bool stale() const { return stale_; }

 private:
  LocalQuery& q_;
  std::optional<ConnLease> lease_;
  std::optional<store::ReadSnapshot> snap_;  // destroyed (COMMIT) before the lease returns
  std::optional<TargetInfo> expect_;
  bool stale_ = false;
};

// Which() through the cache; Containing() straight from the database.
class LocalQuery::CachedSource : public InstanceSource {
 public:
  CachedSource(LocalQuery& q, Session& s, const TargetInfo& t, Cache* cache,
               const store::TextSymbolTable* table = nullptr)
      : q_(q), s_(s), t_(t), cache_(cache), table_(table) {}
  absl::StatusOr<List> Which(const std::string& name, bool with_clones) override {
    if (cache_ == nullptr) return FromDb(name, with_clones);
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
    ASSIGN_OR_RETURN(auto v, FromDb(name, with_clones));
    std::lock_guard<std::mutex> l(cache_->mu);
    if (cache_->names.size() >= q_.opts_.max_cached_names) cache_->names.clear();
    cache_->names.emplace(std::move(key), v);
    return v;
  }
  absl::StatusOr<store::Containment> Containing(uint64_t addr) override {
    ASSIGN_OR_RETURN(store::Db * db, s_.Db());
    return DbSource(*db, t_).Containing(addr);
  }
  absl::StatusOr<store::Containment> ContainingBrief(uint64_t addr) override {
    if (table_ != nullptr) return table_->Containing(addr);
    return Containing(addr);
  }

 private:
  absl::StatusOr<List> FromDb(const std::string& name, bool with_clones) {
    ASSIGN_OR_RETURN(store::Db * db, s_.Db());
    return DbSource(*db, t_).Which(name, with_clones);
  }
  LocalQuery& q_;
  Session& s_;
  const TargetInfo& t_;
  Cache* cache_;
  const store::TextSymbolTable* table_;
};

// What symbolizing addresses of one target needs, set up once per call rather than per address.
struct LocalQuery::Symbolizing {
  Symbolizing(LocalQuery& q, Session& session, const TargetInfo& t, Cache& cache)
      : q(q),
        t(t),
        cache(cache),
        table(TableOf(cache)),
        src(q, session, t, q.opts_.cache ? &cache : nullptr, table.get()) {
    debug_file_of =
        [this, &session](const std::string& module) -> absl::StatusOr<std::shared_ptr<const store::DebugFileInfo>> {
      {
        std::lock_guard<std::mutex> l(this->cache.mu);
        if (auto it = this->cache.debug_files.find(module); it != this->cache.debug_files.end()) return it->second;
      }
      ASSIGN_OR_RETURN(store::Db * db, session.Db());
      ASSIGN_OR_RETURN(auto df, store::DebugFileOf(*db, this->t.id, module));
      std::shared_ptr<const store::DebugFileInfo> shared;
      if (df) shared = std::make_shared<const store::DebugFileInfo>(std::move(*df));
      std::lock_guard<std::mutex> l(this->cache.mu);
      return this->cache.debug_files.emplace(module, shared).first->second;
    };
    sections_of =
        [this, &session](const std::string& module) -> absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> {
      ASSIGN_OR_RETURN(store::Db * db, session.Db());
      return store::ModuleSections(*db, this->t.id, module);
    };
  }
  static std::shared_ptr<const store::TextSymbolTable> TableOf(Cache& c) {
    std::lock_guard<std::mutex> l(c.mu);
    return c.text_symbols;
  }
  absl::StatusOr<AddressInfo> At(uint64_t addr) {
    std::lock_guard<std::mutex> l(q.sym_mu_);
    q.last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
    return SymbolizeAddress(src, debug_file_of, sections_of, t, q.symbolizer_, addr);
  }

  LocalQuery& q;
  const TargetInfo& t;
  Cache& cache;
  std::shared_ptr<const store::TextSymbolTable> table;  // null: one SQL lookup per address
  CachedSource src;
  DebugFileLookup debug_file_of;
  SectionLookup sections_of;
};

template <typename F>
auto LocalQuery::WithSession(F&& f) -> decltype(f(std::declval<Session&>())) {
  for (int attempt = 0;; ++attempt) {
    Session s(*this);
    auto r = f(s);
    if (!s.stale() || attempt == 3) return r;
    ForgetTargets();
  }
}

template <class F>
auto LocalQuery::InTarget(const std::string& requested, F&& f)
    -> decltype(f(std::declval<store::Db&>(), std::declval<const TargetInfo&>())) {
  return WithSession([&](Session& s) -> decltype(f(std::declval<store::Db&>(), std::declval<const TargetInfo&>())) {
    ASSIGN_OR_RETURN(store::Db * db, s.Db());
    ASSIGN_OR_RETURN(TargetInfo t, PickTarget(s, requested));
    return f(*db, t);
  });
}

template <class F>
auto LocalQuery::OnConnection(F&& f) -> decltype(f(std::declval<store::Db&>())) {
  ASSIGN_OR_RETURN(auto lease, Acquire());
  return f(lease->db);
}

}  // namespace symdex::query
