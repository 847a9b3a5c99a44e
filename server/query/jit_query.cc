#include "server/query/jit_query.h"

#include <algorithm>
#include <set>

#include "server/common/strings.h"
#include "server/store/jit_store.h"
#include "server/store/open_index.h"

namespace symdex::query {
namespace {

using store::Db;

std::string Quote(std::string_view s, size_t quote_max) {
  return quote_max == kQuoteInFull ? std::string(s) : Excerpt(s, quote_max);
}

// A load as loaded (no placement asked): at its load address since its load time.
JitFunction FunctionOf(const store::JitLoadRow& r) {
  return JitFunction{.load_id = r.load_id,
                     .instance = {.id = r.instance_id},
                     .pid = r.pid,
                     .code_index = r.code_index,
                     .name = r.name,
                     .code_addr = r.code_addr,
                     .code_size = r.code_size,
                     .load_time = r.load_time,
                     .file_offset = r.file_offset,
                     .addr = r.code_addr,
                     .placed_time = r.load_time};
}

// Instances by id, each read once per call.
class InstanceCache {
 public:
  explicit InstanceCache(Db& db) : db_(db) {}
  absl::StatusOr<JitInstanceInfo> Get(int64_t id) {
    auto it = cache_.find(id);
    if (it == cache_.end()) {
      ASSIGN_OR_RETURN(JitInstanceInfo row, store::JitInstanceById(db_, id));
      it = cache_.emplace(id, std::move(row)).first;
    }
    return it->second;
  }

 private:
  Db& db_;
  std::map<int64_t, JitInstanceInfo> cache_;
};

absl::StatusOr<std::vector<JitInstanceInfo>> Instances(Db& db, std::optional<uint32_t> pid) {
  return store::FindJitInstances(db, pid);
}

// The instance of `pid` meant: `dump_ts` (its header timestamp), else the latest dump opened at
// or before `time`, else the only one; nullopt when the pid has none. Several and nothing to
// choose by: InvalidArgument listing them.
absl::StatusOr<std::optional<JitInstanceInfo>> SelectInstance(Db& db, uint32_t pid, std::optional<uint64_t> time,
                                                              std::optional<uint64_t> dump_ts) {
  ASSIGN_OR_RETURN(auto all, Instances(db, pid));
  if (all.empty()) return std::optional<JitInstanceInfo>();
  if (dump_ts) {
    for (const auto& i : all) {
      if (i.dump_timestamp == *dump_ts) return std::optional<JitInstanceInfo>(i);
    }
    return absl::NotFoundError(StrCat("pid ", pid, " has no jitdump with header timestamp ", *dump_ts));
  }
  if (all.size() == 1) return std::optional<JitInstanceInfo>(all.front());
  if (time) {
    std::optional<JitInstanceInfo> best;
    for (const auto& i : all) {
      if (i.dump_timestamp <= *time) best = i;
    }
    if (best) return best;
  }
  std::string list;
  for (const auto& i : all)
    list += StrCat("\n  --instance ", i.dump_timestamp, "  (", i.path, ", ", i.loads, " loads)");
  return absl::InvalidArgumentError(StrCat("pid ", pid, " was used by ", all.size(),
                                           " processes that wrote jitdumps; choose one with --time or:", list));
}

// The load placed over `addr` in `instance` at `time`, with its build-IDs and the nearest line.
absl::StatusOr<std::optional<JitFunction>> FunctionAt(Db& db, const JitInstanceInfo& instance, uint64_t addr,
                                                      std::optional<uint64_t> time) {
  ASSIGN_OR_RETURN(auto placed, store::JitPlacementAt(db, instance.id, addr, time));
  if (!placed) return std::optional<JitFunction>();
  JitFunction f = FunctionOf(placed->load);
  f.instance = instance;
  f.addr = placed->addr;
  f.placed_time = placed->time;
  f.until = placed->until;
  f.placed_by = placed->kind;
  ASSIGN_OR_RETURN(f.build_ids, store::JitBuildIdsOf(db, f.load_id));
  // Lines are stored as the producer wrote them, relative to the load address.
  ASSIGN_OR_RETURN(auto lines, store::JitLinesOf(db, placed->load.load_id));
  f.line_entries = static_cast<int64_t>(lines.size());
  const uint64_t as_loaded = addr - f.addr + f.code_addr;
  for (const auto& l : lines) {
    if (l.addr <= as_loaded) f.line = JitSourceLine{l.file, l.line, l.discrim, l.addr - f.code_addr + f.addr};
  }
  return std::optional<JitFunction>(std::move(f));
}

}  // namespace

std::string JitFunction::DsoName() const { return StrCat("jitted-", pid, "-", code_index, ".so"); }

absl::StatusOr<std::string> JitSchemeArg(std::string_view scheme, size_t quote_max) {
  auto s = ParseJitBuildIdScheme(scheme);
  if (!s) {
    return absl::InvalidArgumentError(StrCat("unknown build-ID scheme '", Quote(scheme, quote_max),
                                             "': use symdex, sha1-symtab, sha1-code or md5-addr"));
  }
  return std::string(JitBuildIdSchemeName(*s));
}

std::string_view JitBuildIdSchemeEra(std::string_view scheme) {
  if (scheme == "md5-addr") return "perf <= 6.16 built with libcrypto (MD5 of load address + code)";
  if (scheme == "sha1-code") return "perf 6.17 (SHA-1 of the code: identical code, identical ID)";
  if (scheme == "sha1-symtab") return "perf with the Nov 2025 fix (SHA-1 of code + symtab + strtab)";
  if (scheme == "symdex") return "symdex jit export (unique per process instance and load)";
  return "unknown scheme";
}

absl::StatusOr<JitAddrAnswer> JitAddresses(Db& db, const JitAddrRequest& req) {
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(db));
  JitAddrAnswer out;
  ASSIGN_OR_RETURN(out.instance, SelectInstance(db, req.pid, req.time, req.instance));
  ASSIGN_OR_RETURN(bool has_map, store::HasPerfMap(db, req.pid));
  if (!out.instance && !has_map) {
    return absl::NotFoundError(StrCat("nothing ingested for pid ", req.pid, ": run 'symdex jit ingest' on its jit-",
                                      req.pid, ".dump or perf-", req.pid, ".map first"));
  }
  for (uint64_t a : req.addresses) {
    JitAddrResult r;
    r.address = a;
    if (out.instance) {
      ASSIGN_OR_RETURN(r.function, FunctionAt(db, *out.instance, a, req.time));
    }
    if (!r.function && has_map) {
      ASSIGN_OR_RETURN(auto m, store::PerfMapEntryAt(db, req.pid, a));
      if (m) r.perf_map = PerfMapSymbol{m->path, m->entry.line, m->entry.start, m->entry.size, m->entry.name};
    }
    out.results.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<JitCollision>> JitCollisionGroups(Db& db, std::optional<std::string> scheme) {
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(db));
  ASSIGN_OR_RETURN(auto rows,
                   store::JitSharedBuildIdRows(db, scheme ? std::optional<std::string_view>(*scheme) : std::nullopt));
  std::vector<JitCollision> out;
  InstanceCache instances(db);
  for (const auto& row : rows) {
    if (out.empty() || out.back().scheme != row.scheme || out.back().build_id != row.build_id) {
      out.push_back(JitCollision{row.scheme, row.build_id, {}, 0});
    }
    JitFunction f = FunctionOf(row.load);
    ASSIGN_OR_RETURN(f.instance, instances.Get(row.load.instance_id));
    out.back().loads.push_back(std::move(f));
  }
  for (JitCollision& g : out) {
    std::set<std::string> names;
    for (const JitFunction& l : g.loads) names.insert(l.name);
    g.distinct_names = names.size();
  }
  std::stable_sort(out.begin(), out.end(), [](const JitCollision& a, const JitCollision& b) {
    if (a.scheme != b.scheme) return a.scheme < b.scheme;
    return a.loads.size() > b.loads.size();
  });
  return out;
}

absl::StatusOr<std::map<std::string, JitSchemeCount>> JitSchemeCounts(Db& db, std::optional<std::string> scheme) {
  ASSIGN_OR_RETURN(auto counts, store::JitBuildIdCounts(db));
  std::map<std::string, JitSchemeCount> out;
  for (const auto& [s, c] : counts) {
    if (scheme && s != *scheme) continue;
    out[s] = JitSchemeCount{c.first, c.second};
  }
  return out;
}

absl::StatusOr<std::string> CanonicalBuildId(std::string_view hex_in, size_t quote_max) {
  auto bid = BuildId::FromHex(hex_in);
  if (!bid || bid->empty()) {
    return absl::InvalidArgumentError(StrCat("'", Quote(hex_in, quote_max), "' is not a hex build-ID"));
  }
  return bid->ToHex();
}

absl::StatusOr<BuildIdAnswer> LookupBuildId(Db& db, std::string_view hex_in, bool include_jitted, size_t quote_max) {
  BuildIdAnswer out;
  ASSIGN_OR_RETURN(out.build_id, CanonicalBuildId(hex_in, quote_max));
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(db));
  ASSIGN_OR_RETURN(out.kernel, KernelBuildIdHits(db, out.build_id));
  if (!include_jitted) return out;
  ASSIGN_OR_RETURN(auto rows, store::JitLoadsWithBuildId(db, out.build_id));
  InstanceCache instances(db);
  for (const auto& [scheme, row] : rows) {
    JitBuildIdMatch m{scheme, FunctionOf(row)};
    ASSIGN_OR_RETURN(m.load.instance, instances.Get(row.instance_id));
    ASSIGN_OR_RETURN(m.load.build_ids, store::JitBuildIdsOf(db, row.load_id));
    out.jitted.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<std::vector<JitInstanceInfo>> JitExportInstances(Db& db, std::optional<uint32_t> pid,
                                                                std::optional<uint64_t> instance) {
  ASSIGN_OR_RETURN(auto all, Instances(db, pid));
  std::vector<JitInstanceInfo> chosen;
  std::map<uint32_t, int> per_pid;
  for (const auto& i : all) {
    if (instance && i.dump_timestamp != *instance) continue;
    chosen.push_back(i);
    ++per_pid[i.pid];
  }
  if (chosen.empty()) {
    return absl::NotFoundError(pid ? StrCat("no jitdump ingested for pid ", *pid) : "no jitdump ingested");
  }
  for (const auto& [p, n] : per_pid) {
    if (n > 1) {
      return absl::InvalidArgumentError(StrCat("pid ", p, " has ", n, " jitdumps (pid reused); their jitted-", p,
                                               "-*.so names would clash: pick one with --pid and --instance"));
    }
  }
  return chosen;
}

absl::StatusOr<std::vector<JitExportLoad>> JitExportLoads(Db& db, const JitInstanceInfo& instance,
                                                          const std::string& scheme) {
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(db));
  ASSIGN_OR_RETURN(auto rows, store::JitLoadsOfInstance(db, instance.id));
  std::vector<JitExportLoad> out;
  for (auto& row : rows) {
    JitExportLoad e;
    e.function = FunctionOf(row.load);
    e.function.instance = instance;
    e.code = std::move(row.code);
    ASSIGN_OR_RETURN(e.function.build_ids, store::JitBuildIdsOf(db, row.load.load_id));
    auto hex = e.function.build_ids.find(scheme);
    auto bid = hex == e.function.build_ids.end() ? std::nullopt : BuildId::FromHex(hex->second);
    if (!bid) return absl::InternalError("bad stored build-ID");
    e.build_id = *bid;
    ASSIGN_OR_RETURN(auto lines, store::JitLinesOf(db, row.load.load_id));
    e.function.line_entries = static_cast<int64_t>(lines.size());
    for (const auto& l : lines) {
      if (l.addr < e.function.code_addr) continue;
      e.lines.push_back(JitCodeLine{l.addr - e.function.code_addr, l.line, l.discrim, l.file});
    }
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<DsoMatch> JittedDsoMatcher::Match(const JittedDsoKey& dso) {
  DsoMatch m;
  const std::string& hex = dso.build_id;
  auto count_with_id = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(m.loads_with_id, store::CountJitLoadsWithBuildId(db_, hex));
    return absl::OkStatus();
  };
  auto elsewhere = [&]() {
    return m.loads_with_id ? StrCat("; its build-ID is that of ", m.loads_with_id,
                                    " other ingested load(s): see 'symdex buildid ", hex, "'")
                           : std::string();
  };
  if (!dso.pid) {
    m.status = "unnamed";
    RETURN_IF_ERROR(count_with_id());
    m.message = StrCat("file name is not jitted-<pid>-<code_index>.so: no load to compare with", elsewhere());
    return m;
  }
  if (!instances_) {
    ASSIGN_OR_RETURN(auto all, Instances(db_, std::nullopt));
    instances_.emplace();
    for (auto& i : all) (*instances_)[i.id] = std::move(i);
  }
  ASSIGN_OR_RETURN(auto rows, store::JitLoadsByPidIndex(db_, *dso.pid, dso.code_index));
  for (const auto& row : rows) {
    DsoLoadCandidate c;
    c.load = FunctionOf(row);
    if (auto inst = instances_->find(row.instance_id); inst != instances_->end()) c.load.instance = inst->second;
    m.candidates.push_back(std::move(c));
  }
  std::sort(m.candidates.begin(), m.candidates.end(), [](const DsoLoadCandidate& a, const DsoLoadCandidate& b) {
    return std::pair(a.load.instance.id, a.load.file_offset) < std::pair(b.load.instance.id, b.load.file_offset);
  });
  bool any = false;
  for (DsoLoadCandidate& c : m.candidates) {
    ASSIGN_OR_RETURN(c.load.build_ids, store::JitBuildIdsOf(db_, c.load.load_id));
    for (const auto& [scheme, id] : c.load.build_ids) {
      if (id == hex) c.schemes.push_back(scheme);
    }
    c.symbol_matches = dso.symbol == c.load.name;
    any = any || !c.schemes.empty();
  }
  if (any) {
    m.status = "matched";
    return m;
  }
  RETURN_IF_ERROR(count_with_id());
  const std::string dso_name = StrCat("jitted-", *dso.pid, "-", dso.code_index, ".so");
  if (m.candidates.empty()) {
    m.status = "no-load";
    m.message = StrCat("no such load ingested: no CODE_LOAD with pid ", *dso.pid, " and code_index ", dso.code_index,
                       " (ingest jit-", *dso.pid, ".dump with 'symdex jit ingest')", elsewhere());
    return m;
  }
  m.status = "unknown";
  m.message = StrCat("the build-ID is none of the IDs (md5-addr, sha1-code, sha1-symtab, symdex) of the ",
                     m.candidates.size() == 1 ? "load" : StrCat(m.candidates.size(), " loads"), " named ", dso_name,
                     ": written by a perf without libcrypto (random IDs, e.g. Debian 12's perf 6.1), altered, or "
                     "from another process that reused the pid",
                     elsewhere());
  return m;
}

namespace {
absl::StatusOr<Db> OpenRead(const std::string& path) { return store::OpenIndex(path, store::IndexUse::kRead); }
}  // namespace

absl::StatusOr<JitAddrAnswer> JitReader::Addr(const JitAddrRequest& req) const {
  ASSIGN_OR_RETURN(Db db, OpenRead(db_path_));
  return JitAddresses(db, req);
}

absl::StatusOr<std::vector<JitCollision>> JitReader::Collisions(std::optional<std::string> scheme) const {
  ASSIGN_OR_RETURN(Db db, OpenRead(db_path_));
  return JitCollisionGroups(db, std::move(scheme));
}

absl::StatusOr<BuildIdAnswer> JitReader::BuildIdHits(std::string_view hex_in, bool include_jitted,
                                                     size_t quote_max) const {
  // A malformed argument is told before a missing index.
  RETURN_IF_ERROR(CanonicalBuildId(hex_in, quote_max).status());
  ASSIGN_OR_RETURN(Db db, OpenRead(db_path_));
  return LookupBuildId(db, hex_in, include_jitted, quote_max);
}

}  // namespace symdex::query
