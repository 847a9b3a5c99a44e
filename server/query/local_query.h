// LocalQuery: the query API (api.h) over an index file — what the CLI embedded and the daemon's
// handlers ask. Reads the store and the debug files; front ends that only ask questions include
// api.h instead.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/debuginfo/symbolize/symbolizer.h"
#include "server/query/api.h"
#include "server/query/resolver.h"
#include "server/query/symbol_query.h"
#include "server/store/index_store.h"
#include "server/store/open_index.h"

namespace symdex::query {

absl::StatusOr<std::vector<BuildIdHit>> KernelBuildIdHits(store::Db& db, const std::string& hex);

// The implementation over an index file. Thread-safe: a pool of read-only SQLite connections,
// each call inside one read snapshot (a concurrent re-index is seen entirely or not at all);
// per-(target, generation) caches of name -> instances and address -> answer, dropped when the
// target's generation changes; one libdw symbolizer behind a mutex (libdw handles are not
// thread-safe).
class LocalQuery : public QueryApi {
 public:
  struct Options {
    bool cache = true;                     // false: every answer from the database (the CLI)
    size_t max_cached_names = 200000;      // entries; the cache is cleared when full
    size_t max_cached_addresses = 262144;  // 0: answers are not kept
    // How long the list of targets (and so each target's generation) may be reused without
    // asking the database. Calls answered entirely from the caches then touch no SQLite at all;
    // a re-index is seen at most this late, and never half-way. 0: every call asks.
    double target_cache_seconds = 0;
  };
  // Opens one connection now, so a missing or corrupt index fails here with its path.
  // `first`, when given, is the first connection of the pool (the one that opened the file).
  static absl::StatusOr<std::unique_ptr<LocalQuery>> Open(const std::string& db_path, Options opts,
                                                          std::optional<store::Db> first = std::nullopt);
  ~LocalQuery() override;

  // The answers of the Targets and Which verbs (verbs.h).
  absl::StatusOr<std::vector<TargetSummary>> Targets();
  absl::StatusOr<WhichResult> Which(const std::string& target, const std::string& name, bool exact);
  // The answers of the Resolve and Probe verbs (verbs.h).
  absl::StatusOr<ResolveResult> Resolve(const std::string& target, const std::string& spec);
  // Resolve, for a verb about exactly one copy: NotFound for none, InvalidArgument listing the
  // candidates' canonical specs for several.
  absl::StatusOr<ResolveResult> ResolveOne(const std::string& target, const std::string& spec);
  // The answer of the SymbolizeAddresses verb (verbs.h).
  absl::StatusOr<SymbolizeResult> Symbolize(const std::string& target, const std::vector<uint64_t>& addrs);
  // The answer of the Lines verb (verbs.h), its request checked.
  absl::StatusOr<LinesAnswer> LineAddresses(const LinesRequest& r);
  // The answer of the Vars verb (verbs.h; probe_args.cc).
  absl::StatusOr<VarsAnswer> Variables(const VarsRequest& r);
  // The answer of the InlinedProbes verb (verbs.h; probe_args.cc).
  absl::StatusOr<InlinedProbesAnswer> ProbesInlined(const InlinedProbesRequest& r);
  // The answers of the ListDuplicates and ListSymbols verbs (verbs.h), after their Check.
  absl::StatusOr<DupsResult> Dups(const std::string& target, const DupsOptions& opts);
  absl::StatusOr<ProbeResult> Probe(const std::string& target, const std::string& spec, const KprobeOptions& opts);
  absl::StatusOr<SymbolsResult> Symbols(const std::string& target, const SymbolsOptions& opts);
  // The answer of the SymbolizeFrames verb (verbs.h).
  absl::StatusOr<FramesResult> Frames(const std::string& target, const FramesContext& ctx,
                                      const std::vector<FrameIn>& frames);
  // The index and every target's state (the IndexStatus verb's, the fleet cache's).
  absl::StatusOr<IndexState> Index(const IndexOptions& opts);
  // A verb of verbs.h: its Check, then its Local.
  absl::StatusOr<AnyAnswer> Call(const AnyRequest& r) override;
  // f(db, target) on one read snapshot of the target `requested` names (the default rule for
  // ""): what a verb's Local reads the index through. Run again, whole, when the index changes
  // under it. (Defined in local_query_impl.h, which a verb's implementation includes.)
  template <class F>
  auto InTarget(const std::string& requested, F&& f)
      -> decltype(f(std::declval<store::Db&>(), std::declval<const TargetInfo&>()));
  // f(db) on one read connection of the pool, each statement in its own snapshot: what a verb
  // about no target (the JIT verbs) reads the index through. (Defined in local_query_impl.h.)
  template <class F>
  auto OnConnection(F&& f) -> decltype(f(std::declval<store::Db&>()));
  // BuildId, with jitted loads only when `include_jitted`, quoting a bad argument in at most
  // `quote_max` characters (a daemon does not echo a hostile request back in full).
  absl::StatusOr<BuildIdAnswer> BuildIdHits(const std::string& hex, bool include_jitted, size_t quote_max);

  // The target a call naming `requested` would use (the default rule for "").
  absl::StatusOr<TargetInfo> Target(const std::string& requested);
  // A loaded module's section bases in `t` (cached per generation): what turns a module address
  // into SECTION+offset.
  absl::StatusOr<std::shared_ptr<const std::vector<std::pair<std::string, uint64_t>>>> ModuleSections(
      const TargetInfo& t, const std::string& module);

  int64_t DebugFileCount();
  // Releases the debug files' parsed state (libdw line tables, CU data: hundreds of MB after a
  // kernel-wide symbolization) when no address has needed DWARF for `idle_seconds`. Cached
  // answers stay. Returns whether anything was released.
  bool TrimIfIdle(double idle_seconds);
  const std::string& path() const { return path_; }
  struct CacheStats {
    int64_t name_hits = 0, name_misses = 0, addr_hits = 0, addr_misses = 0;
  };
  CacheStats cache_stats() const;

 private:
  struct Conn;
  class ConnLease;
  struct Cache;
  class Session;
  class CachedSource;
  LocalQuery(std::string path, Options opts);
  absl::StatusOr<ConnLease> Acquire();
  std::shared_ptr<Cache> CacheFor(const TargetInfo& t);
  absl::StatusOr<TargetInfo> PickTarget(Session& s, const std::string& requested);
  void ForgetTargets();
  template <typename F>
  auto WithSession(F&& f) -> decltype(f(std::declval<Session&>()));
  absl::StatusOr<ResolveResult> ResolveIn(Session& s, const TargetInfo& t, const std::string& spec);
  // `canonical`, when given, gets each address's cached canonical spec of its symbol ("" when
  // none is cached yet): what Frames answers besides the symbol.
  absl::StatusOr<SymbolizeResult> SymbolizeWith(Session& s, const std::string& target,
                                                const std::vector<uint64_t>& addrs,
                                                std::vector<std::string>* canonical = nullptr);
  // Keeps canonical[i] with the cached answer of addrs[i] when infos[i] is that answer (null: no
  // spec made for it), for the next SymbolizeWith; entries already holding one, evicted or
  // replaced are left alone.
  void CacheCanonical(const TargetInfo& t, const std::vector<uint64_t>& addrs,
                      const std::vector<const AddressInfo*>& infos, const std::vector<std::string>& canonical);
  struct Symbolizing;
  struct FramesCall;
  // Probe arguments by name (probe_args.cc): where the copy `m` is in its debug file, and the
  // kprobe_events fetch args `opts.fetchargs` compile to there (raw ones kept as written).
  struct ProbeArgsAt {
    const KernelArch* arch = nullptr;
    std::string path;
    debuginfo::Symbolizer::CopyAt at;
    std::function<std::string(uint64_t)> static_form;
  };
  absl::StatusOr<ProbeArgsAt> ProbeArgsSite(store::Db& db, const TargetInfo& t, const Match& m, bool ret);
  // x86-64: InvalidArgument when `m`'s offset falls inside an instruction of the copy, decoded
  // from its start in the debug file's code (as the kernel decodes it when the probe is written);
  // OK when it is an instruction's start, or when the code cannot be read or decoded.
  absl::Status CheckInsnBoundary(store::Db& db, const TargetInfo& t, const Match& m);
  absl::StatusOr<std::vector<std::string>> CompileProbeArgs(store::Db& db, const TargetInfo& t, const Match& m,
                                                            const KprobeOptions& opts, std::vector<std::string>& notes);
  // Those arguments compiled where `at` says.
  absl::StatusOr<std::vector<std::string>> CompileAt(const ProbeArgsAt& at, const std::vector<ingest::ProbeArg>& args,
                                                     std::vector<std::string>& notes);
  // The places of opts.line / opts.rel_line in the copy `m`, each with its definition.
  absl::Status LinePlaces(store::Db& db, const TargetInfo& t, const Match& m, const KprobeOptions& opts,
                          ProbeResult& out);

  std::string path_;
  Options opts_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Conn>> pool_;
  std::mutex targets_mu_;
  std::vector<TargetInfo> targets_;
  std::optional<std::chrono::steady_clock::time_point> targets_at_;
  std::unordered_map<int64_t, std::pair<int64_t, TargetCounts>> counts_;  // id -> (generation, counts)
  std::mutex cache_mu_;
  std::unordered_map<int64_t, std::shared_ptr<Cache>> caches_;  // target id -> cache (one generation)
  std::mutex sym_mu_;
  debuginfo::Symbolizer symbolizer_;
  std::atomic<int64_t> last_dwarf_use_{0};  // steady_clock ns of the last symbolizer use
  mutable std::atomic<int64_t> name_hits_{0}, name_misses_{0}, addr_hits_{0}, addr_misses_{0};
};

// The index opened for one process's questions (the CLI embedded): checks the file exists and
// this user may read it (PermissionDenied / FailedPrecondition naming the path and the cure),
// migrates an index written by an older symdex when this user may write it, and keeps
// per-generation tables but no answers across the process's calls.
absl::StatusOr<std::unique_ptr<LocalQuery>> OpenEmbedded(const std::string& db_path);

}  // namespace symdex::query
