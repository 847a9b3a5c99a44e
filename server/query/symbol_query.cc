#include "server/query/symbol_query.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "server/common/strings.h"
#include "server/ingest/kallsyms.h"
#include "server/query/fentry_verdict.h"

namespace symdex::query {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// name == prefix + "." + digits
bool PrefixDotNumber(std::string_view name, std::string_view prefix) {
  return name.size() > prefix.size() + 1 && name.starts_with(prefix) && name[prefix.size()] == '.' &&
         AllDigits(name.substr(prefix.size() + 1));
}

bool IsInitOrExitSection(std::string_view section) {
  return section.starts_with(".init") || section.starts_with(".exit");
}

Instance MakeInstance(const TargetInfo& t, const store::SymbolRecord& r) {
  Instance in;
  in.name = r.name;
  in.module = r.module;
  in.type = r.type;
  in.size = r.size;
  in.size_exact = r.size_exact;
  in.dwarf = r.dwarf;
  in.dwarf_note = r.dwarf_note;
  if (r.section.empty()) {
    in.addr = r.addr;
    const std::optional<uint64_t> anchor = t.AnchorAddr();
    if (r.module.empty() && anchor && r.addr >= *anchor) {
      in.text_offset = r.addr - *anchor;
      in.text_anchor = t.text_anchor;
    }
  } else {
    in.section = r.section;
    in.section_offset = r.addr;
    in.init_or_exit = IsInitOrExitSection(r.section);
  }
  in.verdict = ProbeVerdictOf(t, r);
  return in;
}

// (A name with a control byte is never a probe target: its address form, as KprobeLine gives.)
void FillProbe(Instance& in) {
  const bool by_name = !HasControlByte(in.name) && !HasControlByte(in.module);
  if (by_name && in.same_name_total == 1) {
    in.probe = in.name;
  } else if (by_name && !in.module.empty() && in.same_name_in_module == 1) {
    in.probe = StrCat(in.module, ":", in.name);
  } else if (in.module.empty() && in.text_offset) {
    in.probe = StrCat(in.text_anchor, "+", *in.text_offset);
  } else if (in.addr) {
    in.probe = fmt::format("0x{:016x}", *in.addr);
  }
}

}  // namespace

absl::StatusOr<TargetInfo> SelectTarget(store::Db& db, const std::string& requested) {
  ASSIGN_OR_RETURN(auto all, store::ListTargets(db));
  return SelectTargetFrom(all, requested);
}

absl::StatusOr<TargetInfo> SelectTargetFrom(const std::vector<TargetInfo>& all, const std::string& requested) {
  if (requested.starts_with(kBuildIdTargetPrefix)) {
    const std::string_view hex = std::string_view(requested).substr(kBuildIdTargetPrefix.size());
    const std::optional<BuildId> id = BuildId::FromHex(hex);
    if (!id) return absl::InvalidArgumentError(StrCat("--build-id: '", Excerpt(hex, 80), "' is not a build-ID"));
    for (const auto& t : all) {
      if (t.build_id == id->ToHex()) return t;
    }
    return absl::InvalidArgumentError(StrCat("no target has vmlinux build-ID ", id->ToHex(),
                                             " (index it: symdex index --build-id ", id->ToHex(), ")"));
  }
  if (!requested.empty()) {
    for (const auto& t : all) {
      if (t.name == requested) return t;
    }
    return absl::InvalidArgumentError(StrCat("no target named '", requested, "' (see 'symdex status')"));
  }
  if (all.empty()) return absl::FailedPreconditionError("the index has no targets: run 'symdex index' first");
  if (all.size() == 1) return all[0];
  for (const auto& t : all) {
    if (t.name == "host") return t;
  }
  std::vector<std::string> names;
  for (const auto& t : all) names.push_back(t.name);
  return absl::InvalidArgumentError(
      StrCat("several targets are indexed; pick one with --target: ", StrJoin(names, ", ")));
}

Instance InstanceOf(const TargetInfo& t, const store::SymbolRecord& r) { return MakeInstance(t, r); }

absl::StatusOr<std::vector<Instance>> InstancesNamed(store::Db& db, const TargetInfo& t, const std::string& name,
                                                     bool with_clones) {
  ASSIGN_OR_RETURN(auto rows, store::SymbolsByName(db, t.id, name, with_clones));
  // The rows hold every symbol (any type) carrying each name they contain, so the counts the
  // kernel's kprobe lookup makes (by name, and by name inside a module) come from them.
  std::map<std::string, int64_t> total;
  std::map<std::pair<std::string, std::string>, int64_t> in_module;
  for (const auto& r : rows) {
    ++total[r.name];
    ++in_module[{r.name, r.module}];
  }
  std::vector<Instance> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    Instance in = MakeInstance(t, r);
    in.same_name_total = total[r.name];
    in.same_name_in_module = in_module[{r.name, r.module}];
    FillProbe(in);
    out.push_back(std::move(in));
  }
  std::map<std::string, std::vector<Instance*>> by_name;
  for (Instance& in : out) by_name[in.name].push_back(&in);
  for (auto& [name, copies] : by_name) FillFentryVerdicts(t, copies);
  return out;
}

absl::StatusOr<std::vector<Instance>> AllInstances(store::Db& db, const TargetInfo& t, bool all_types) {
  ASSIGN_OR_RETURN(auto rows, store::AllSymbols(db, t.id, all_types));
  std::vector<Instance> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(MakeInstance(t, r));
  return out;
}

bool IsAliasNoise(std::string_view n) {
  for (std::string_view p : {"__pfx_", "__cfi_", "__UNIQUE_ID_"}) {
    if (n.starts_with(p)) return true;
  }
  size_t u = n.find_first_not_of('_');
  if (u != std::string_view::npos && n.substr(u).starts_with("TRACE_SYSTEM")) return true;
  for (std::string_view p : {"__compound_literal", "__already_done", "__msg", "__func__", "CSWTCH", "_rs", "___tp_str",
                             "__flags", "___done", "__print_once", "___once_key", "symbols"}) {
    if (PrefixDotNumber(n, p)) return true;
  }
  // __[wm]*key.N
  if (n.starts_with("__")) {
    size_t i = 2;
    while (i < n.size() && (n[i] == 'w' || n[i] == 'm')) ++i;
    if (PrefixDotNumber(n.substr(i), "key")) return true;
  }
  if (n.starts_with(".LC") && AllDigits(n.substr(3))) return true;
  // .L<digits><any char><digits>
  if (n.starts_with(".L")) {
    std::string_view rest = n.substr(2);
    size_t d = 0;
    while (d < rest.size() && rest[d] >= '0' && rest[d] <= '9') ++d;
    if (d > 0 && d + 1 < rest.size() && AllDigits(rest.substr(d + 1))) return true;
  }
  if (n.starts_with("_note_") && AllDigits(n.substr(6))) return true;
  return false;
}

absl::StatusOr<std::vector<DupGroup>> Dups(store::Db& db, const TargetInfo& t, const DupsOptions& opts) {
  ASSIGN_OR_RETURN(auto rows, store::AllSymbols(db, t.id, opts.all_types));
  // Group the candidate symbols by name.
  std::unordered_map<std::string, std::vector<size_t>> by_name;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (ingest::IsPseudoModule(r.module) || IsAliasNoise(r.name)) continue;
    if (!opts.with_init && IsInitOrExitSection(r.section)) continue;
    by_name[r.name].push_back(i);
  }
  const std::string want_module = opts.module == "vmlinux" ? "" : opts.module;
  std::vector<DupGroup> out;
  for (auto& [name, idx] : by_name) {
    if (idx.size() < 2) continue;
    if (!opts.module.empty() &&
        std::none_of(idx.begin(), idx.end(), [&](size_t i) { return rows[i].module == want_module; })) {
      continue;
    }
    DupGroup g;
    g.name = name;
    std::map<std::string, int64_t> per_module;
    for (size_t i : idx) ++per_module[rows[i].module];
    for (size_t i : idx) {
      Instance in = MakeInstance(t, rows[i]);
      // Counts over the same filtered set: for text symbols this is what kprobes will see
      // among functions; Which() gives exact all-type counts.
      in.same_name_total = static_cast<int64_t>(idx.size());
      in.same_name_in_module = per_module[rows[i].module];
      FillProbe(in);
      if (opts.traceable && !in.verdict.kprobe) continue;
      g.instances.push_back(std::move(in));
    }
    if (g.instances.empty()) continue;
    std::sort(g.instances.begin(), g.instances.end(), [](const Instance& a, const Instance& b) {
      return std::tie(a.module, a.section, a.section_offset, a.addr) <
             std::tie(b.module, b.section, b.section_offset, b.addr);
    });
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const DupGroup& a, const DupGroup& b) { return a.name < b.name; });
  return out;
}

}  // namespace symdex::query
