#include "server/query/local_query.h"

#include <elf.h>
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <map>
#include <numeric>

#include "server/common/file_util.h"
#include "server/common/kernel_arch.h"
#include "server/common/strings.h"
#include "server/query/caller_view.h"
#include "server/query/local_query_impl.h"
#include "server/query/probe_forms.h"
#include "server/store/debuginfo_store.h"
#include "server/store/migrations.h"
#include "server/store/text_symbol_file.h"

namespace symdex::query {

namespace {
// From this many addresses on (in one call, or over the calls on one generation), Symbolize
// reads the target's whole text-symbol table (~20 ms for a distro kernel) rather than look
// each address up (~10 us each).
constexpr size_t kBatchForSymbolTable = 1024;
}  // namespace

absl::Status CheckFieldSize(std::string_view field, std::string_view value, size_t limit) {
  if (value.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(field, " is ", value.size(), " bytes; the limit is ", limit));
}

absl::Status CheckTargetAndName(std::string_view target, std::string_view field, std::string_view value, size_t limit) {
  RETURN_IF_ERROR(CheckFieldSize("target", target, kMaxTargetNameLength));
  RETURN_IF_ERROR(CheckFieldSize(field, value, limit));
  if (value.empty()) return absl::InvalidArgumentError(StrCat(field, " is empty"));
  return absl::OkStatus();
}

absl::Status CheckKprobeOptions(const KprobeOptions& o) {
  RETURN_IF_ERROR(CheckFieldSize("group", o.group, kMaxEventNameLength));
  RETURN_IF_ERROR(CheckFieldSize("event", o.event, kMaxEventNameLength));
  if (o.fetchargs.size() > kMaxFetchargs) {
    return absl::InvalidArgumentError(StrCat(o.fetchargs.size(), " fetchargs; the limit is ", kMaxFetchargs));
  }
  if (o.line && o.rel_line) return absl::InvalidArgumentError("give a line or a relative line, not both");
  for (const auto& l : {o.line, o.rel_line}) {
    if (l && (*l < 0 || *l > kMaxSourceLine)) {
      return absl::InvalidArgumentError(StrCat("line ", *l, " is out of range (0..", kMaxSourceLine, ")"));
    }
  }
  if ((o.line || o.rel_line) && o.ret) {
    return absl::InvalidArgumentError(
        "a return probe fires at the function's return, not at a line: drop -r or the line");
  }
  size_t bytes = 0;
  for (const auto& a : o.fetchargs) bytes += a.size() + 1;
  return CheckFieldSize("fetchargs", std::string(bytes, ' '), kMaxFetchargsBytes);
}

absl::StatusOr<std::vector<BuildIdHit>> KernelBuildIdHits(store::Db& db, const std::string& hex) {
  ASSIGN_OR_RETURN(auto owners, store::KernelObjectsWithBuildId(db, hex));
  std::vector<BuildIdHit> out;
  out.reserve(owners.size());
  for (auto& o : owners) out.push_back(BuildIdHit{std::move(o.kind), std::move(o.name), std::move(o.target)});
  return out;
}

LocalQuery::LocalQuery(std::string path, Options opts) : path_(std::move(path)), opts_(opts) {
  symbolizer_.SetAddrMapDir(AddrMapDirFor(path_));
}
LocalQuery::~LocalQuery() = default;

absl::StatusOr<std::unique_ptr<LocalQuery>> LocalQuery::Open(const std::string& db_path, Options opts,
                                                             std::optional<store::Db> first) {
  std::unique_ptr<LocalQuery> q(new LocalQuery(db_path, opts));
  if (first) {
    q->pool_.push_back(std::make_unique<Conn>(Conn{std::move(*first)}));
    return q;
  }
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
  ASSIGN_OR_RETURN(auto db, store::OpenIndex(path_, store::IndexUse::kRead));
  return ConnLease(this, std::make_unique<Conn>(Conn{std::move(db)}));
}

std::shared_ptr<LocalQuery::Cache> LocalQuery::CacheFor(const TargetInfo& t) {
  if (!opts_.cache) return nullptr;
  std::lock_guard<std::mutex> l(cache_mu_);
  auto& slot = caches_[t.id];
  if (slot && slot->generation > t.generation) return nullptr;  // a call from stale target info
  if (!slot || slot->generation != t.generation) {
    slot = std::make_shared<Cache>();
    slot->generation = t.generation;
  }
  return slot;
}

absl::StatusOr<TargetInfo> LocalQuery::PickTarget(Session& s, const std::string& requested) {
  const auto now = std::chrono::steady_clock::now();
  if (opts_.target_cache_seconds > 0) {
    std::lock_guard<std::mutex> l(targets_mu_);
    if (targets_at_ && now - *targets_at_ < std::chrono::duration<double>(opts_.target_cache_seconds)) {
      auto t = SelectTargetFrom(targets_, requested);
      if (t.ok()) s.Expect(*t);
      return t;
    }
  }
  ASSIGN_OR_RETURN(store::Db * db, s.Db());
  ASSIGN_OR_RETURN(auto all, store::ListTargets(*db));
  {
    std::lock_guard<std::mutex> l(targets_mu_);
    targets_ = all;
    targets_at_ = now;
  }
  return SelectTargetFrom(all, requested);
}

void LocalQuery::ForgetTargets() {
  std::lock_guard<std::mutex> l(targets_mu_);
  targets_at_.reset();
}

LocalQuery::CacheStats LocalQuery::cache_stats() const {
  return {name_hits_.load(), name_misses_.load(), addr_hits_.load(), addr_misses_.load()};
}

bool LocalQuery::TrimIfIdle(double idle_seconds) {
  std::lock_guard<std::mutex> l(sym_mu_);
  int64_t idle_ns = std::chrono::steady_clock::now().time_since_epoch().count() - last_dwarf_use_.load();
  if (symbolizer_.open_files() == 0 || idle_ns < static_cast<int64_t>(idle_seconds * 1e9)) return false;
  symbolizer_.Clear();
  ::malloc_trim(0);  // give the freed arenas back to the system
  return true;
}

absl::StatusOr<TargetInfo> LocalQuery::Target(const std::string& requested) {
  RETURN_IF_ERROR(CheckFieldSize("target", requested, kMaxTargetNameLength));
  return WithSession([&](Session& s) { return PickTarget(s, requested); });
}

absl::StatusOr<std::shared_ptr<const std::vector<std::pair<std::string, uint64_t>>>> LocalQuery::ModuleSections(
    const TargetInfo& t, const std::string& module) {
  auto cache = CacheFor(t);
  if (cache) {
    std::lock_guard<std::mutex> l(cache->mu);
    if (auto it = cache->sections.find(module); it != cache->sections.end()) return it->second;
  }
  Session s(*this);
  ASSIGN_OR_RETURN(store::Db * db, s.Db());
  ASSIGN_OR_RETURN(auto v, store::ModuleSections(*db, t.id, module));
  auto shared = std::make_shared<const std::vector<std::pair<std::string, uint64_t>>>(std::move(v));
  if (cache) {
    std::lock_guard<std::mutex> l(cache->mu);
    cache->sections.emplace(module, shared);
  }
  return shared;
}

int64_t LocalQuery::DebugFileCount() {
  auto c = Acquire();
  if (!c.ok()) return 0;
  auto n = store::CountDebugFiles((*c)->db);
  return n.ok() ? *n : 0;
}

absl::StatusOr<std::vector<TargetSummary>> LocalQuery::Targets() {
  Session s(*this);
  ASSIGN_OR_RETURN(store::Db * db, s.Db());
  ASSIGN_OR_RETURN(auto list, store::ListTargets(*db));
  std::vector<TargetSummary> out;
  for (auto& t : list) {
    // Counting a kernel's symbols takes a while (~0.1 s); the counts of a generation never change.
    std::optional<TargetCounts> counts;
    {
      std::lock_guard<std::mutex> l(targets_mu_);
      auto it = counts_.find(t.id);
      if (it != counts_.end() && it->second.first == t.generation) counts = it->second.second;
    }
    if (!counts) {
      ASSIGN_OR_RETURN(counts, store::CountTarget(*db, t.id));
      std::lock_guard<std::mutex> l(targets_mu_);
      counts_[t.id] = {t.generation, *counts};
    }
    out.push_back({std::move(t), *counts});
  }
  return out;
}

absl::StatusOr<TargetsAnswer> Targets::Local(LocalQuery& q, const TargetsRequest&) {
  ASSIGN_OR_RETURN(std::vector<TargetSummary> v, q.Targets());
  return TargetsAnswer{std::move(v)};
}

absl::Status Which::Check(const WhichRequest& r) {
  return CheckTargetAndName(r.target, "name", r.name, kMaxSymbolNameLength);
}

absl::StatusOr<WhichResult> Which::Local(LocalQuery& q, const WhichRequest& r) {
  return q.Which(r.target, r.name, r.exact);
}

absl::StatusOr<WhichResult> LocalQuery::Which(const std::string& target, const std::string& name, bool exact) {
  RETURN_IF_ERROR(query::Which::Check({target, name, exact}));
  return WithSession([&](Session& s) -> absl::StatusOr<WhichResult> {
    ASSIGN_OR_RETURN(auto t, PickTarget(s, target));
    auto cache = CacheFor(t);
    CachedSource src(*this, s, t, cache.get());
    ASSIGN_OR_RETURN(auto v, src.Which(name, !exact));
    return WhichResult{std::move(t), *v};
  });
}

absl::StatusOr<ResolveResult> LocalQuery::ResolveIn(Session& session, const TargetInfo& t, const std::string& text) {
  if (text.size() > kMaxSpecLength) {
    return absl::InvalidArgumentError(StrCat("spec is ", text.size(), " bytes; the limit is ", kMaxSpecLength));
  }
  ASSIGN_OR_RETURN(auto spec, ParseSpec(text));
  auto cache = CacheFor(t);
  CachedSource src(*this, session, t, cache.get());
  std::string group_name;
  ASSIGN_OR_RETURN(auto matches, MatchSpec(src, t, spec, nullptr, &group_name));
  ResolveResult out{t, {}};
  out.matches.reserve(matches.size());
  // Canonical specs depend only on the group's instances: computed once per group and
  // generation, then cached.
  auto key_of = [&](const Instance& in) { return CanonicalKeyView::Of(group_name, in); };
  std::vector<std::string> canon(matches.size());
  bool missing = cache == nullptr;
  if (cache) {
    std::lock_guard<std::mutex> l(cache->mu);
    for (size_t i = 0; i < matches.size() && !missing; ++i) {
      auto it = cache->canonical.find(key_of(matches[i].instance));
      if (it == cache->canonical.end())
        missing = true;
      else
        canon[i] = it->second;
    }
  }
  if (missing) {
    std::vector<Instance> group;
    ASSIGN_OR_RETURN(auto again, MatchSpec(src, t, spec, &group));
    (void)again;
    for (size_t i = 0; i < matches.size(); ++i) canon[i] = CanonicalSpec(matches[i].instance, group);
    if (cache) {
      std::lock_guard<std::mutex> l(cache->mu);
      if (cache->canonical.size() >= opts_.max_cached_names) cache->canonical.clear();
      for (size_t i = 0; i < matches.size(); ++i)
        cache->canonical.emplace(CanonicalKey(key_of(matches[i].instance)), canon[i]);
    }
  }
  for (size_t i = 0; i < matches.size(); ++i) out.matches.push_back({std::move(matches[i]), std::move(canon[i])});
  return out;
}

absl::StatusOr<ResolveResult> LocalQuery::Resolve(const std::string& target, const std::string& spec) {
  RETURN_IF_ERROR(CheckFieldSize("target", target, kMaxTargetNameLength));
  return WithSession([&](Session& s) -> absl::StatusOr<ResolveResult> {
    ASSIGN_OR_RETURN(auto t, PickTarget(s, target));
    return ResolveIn(s, t, spec);
  });
}

absl::StatusOr<SymbolizeResult> LocalQuery::Symbolize(const std::string& target, const std::vector<uint64_t>& addrs) {
  if (addrs.size() > kMaxAddressesPerRequest) {
    return absl::InvalidArgumentError(
        StrCat(addrs.size(), " addresses in one request; the limit is ", kMaxAddressesPerRequest));
  }
  RETURN_IF_ERROR(CheckFieldSize("target", target, kMaxTargetNameLength));
  return WithSession([&](Session& s) { return SymbolizeWith(s, target, addrs); });
}

absl::StatusOr<SymbolizeResult> LocalQuery::SymbolizeWith(Session& s, const std::string& target,
                                                          const std::vector<uint64_t>& addrs,
                                                          std::vector<std::string>* canonical) {
  ASSIGN_OR_RETURN(auto t, PickTarget(s, target));
  auto cache = CacheFor(t);
  Cache scratch;  // uncached mode: per-call debug-file lookups only
  Cache& use = cache ? *cache : scratch;
  SymbolizeResult out{t, addrs, {}};
  out.results.resize(addrs.size());
  if (canonical) canonical->assign(addrs.size(), std::string());
  bool want_table;
  {
    std::lock_guard<std::mutex> l(use.mu);
    use.addresses_asked += addrs.size();
    want_table = use.text_symbols == nullptr && use.addresses_asked >= kBatchForSymbolTable;
  }
  if (want_table) {
    ASSIGN_OR_RETURN(store::Db * db, s.Db());
    ASSIGN_OR_RETURN(auto table, store::OpenTextSymbolTable(*db, t));
    std::lock_guard<std::mutex> l(use.mu);
    if (!use.text_symbols) use.text_symbols = std::move(table);
  }
  const bool cache_answers = cache && opts_.max_cached_addresses > 0;
  // The cached answers under one lock; the rest computed outside it and cached under another.
  std::vector<size_t> misses;
  if (cache_answers) {
    std::lock_guard<std::mutex> l(cache->mu);
    for (size_t i = 0; i < addrs.size(); ++i) {
      auto it = cache->addrs.find(addrs[i]);
      if (it == cache->addrs.end()) {
        misses.push_back(i);
        continue;
      }
      out.results[i] = it->second.info;
      if (canonical) (*canonical)[i] = it->second.canonical;
    }
  } else {
    misses.resize(addrs.size());
    std::iota(misses.begin(), misses.end(), size_t{0});
  }
  addr_hits_ += addrs.size() - misses.size();
  if (misses.empty()) return out;
  if (cache_answers) addr_misses_ += misses.size();
  Symbolizing symbolizing(*this, s, t, use);  // after the table is loaded
  for (size_t i : misses) {
    ASSIGN_OR_RETURN(auto info, symbolizing.At(addrs[i]));
    out.results[i] = std::make_shared<const AddressInfo>(std::move(info));
  }
  if (cache_answers) {
    std::lock_guard<std::mutex> l(cache->mu);
    for (size_t i : misses) {
      if (cache->addrs.size() >= opts_.max_cached_addresses) cache->addrs.clear();
      cache->addrs.emplace(addrs[i], Cache::CachedAddress{out.results[i], {}});
    }
  }
  return out;
}

void LocalQuery::CacheCanonical(const TargetInfo& t, const std::vector<uint64_t>& addrs,
                                const std::vector<const AddressInfo*>& infos,
                                const std::vector<std::string>& canonical) {
  auto cache = CacheFor(t);
  if (!cache) return;
  std::lock_guard<std::mutex> l(cache->mu);
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (infos[i] == nullptr) continue;  // not made here
    auto it = cache->addrs.find(addrs[i]);
    if (it != cache->addrs.end() && it->second.info.get() == infos[i] && it->second.canonical.empty()) {
      it->second.canonical = canonical[i];
    }
  }
}

absl::Status Lines::Check(const LinesRequest& r) {
  RETURN_IF_ERROR(CheckFieldSize("target", r.target, kMaxTargetNameLength));
  RETURN_IF_ERROR(CheckFieldSize("file", r.file, kMaxPathLength));
  if (r.file.empty() || r.line <= 0) {
    return absl::InvalidArgumentError(StrCat("expected PATH:LINE, got '", Excerpt(r.file, 200), ":", r.line, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LinesAnswer> Lines::Local(LocalQuery& q, const LinesRequest& r) { return q.LineAddresses(r); }

absl::StatusOr<LinesAnswer> LocalQuery::LineAddresses(const LinesRequest& r) {
  const std::string& target = r.target;
  const std::string& file = r.file;
  const int line = r.line;
  Session s(*this);
  ASSIGN_OR_RETURN(store::Db * db, s.Db());
  ASSIGN_OR_RETURN(auto t, SelectTarget(*db, target));
  ASSIGN_OR_RETURN(auto df, store::DebugFileOf(*db, t.id, ""));
  ASSIGN_OR_RETURN(auto modules, store::ModulesMentioningSource(*db, t.id, file));
  if (!df && modules.empty()) {
    return absl::FailedPreconditionError(StrCat("target '", t.name, "' has no vmlinux debug info"));
  }
  std::vector<uint64_t> addrs;
  std::vector<std::string> unplaced;  // modules with code there but no section bases
  {
    std::lock_guard<std::mutex> l(sym_mu_);
    last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
    if (df) {
      ASSIGN_OR_RETURN(auto vml, symbolizer_.LineAddresses(df->path, file, line));
      const uint64_t slide = (t.text_addr && df->text_addr) ? *t.text_addr - *df->text_addr : 0;
      for (uint64_t a : vml) addrs.push_back(a + slide);
    }
    for (const std::string& m : modules) {
      ASSIGN_OR_RETURN(auto mdf, store::DebugFileOf(*db, t.id, m));
      if (!mdf || !mdf->relocatable) continue;
      ASSIGN_OR_RETURN(auto at, symbolizer_.LineAddressesInSections(mdf->path, file, line));
      if (at.empty()) continue;
      ASSIGN_OR_RETURN(auto bases, store::ModuleSections(*db, t.id, m));
      std::map<std::string, uint64_t> base(bases.begin(), bases.end());
      size_t placed = 0;
      for (const auto& [section, offset] : at) {
        auto it = base.find(section);
        if (it == base.end()) continue;
        addrs.push_back(it->second + offset);
        ++placed;
      }
      if (placed == 0) unplaced.push_back(m);
    }
  }
  if (addrs.empty() && !unplaced.empty()) {
    return absl::NotFoundError(
        StrCat(file, ":", line, " has code in ", StrJoin(unplaced, ", "), ", which has no addresses in target '",
               t.name, "' (an offline target, or a module that is not loaded): index a live host with it loaded"));
  }
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  auto cache = CacheFor(t);
  Cache scratch;
  Symbolizing symbolizing(*this, s, t, cache ? *cache : scratch);
  LinesAnswer out{t, {}};
  for (uint64_t a : addrs) {
    ASSIGN_OR_RETURN(AddressInfo info, symbolizing.At(a));
    out.addresses.push_back({a, std::move(info.symbol), info.offset, std::move(info.frames), std::move(info.note)});
  }
  return out;
}

absl::StatusOr<DupsResult> LocalQuery::Dups(const std::string& target, const DupsOptions& opts) {
  return WithSession([&](Session& s) -> absl::StatusOr<DupsResult> {
    ASSIGN_OR_RETURN(auto t, PickTarget(s, target));
    auto cache = CacheFor(t);
    if (!cache) {
      ASSIGN_OR_RETURN(store::Db * db, s.Db());
      ASSIGN_OR_RETURN(auto groups, query::Dups(*db, t, opts));
      return DupsResult{std::move(t), std::make_shared<const std::vector<DupGroup>>(std::move(groups))};
    }
    std::shared_ptr<Cache::DupsSlot> slot;
    {
      std::lock_guard<std::mutex> l(cache->mu);
      auto& p = cache->dups[StrCat(opts.module, std::string_view("\0", 1), opts.all_types ? "a" : "-",
                                   opts.with_init ? "i" : "-", opts.traceable ? "t" : "-")];
      if (!p) p = std::make_shared<Cache::DupsSlot>();
      slot = p;
    }
    std::lock_guard<std::mutex> computing(slot->mu);
    if (!slot->groups) {
      ASSIGN_OR_RETURN(store::Db * db, s.Db());
      ASSIGN_OR_RETURN(auto groups, query::Dups(*db, t, opts));
      slot->groups = std::make_shared<const std::vector<DupGroup>>(std::move(groups));
    }
    return DupsResult{std::move(t), slot->groups};
  });
}

absl::Status Resolve::Check(const ResolveRequest& r) {
  return CheckFieldSize("target", r.target, kMaxTargetNameLength);
}

absl::StatusOr<ResolveResult> Resolve::Local(LocalQuery& q, const ResolveRequest& r) {
  return q.Resolve(r.target, r.spec);
}

absl::Status Probe::Check(const ProbeRequest& r) {
  RETURN_IF_ERROR(CheckFieldSize("target", r.target, kMaxTargetNameLength));
  return CheckKprobeOptions(r.opts);
}

absl::StatusOr<ProbeResult> Probe::Local(LocalQuery& q, const ProbeRequest& r) {
  if (!r.opts.group.empty()) return q.Probe(r.target, r.spec, r.opts);
  KprobeOptions o = r.opts;
  o.group = KprobeOptions().group;
  return q.Probe(r.target, r.spec, o);
}

absl::Status Probe::HideAddresses(ProbeResult& a) {
  if (!a.kprobe.empty() && a.resolved.matches.size() == 1 && a.resolved.matches[0].match.instance.addr &&
      a.kprobe.find(" 0x") != std::string::npos) {
    return AddressesDenied(a.resolved.target, "this instance's only kprobe form is its absolute address");
  }
  Resolve::HideAddresses(a.resolved);
  return absl::OkStatus();
}

absl::StatusOr<ProbeResult> LocalQuery::Probe(const std::string& target, const std::string& spec,
                                              const KprobeOptions& opts) {
  RETURN_IF_ERROR(CheckFieldSize("target", target, kMaxTargetNameLength));
  RETURN_IF_ERROR(CheckKprobeOptions(opts));
  Session s(*this);
  ASSIGN_OR_RETURN(store::Db * db, s.Db());
  ASSIGN_OR_RETURN(auto t, SelectTarget(*db, target));
  ProbeResult out;
  ASSIGN_OR_RETURN(out.resolved, ResolveIn(s, t, spec));
  if (out.resolved.matches.size() != 1) return out;
  const Match& m = out.resolved.matches[0].match;
  if (const KernelArch* arch = ArchOfMachine(t.machine); arch != nullptr && m.offset % arch->insn_align != 0) {
    return absl::InvalidArgumentError(StrCat("+", m.offset, " is inside an instruction: ", arch->name, "'s are ",
                                             arch->insn_align, " bytes, aligned; probe at +",
                                             m.offset - m.offset % arch->insn_align, " or +",
                                             m.offset - m.offset % arch->insn_align + arch->insn_align));
  }
  // (A line with +OFFSET is refused by LinePlaces: one place or the other.)
  if (m.offset != 0 && t.machine == EM_X86_64 && !opts.line && !opts.rel_line) {
    RETURN_IF_ERROR(CheckInsnBoundary(*db, t, m));
  }
  if (opts.line || opts.rel_line) {
    RETURN_IF_ERROR(LinePlaces(*db, t, m, opts, out));
  } else {
    KprobeOptions compiled = opts;
    ASSIGN_OR_RETURN(compiled.fetchargs, CompileProbeArgs(*db, t, m, opts, out.notes));
    ASSIGN_OR_RETURN(out.kprobe, KprobeLine(m, compiled));
  }
  out.ftrace_filter = m.instance.module.empty() ? m.instance.name : StrCat(m.instance.name, ":mod:", m.instance.module);
  return out;
}

absl::Status SymbolizeAddresses::Check(const SymbolizeRequest& r) {
  if (r.addresses.size() <= kMaxAddressesPerRequest) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(r.addresses.size(), " addresses in one request; the limit is ", kMaxAddressesPerRequest));
}

absl::StatusOr<SymbolizeResult> SymbolizeAddresses::Local(LocalQuery& q, const SymbolizeRequest& r) {
  return q.Symbolize(r.target, r.addresses);
}

absl::StatusOr<AnyAnswer> LocalQuery::Call(const AnyRequest& r) {
  return Verbs::Visit(r.index(), [&]<class V>(std::type_identity<V>) -> absl::StatusOr<AnyAnswer> {
    constexpr size_t kIndex = Verbs::IndexOf<V>();
    const typename V::Request& req = std::get<kIndex>(r);
    RETURN_IF_ERROR(V::Check(req));
    if constexpr (requires { V::Composed(*this, req); }) {
      ASSIGN_OR_RETURN(typename V::Answer a, V::Composed(*this, req));
      return AnyAnswer(std::in_place_index<kIndex>, std::move(a));
    } else {
      ASSIGN_OR_RETURN(typename V::Answer a, V::Local(*this, req));
      return AnyAnswer(std::in_place_index<kIndex>, std::move(a));
    }
  });
}

absl::StatusOr<std::unique_ptr<LocalQuery>> OpenEmbedded(const std::string& path) {
  ASSIGN_OR_RETURN(store::Db db, store::OpenIndex(path, store::IndexUse::kAsk));
  // One process, one question (or one stream of addresses): per-generation tables are worth
  // keeping across its calls, answers are not. The connection that checked the file answers.
  return LocalQuery::Open(path, LocalQuery::Options{.max_cached_addresses = 0}, std::move(db));
}

absl::StatusOr<std::unique_ptr<QueryApi>> OpenEmbeddedApi(const std::string& db_path) {
  ASSIGN_OR_RETURN(auto q, OpenEmbedded(db_path));
  return std::unique_ptr<QueryApi>(std::move(q));
}

}  // namespace symdex::query
