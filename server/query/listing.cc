// LocalQuery's whole-target answers: every symbol of a target (symbols, kallsyms) and the state
// of the index and its targets (status). Both read one snapshot and are never cached: they are
// asked rarely and their answers are large.
#include <fmt/core.h>

#include "server/common/enum_names.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/kernel/file_status.h"
#include "server/query/kas_alias.h"
#include "server/query/local_query_impl.h"
#include "server/query/spec.h"
#include "server/query/symbol_query.h"
#include "server/store/debuginfo_store.h"
#include "server/store/index_store.h"

namespace symdex::query {
namespace {

// PRAGMA quick_check on a full Debian kernel index (54 MB: 1121 modules, 244k symbols, their
// DWARF functions) takes 0.25 s warm; the limit keeps `status` quick on indexes 20 times that.
constexpr double kQuickCheckSeconds = 5;

// Temporary address maps a killed `symdex index` left (the next one removes them), and ones
// being written right now.
std::vector<std::string> AddrMapLeftovers(const std::string& db_path) {
  std::vector<std::string> out;
  const std::string dir = AddrMapDirFor(db_path);
  if (dir.empty()) return out;
  for (const TempFile& t : debuginfo::AddrMapTempFiles(dir)) {
    out.push_back(fmt::format("{} ({}, {} s old)", t.path,
                              t.stale ? "left by a killed writer: the next 'symdex index' removes it"
                                      : fmt::format("being written by process {}", t.pid),
                              t.age_seconds));
  }
  return out;
}

absl::StatusOr<AddrMapState> VmlinuxAddrMap(store::Db& db, const std::string& db_path, const TargetInfo& t) {
  ASSIGN_OR_RETURN(auto vml, store::DebugFileOf(db, t.id, ""));
  const std::string dir = AddrMapDirFor(db_path);
  if (!vml || vml->relocatable || dir.empty()) return AddrMapState{};
  AddrMapState out;
  out.path = debuginfo::AddrMapPath(dir, vml->build_id);
  auto m = debuginfo::MappedAddrMap::Open(out.path, vml->build_id);
  if (m.ok()) {
    out.status = AddrMapStatus::kPresent;
    out.detail = fmt::format("{} MB", ((*m)->map().size_bytes() + (1 << 19)) >> 20);
  } else {
    out.status = m.status().code() == absl::StatusCode::kNotFound ? AddrMapStatus::kMissing : AddrMapStatus::kInvalid;
    out.detail = std::string(m.status().message());
  }
  return out;
}

bool IsTextInstance(const Instance& in) { return IsTextSymbolType(in.type); }

constexpr std::array<EnumName<AddrMapStatus>, 4> kAddrMapStatusNames = {{
    {AddrMapStatus::kNone, ""},
    {AddrMapStatus::kPresent, "present"},
    {AddrMapStatus::kMissing, "missing"},
    {AddrMapStatus::kInvalid, "invalid"},
}};
}  // namespace

std::string_view AddrMapStatusName(AddrMapStatus s) { return NameIn(kAddrMapStatusNames, s); }

absl::StatusOr<AddrMapStatus> ParseAddrMapStatus(std::string_view name) {
  if (auto s = ValueIn(kAddrMapStatusNames, name)) return *s;
  return absl::InvalidArgumentError(StrCat("unknown address map status '", name, "'"));
}

absl::Status ListDuplicates::Check(const DupsRequest& r) {
  RETURN_IF_ERROR(CheckFieldSize("target", r.target, kMaxTargetNameLength));
  return CheckFieldSize("module", r.opts.module, kMaxModuleNameLength);
}

absl::StatusOr<DupsResult> ListDuplicates::Local(LocalQuery& q, const DupsRequest& r) {
  return q.Dups(r.target, r.opts);
}

absl::Status ListSymbols::Check(const SymbolsRequest& r) {
  RETURN_IF_ERROR(CheckFieldSize("target", r.target, kMaxTargetNameLength));
  RETURN_IF_ERROR(CheckFieldSize("module", r.opts.module, kMaxModuleNameLength));
  if (r.opts.canonical && r.opts.aliases) {
    return absl::InvalidArgumentError("canonical specs and aliases are separate listings");
  }
  return absl::OkStatus();
}

absl::StatusOr<SymbolsResult> ListSymbols::Local(LocalQuery& q, const SymbolsRequest& r) {
  return q.Symbols(r.target, r.opts);
}

absl::StatusOr<SymbolsResult> ListSymbols::Joined(const SymbolsRequest& r, std::vector<SymbolsPart>&& parts) {
  SymbolsResult out;
  for (SymbolsPart& p : parts) {
    if (p.target_info) out.target = std::move(*p.target_info);
    std::move(p.instances.begin(), p.instances.end(), std::back_inserter(out.instances));
    std::move(p.canonical.begin(), p.canonical.end(), std::back_inserter(out.canonical));
    std::move(p.alias.begin(), p.alias.end(), std::back_inserter(out.alias));
  }
  const size_t n = out.instances.size();
  if ((r.opts.canonical && out.canonical.size() != n) || (r.opts.aliases && out.alias.size() != n)) {
    return absl::DataLossError(StrCat("sent ", n, " symbols with ", out.canonical.size(), " canonical specs and ",
                                      out.alias.size(), " aliases"));
  }
  return out;
}

absl::StatusOr<SymbolsResult> LocalQuery::Symbols(const std::string& target, const SymbolsOptions& o) {
  return WithSession([&](Session& s) -> absl::StatusOr<SymbolsResult> {
    ASSIGN_OR_RETURN(auto t, PickTarget(s, target));
    ASSIGN_OR_RETURN(store::Db * db, s.Db());
    SymbolsResult out;
    const std::string want = o.module == "vmlinux" ? "" : o.module;
    auto wanted = [&](const Instance& in) { return o.module.empty() || in.module == want; };
    if (o.canonical) {
      ASSIGN_OR_RETURN(auto all, AllCanonicalSpecs(*db, t));
      for (auto& [in, spec] : all) {
        if (!wanted(in)) continue;
        out.instances.push_back(std::move(in));
        out.canonical.push_back(std::move(spec));
      }
    } else {
      // kas_alias counts a name over every symbol type of the whole kernel, whatever is listed.
      ASSIGN_OR_RETURN(auto all, AllInstances(*db, t, o.all_types || o.aliases));
      const std::vector<bool> candidate = o.aliases ? KasAliasCandidates(all) : std::vector<bool>{};
      for (size_t i = 0; i < all.size(); ++i) {
        Instance& in = all[i];
        if (!wanted(in) || (!o.all_types && !IsTextInstance(in))) continue;
        if (o.aliases) {
          const bool aliased = candidate[i] && in.dwarf && !in.dwarf->entry_file.empty() && in.dwarf->entry_line > 0;
          out.alias.push_back(aliased ? KasAlias(in.dwarf->entry_file, in.dwarf->entry_line) : "");
        }
        out.instances.push_back(std::move(in));
      }
    }
    out.target = std::move(t);
    return out;
  });
}

absl::StatusOr<StatusAnswer> IndexStatus::Local(LocalQuery& q, const StatusRequest& r) {
  StatusAnswer out;
  if (r.index) {  // first: a damaged index is said by its quick_check
    ASSIGN_OR_RETURN(out.index, q.Index({.check_integrity = r.check_integrity, .details = !r.addr_maps_only}));
  }
  ASSIGN_OR_RETURN(out.targets, q.Targets());
  out.database = q.path();
  out.debug_files = q.DebugFileCount();
  return out;
}

absl::StatusOr<IndexState> LocalQuery::Index(const IndexOptions& opts) {
  ASSIGN_OR_RETURN(auto lease, Acquire());
  store::Db& db = lease->db;
  IndexState out;
  out.database = path_;
  // A damaged page anywhere fails here, with the file and the cure, instead of surfacing later
  // as a bare "database disk image is malformed" from whichever query reads it.
  if (opts.check_integrity) {
    out.integrity_seconds = kQuickCheckSeconds;
    ASSIGN_OR_RETURN(out.integrity_checked, db.QuickCheck(kQuickCheckSeconds));
  }
  out.addr_map_temp_files = AddrMapLeftovers(path_);
  if (auto v = db.UserVersion(); v.ok()) out.schema_version = *v;
  ASSIGN_OR_RETURN(auto snap, store::ReadSnapshot::Begin(db));
  ASSIGN_OR_RETURN(auto targets, store::ListTargets(db));
  for (auto& t : targets) {
    TargetState ts;
    ASSIGN_OR_RETURN(ts.addr_map, VmlinuxAddrMap(db, path_, t));
    if (!opts.details) {
      ts.summary.info = std::move(t);
      out.targets.push_back(std::move(ts));
      continue;
    }
    ASSIGN_OR_RETURN(ts.summary.counts, store::CountTarget(db, t.id));
    ASSIGN_OR_RETURN(auto files, store::TargetFiles(db, t.id));
    for (auto& f : files) {
      const bool problem = f.status == kernel::InputFileStatus::kError ||
                           (f.status == kernel::InputFileStatus::kMissing && f.role != "module");
      ts.files.push_back({std::move(f.role), std::move(f.path), std::string(kernel::Name(f.status)),
                          std::move(f.detail), problem, std::move(f.dropped)});
    }
    ASSIGN_OR_RETURN(auto dbg, store::TargetDebugInfo(db, t.id));
    for (auto& d : dbg) {
      const bool usable = d.status == kernel::DebugFileStatus::kUsed || d.status == kernel::DebugFileStatus::kCached;
      ts.debuginfo.push_back({std::move(d.module), std::move(d.build_id), std::string(kernel::Name(d.status)),
                              std::move(d.path), std::move(d.origin), std::move(d.detail), usable,
                              std::move(d.reader)});
    }
    ts.summary.info = std::move(t);
    out.targets.push_back(std::move(ts));
  }
  return out;
}

}  // namespace symdex::query
