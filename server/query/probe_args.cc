// Probe arguments by name (perf probe's syntax, ingest/probe_arg.h) for exactly the copy a spec
// resolved to: the copy's debug file, where in it the copy is (vmlinux: its link-time address;
// a module: section + offset), the architecture's registers, and how static storage is named —
// then debuginfo/dwarf/fetch_args.h compiles them from that one unit of DWARF.
#include <elf.h>
#include <fmt/format.h>

#include "server/common/kernel_arch.h"
#include "server/debuginfo/dwarf/fetch_args.h"
#include "server/debuginfo/files/code_file.h"
#include "server/ingest/x86_insn.h"
#include "server/kernel/probe_bits.h"
#include "server/query/local_query.h"
#include "server/query/local_query_impl.h"
#include "server/query/probe_forms.h"
#include "server/query/resolver.h"
#include "server/query/spec.h"
#include "server/store/debuginfo_store.h"

namespace symdex::query {

namespace {

// How far past a function's DWARF entry its ftrace site reaches (a parameter's location may
// start there): x86-64's `call __fentry__` (5 bytes) after an ENDBR64 when there is one; arm64's
// BTI landing pad after the patchable NOPs (which are before DWARF's entry). 0: no site there.
uint64_t EntrySlack(const KernelArch& arch, uint32_t bits) {
  if ((bits & kernel::kProbeJudged) == 0 || (bits & kernel::kProbeFentryEntry) == 0) return 0;
  if (arch.call_size == 0) return (bits & kernel::kProbeEntryEndbr) ? 9 : 5;  // x86-64
  return 4;
}

}  // namespace

absl::Status LocalQuery::CheckInsnBoundary(store::Db& db, const TargetInfo& t, const Match& m) {
  auto at = ProbeArgsSite(db, t, m, false);
  if (!at.ok()) return absl::OkStatus();  // no debug file: the kernel checks it when the probe is written
  auto code = debuginfo::CodeFile::Open(at->path);
  if (!code.ok() || (*code)->machine() != EM_X86_64) return absl::OkStatus();
  auto bytes = (*code)->Code(at->at.section, at->at.symbol, m.offset + ingest::kMaxX86InsnLength);
  if (!bytes.ok() || bytes->size() <= m.offset) return absl::OkStatus();
  for (uint64_t p = 0; p < m.offset;) {
    std::optional<size_t> n = ingest::X86InsnLength(bytes->subspan(static_cast<size_t>(p)));
    if (!n) return absl::OkStatus();  // bytes this decoder does not know: left to the kernel
    if (p + *n > m.offset) {
      return absl::InvalidArgumentError(StrCat("+", m.offset, " is inside an instruction: the one at +", p, " is ", *n,
                                               " bytes (decoded from the start of ", m.instance.name,
                                               " as the file links it); probe at +", p, " or +", p + *n));
    }
    p += *n;
  }
  return absl::OkStatus();
}

absl::StatusOr<LocalQuery::ProbeArgsAt> LocalQuery::ProbeArgsSite(store::Db& db, const TargetInfo& t, const Match& m,
                                                                  bool ret) {
  const Instance& in = m.instance;
  ProbeArgsAt out;
  out.arch = ArchOfMachine(t.machine);
  if (out.arch == nullptr) {
    return absl::FailedPreconditionError(
        StrCat("target '", t.name, "': its architecture (ELF machine ", t.machine, ") has no register table"));
  }
  if (!in.dwarf || !in.dwarf->has_function) {
    return absl::FailedPreconditionError(
        StrCat(in.module.empty() ? in.name : in.module + ":" + in.name,
               ": no DWARF function is indexed for this copy, so its variables are unknown",
               in.dwarf_note.empty() ? "" : " (" + in.dwarf_note + ")"));
  }
  ASSIGN_OR_RETURN(auto df, store::DebugFileOf(db, t.id, in.module));
  if (!df) {
    return absl::FailedPreconditionError(
        StrCat("target '", t.name, "' has no debug file for ", in.module.empty() ? "vmlinux" : in.module));
  }
  out.path = df->path;
  out.at.offset = m.offset;
  out.at.ret = ret;
  out.at.dwarf_name = in.dwarf->function;
  out.at.entry_slack = EntrySlack(*out.arch, in.verdict.bits);
  if (in.module.empty()) {
    if (!in.addr) return absl::FailedPreconditionError(StrCat(in.name, ": no address is indexed for this copy"));
    // DWARF's addresses are link-time; a live target's are where KASLR put them.
    const uint64_t slide = (t.text_addr && df->text_addr) ? *t.text_addr - *df->text_addr : 0;
    out.at.symbol = *in.addr - slide;
    const std::optional<uint64_t> anchor = t.AnchorAddr();
    const std::string anchor_name = t.text_anchor;
    if (anchor) {
      const uint64_t anchor_link = *anchor - slide;
      out.static_form = [anchor_link, anchor_name](uint64_t addr) -> std::string {
        if (addr < anchor_link) return "";
        return StrCat(anchor_name, "+", addr - anchor_link);
      };
    }
    return out;
  }
  if (!df->relocatable) {
    return absl::FailedPreconditionError(StrCat(in.module, ": its debug file is not a relocatable module"));
  }
  if (!in.section.empty()) {
    out.at.section = in.section;
    out.at.symbol = in.section_offset;
  } else if (in.addr) {
    ASSIGN_OR_RETURN(auto bases, store::ModuleSections(db, t.id, in.module));
    const std::pair<std::string, uint64_t>* best = SectionHolding(bases, *in.addr);
    if (best == nullptr) {
      return absl::FailedPreconditionError(
          StrCat(in.module, ":", in.name, ": no section of ", in.module, " is known to hold its address"));
    }
    out.at.section = best->first;
    out.at.symbol = *in.addr - best->second;
  } else {
    return absl::FailedPreconditionError(StrCat(in.module, ":", in.name, ": neither a section offset nor an address"));
  }
  // A module's static storage has no name a kprobe resolves to exactly one copy offline.
  return out;
}

absl::StatusOr<std::vector<std::string>> LocalQuery::CompileProbeArgs(store::Db& db, const TargetInfo& t,
                                                                      const Match& m, const KprobeOptions& opts,
                                                                      std::vector<std::string>& notes) {
  ASSIGN_OR_RETURN(std::optional<std::vector<ingest::ProbeArg>> args, ingest::ParseNamedProbeArgs(opts.fetchargs));
  if (!args) return opts.fetchargs;  // the kernel's own syntax only: nothing to look up
  ASSIGN_OR_RETURN(ProbeArgsAt at, ProbeArgsSite(db, t, m, opts.ret));
  return CompileAt(at, *args, notes);
}

absl::StatusOr<std::vector<std::string>> LocalQuery::CompileAt(const ProbeArgsAt& at,
                                                               const std::vector<ingest::ProbeArg>& args,
                                                               std::vector<std::string>& notes) {
  debuginfo::FetchContext ctx{.arch = at.arch, .static_form = at.static_form};
  std::lock_guard<std::mutex> l(sym_mu_);
  last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
  ASSIGN_OR_RETURN(debuginfo::CompiledArgs c, symbolizer_.FetchArgs(at.path, at.at, args, ctx));
  for (auto& n : c.notes) notes.push_back(std::move(n));
  return std::move(c.fetchargs);
}

absl::Status LocalQuery::LinePlaces(store::Db& db, const TargetInfo& t, const Match& m, const KprobeOptions& opts,
                                    ProbeResult& out) {
  if (m.offset != 0) {
    return absl::InvalidArgumentError("a line and +OFFSET each say where the probe is: give one of them");
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<ingest::ProbeArg>> args, ingest::ParseNamedProbeArgs(opts.fetchargs));
  ASSIGN_OR_RETURN(ProbeArgsAt at, ProbeArgsSite(db, t, m, false));
  debuginfo::FetchContext ctx{.arch = at.arch, .static_form = at.static_form};
  debuginfo::LinePlaces places;
  {
    std::lock_guard<std::mutex> l(sym_mu_);
    last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
    ASSIGN_OR_RETURN(places,
                     symbolizer_.BodyLines(at.path, at.at, opts.line ? *opts.line : *opts.rel_line, !opts.line, ctx));
  }
  out.line_file = places.file;
  out.line = places.line;
  // perf's event names for a line: NAME_L<relative line>, then _1, _2 ... for its other places.
  const std::string base = ProbeEventName(m.instance, opts);
  const int rel = places.line - places.decl_line;
  for (size_t k = 0; k < places.pcs.size(); ++k) {
    std::string suffix = opts.event.empty() && rel != 0 ? StrCat("_L", rel) : "";
    if (k > 0) suffix += StrCat("_", k);
    KprobeOptions here = opts;
    here.event = base.substr(0, std::min(base.size(), 63 - std::min<size_t>(63, suffix.size()))) + suffix;
    Match place = m;
    place.offset = places.pcs[k];
    ProbePlace p{.offset = place.offset, .event = here.event};
    if (args) {  // compiled at this place, from the site found once
      at.at.offset = place.offset;
      ASSIGN_OR_RETURN(here.fetchargs, CompileAt(at, *args, p.notes));
    }
    ASSIGN_OR_RETURN(p.kprobe, KprobeLine(place, here));
    out.places.push_back(std::move(p));
  }
  for (const auto& [off, own] : places.shared) {
    out.notes.push_back(
        fmt::format("+0x{:x} is a statement of line {} too, but a probe there belongs to line {}: "
                    "left out",
                    off, places.line, own));
  }
  out.kprobe = out.places.front().kprobe;
  return absl::OkStatus();
}

absl::Status Vars::Check(const VarsRequest& r) { return CheckTargetAndName(r.target, "spec", r.spec, kMaxSpecLength); }

absl::StatusOr<VarsAnswer> Vars::Local(LocalQuery& q, const VarsRequest& r) { return q.Variables(r); }

absl::StatusOr<ResolveResult> LocalQuery::ResolveOne(const std::string& target, const std::string& spec) {
  ASSIGN_OR_RETURN(ResolveResult res, Resolve(target, spec));
  if (res.matches.empty()) {
    return absl::NotFoundError(
        StrCat("no symbol matches '", Excerpt(spec, 200), "' in target '", res.target.name, "'"));
  }
  if (res.matches.size() > 1) {
    std::vector<std::string> specs;
    for (const auto& c : res.matches) specs.push_back(c.canonical);
    return absl::InvalidArgumentError(StrCat("'", Excerpt(spec, 200), "' is ambiguous: ", res.matches.size(),
                                             " candidates; name one: ", StrJoin(specs, ", ")));
  }
  return res;
}

absl::StatusOr<VarsAnswer> LocalQuery::Variables(const VarsRequest& r) {
  ASSIGN_OR_RETURN(ResolveResult res, ResolveOne(r.target, r.spec));
  const Match& m = res.matches[0].match;
  return InTarget(r.target, [&](store::Db& db, const TargetInfo& t) -> absl::StatusOr<VarsAnswer> {
    ASSIGN_OR_RETURN(ProbeArgsAt at, ProbeArgsSite(db, t, m, false));
    debuginfo::FetchContext ctx{.arch = at.arch, .static_form = at.static_form};
    std::vector<debuginfo::ScopeVariable> vars;
    {
      std::lock_guard<std::mutex> l(sym_mu_);
      last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
      ASSIGN_OR_RETURN(vars, symbolizer_.Variables(at.path, at.at, ctx));
    }
    VarsAnswer out;
    out.target = res.target;
    out.instance = m.instance;
    out.offset = m.offset;
    out.canonical = res.matches[0].canonical;
    for (auto& v : vars) {
      ScopeVar s{.name = std::move(v.name),
                 .type = std::move(v.type),
                 .parameter = v.parameter,
                 .available = v.here,
                 .fetch = std::move(v.fetch),
                 .why = std::move(v.why)};
      for (const auto& [lo, hi] : v.ranges) {
        s.ranges.push_back(lo);
        s.ranges.push_back(hi);
      }
      out.variables.push_back(std::move(s));
    }
    return out;
  });
}

absl::Status InlinedProbes::Check(const InlinedProbesRequest& r) {
  RETURN_IF_ERROR(CheckTargetAndName(r.target, "spec", r.spec, kMaxSpecLength));
  return CheckKprobeOptions(KprobeOptions{.group = r.group, .event = r.event, .fetchargs = r.fetchargs});
}

absl::StatusOr<InlinedProbesAnswer> InlinedProbes::Local(LocalQuery& q, const InlinedProbesRequest& r) {
  return q.ProbesInlined(r);
}

absl::StatusOr<InlinedProbesAnswer> LocalQuery::ProbesInlined(const InlinedProbesRequest& r) {
  ASSIGN_OR_RETURN(Spec spec, ParseSpec(r.spec));
  if (spec.address || !spec.module.empty() || spec.line || !spec.kas_alias.empty() || spec.at_addr ||
      !spec.cu.empty() || spec.offset != 0) {
    return absl::InvalidArgumentError(StrCat("'", Excerpt(r.spec, 200),
                                             "': inlined places are named NAME or NAME@FILE (the file the function "
                                             "is declared in); each place is where the compiler put it"));
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<ingest::ProbeArg>> args, ingest::ParseNamedProbeArgs(r.fetchargs));
  ASSIGN_OR_RETURN(InlinedAnswer places, Inlined::Local(*this, InlinedRequest{r.target, spec.name}));
  InlinedProbesAnswer out;
  out.target = places.target;
  out.name = spec.name;
  out.notes = std::move(places.notes);
  if (places.sites.empty()) {
    return absl::NotFoundError(StrCat("no copy of '", Excerpt(spec.name, 200), "' is inlined in target '",
                                      places.target.name, "'", out.notes.empty() ? "" : " (" + out.notes[0] + ")"));
  }
  KprobeOptions base;
  base.group = r.group.empty() ? base.group : r.group;
  {
    Instance named;  // the event name: the function's, as for a copy of it that is unique
    named.name = spec.name;
    named.same_name_total = 1;
    base.event = r.event.empty() ? DefaultEventName(named) : r.event;
  }
  size_t other_files = 0;
  RETURN_IF_ERROR(InTarget(r.target, [&](store::Db& db, const TargetInfo& t) -> absl::Status {
    if (t.generation != places.target.generation) return absl::AbortedError("the index changed during the call");
    for (const InlinedSite& site : places.sites) {
      const std::string where =
          site.caller ? fmt::format("{}+{:#x}", site.caller->name, site.offset) : std::string("outside every symbol");
      if (!site.caller) {
        out.left_out.push_back(StrCat(where, ": no symbol holds this copy, so no kprobe names it"));
        continue;
      }
      Match m{.instance = *site.caller, .offset = site.offset};
      auto at = ProbeArgsSite(db, t, m, false);
      if (!at.ok()) {
        out.left_out.push_back(StrCat(where, ": ", at.status().message()));
        continue;
      }
      at->at.inlined = spec.name;
      debuginfo::FetchContext ctx{.arch = at->arch, .static_form = at->static_form};
      std::string decl_file;
      {
        std::lock_guard<std::mutex> l(sym_mu_);
        last_dwarf_use_ = std::chrono::steady_clock::now().time_since_epoch().count();
        auto f = symbolizer_.InlinedDeclFile(at->path, at->at, ctx);
        if (!f.ok()) {
          out.left_out.push_back(StrCat(where, ": ", f.status().message()));
          continue;
        }
        decl_file = std::move(*f);
      }
      if (!spec.path.empty() && !PathSuffixMatch(decl_file, spec.path)) {
        ++other_files;
        continue;
      }
      const ProbeVerdict& v = m.instance.verdict;
      if (v.known() && !v.kprobe) {
        out.left_out.push_back(StrCat(where, ": the kernel refuses a kprobe in ", m.instance.name, ": ", v.reason));
        continue;
      }
      InlinedProbe p{.caller = site.caller,
                     .offset = site.offset,
                     .file = site.file,
                     .line = site.line,
                     .column = site.column,
                     .decl_file = decl_file};
      KprobeOptions here = base;
      const std::string suffix = out.probes.empty() ? "" : StrCat("_", out.probes.size());
      here.event = base.event.substr(0, std::min(base.event.size(), 63 - suffix.size())) + suffix;
      if (args) {
        auto compiled = CompileAt(*at, *args, p.notes);
        // An argument the function does not have (no such variable, member or type) is wrong
        // for every copy: refused as a whole. One a copy cannot fetch leaves that copy out.
        if (absl::IsInvalidArgument(compiled.status())) return compiled.status();
        if (!compiled.ok()) {
          out.left_out.push_back(StrCat(where, ": ", compiled.status().message()));
          continue;
        }
        here.fetchargs = std::move(*compiled);
      } else {
        here.fetchargs = r.fetchargs;
      }
      auto line = KprobeLine(m, here);
      if (!line.ok()) {
        out.left_out.push_back(StrCat(where, ": ", line.status().message()));
        continue;
      }
      p.event = here.event;
      p.kprobe = std::move(*line);
      out.probes.push_back(std::move(p));
    }
    return absl::OkStatus();
  }));
  if (other_files > 0) {
    out.notes.push_back(StrCat(other_files, " place", other_files == 1 ? "" : "s", " of a '", spec.name,
                               "' declared in another file than ", spec.path, " not shown"));
  }
  if (out.probes.empty() && out.left_out.empty()) {
    return absl::NotFoundError(StrCat("no copy of '", spec.name, "' declared in ", spec.path, " is inlined in target '",
                                      out.target.name, "'"));
  }
  return out;  // (every place left out: the caller says why)
}

}  // namespace symdex::query
