#include "server/query/call_evidence.h"

#include <fmt/core.h>

#include <algorithm>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/query/local_query_impl.h"
#include "server/query/resolver.h"
#include "server/store/debuginfo_store.h"
#include "server/store/index_store.h"

namespace symdex::query {

debuginfo::CodeFile* CallEvidence::FileOf(const std::string& module) {
  if (auto it = files_.find(module); it != files_.end()) return it->second.get();
  std::unique_ptr<debuginfo::CodeFile>& f = files_[module];
  const std::string what = module.empty() ? std::string("vmlinux") : module;
  absl::StatusOr<std::shared_ptr<const store::DebugFileInfo>> df = debug_file_of_(module);
  if (!df.ok() || !*df) {
    if (unavailable_.empty()) unavailable_ = StrCat("no debug file for ", what, ": its code was not read");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<debuginfo::CodeFile>> opened = debuginfo::CodeFile::Open((*df)->path);
  if (!opened.ok()) {
    if (unavailable_.empty()) unavailable_ = StrCat(what, "'s code: ", opened.status().message());
    return nullptr;
  }
  // A linked vmlinux is read at link-time addresses; a live target's are slid by KASLR (as the
  // resolver places them: no _text on either side, no slide).
  if (module.empty() && !(*opened)->relocatable()) {
    vmlinux_slide_ = (t_.text_addr && (*df)->text_addr) ? *t_.text_addr - *(*df)->text_addr : 0;
  }
  f = std::move(*opened);
  return f.get();
}

std::optional<CodePlace> CallEvidence::PlaceOf(const Instance& in, uint64_t off) {
  CodePlace p;
  p.module = in.module;
  if (in.module.empty()) {
    if (!in.addr || FileOf("") == nullptr) return std::nullopt;
    p.at = *in.addr - vmlinux_slide_ + off;
    return p;
  }
  if (!in.section.empty()) {
    p.section = in.section;
    p.at = in.section_offset + off;
    return p;
  }
  if (!in.addr) return std::nullopt;
  // A loaded module's symbol: the section whose base is the highest at or below it.
  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> secs = sections_of_(in.module);
  if (!secs.ok()) return std::nullopt;
  const std::pair<std::string, uint64_t>* best = SectionHolding(*secs, *in.addr);
  if (best == nullptr) return std::nullopt;
  p.section = best->first;
  p.at = *in.addr - best->second + off;
  return p;
}

absl::StatusOr<std::optional<debuginfo::CallSite>> CallEvidence::CallAt(const CodePlace& p) {
  debuginfo::CodeFile* f = FileOf(p.module);
  if (f == nullptr) return absl::NotFoundError(unavailable_);
  return f->CallBefore(p.section, p.at);
}

std::optional<bool> CallEvidence::FollowsCall(const Instance& in, uint64_t off) {
  std::optional<CodePlace> p = PlaceOf(in, off);
  if (!p) return std::nullopt;
  absl::StatusOr<std::optional<debuginfo::CallSite>> c = CallAt(*p);
  if (!c.ok()) return std::nullopt;
  return c->has_value();
}

std::optional<Callee> CallEvidence::CalleeBefore(const Instance& in, uint64_t off) {
  std::optional<CodePlace> p = PlaceOf(in, off);
  if (!p) return std::nullopt;
  absl::StatusOr<std::optional<debuginfo::CallSite>> c = CallAt(*p);
  if (!c.ok() || !c->has_value() || !(*c)->insn.direct) return std::nullopt;
  const debuginfo::CallSite& site = **c;
  Callee out;
  out.symbol = site.target_symbol;
  if (site.target && (p->module.empty() || !site.target_section.empty())) {
    out.place = CodePlace{p->module, site.target_section, *site.target};
  }
  if (!out.place && out.symbol.empty()) return std::nullopt;
  return out;
}

bool CallEvidence::Starts(const Callee& callee, const Instance& k) {
  if (callee.place) {
    std::optional<CodePlace> at = PlaceOf(k, 0);
    return at && *at == *callee.place;
  }
  // A module's call into another file (vmlinux or another module): by the exported name.
  return !callee.symbol.empty() && k.name == callee.symbol;
}

absl::StatusOr<std::vector<CallEvidence::Branch>> CallEvidence::BranchesTo(const Instance& k) {
  std::optional<CodePlace> to = PlaceOf(k, 0);
  debuginfo::CodeFile* f = FileOf(k.module);
  if (!to || f == nullptr) {
    return absl::NotFoundError(!unavailable_.empty() ? unavailable_ : "where the copy is in its file is not known");
  }
  ASSIGN_OR_RETURN(std::vector<debuginfo::Branch> found, f->BranchesTo(to->section, to->at));
  std::map<std::string, uint64_t> bases;  // a loaded module's section -> its runtime address
  if (!k.module.empty()) {
    absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> secs = sections_of_(k.module);
    if (secs.ok()) bases.insert(secs->begin(), secs->end());
  }
  std::vector<Branch> out;
  out.reserve(found.size());
  for (const debuginfo::Branch& b : found) {
    Branch x;
    x.call = b.call;
    x.place.module = k.module;
    x.place.at = b.at;
    if (k.module.empty()) {
      x.runtime = b.at + vmlinux_slide_;
    } else {
      x.place.section = b.section;
      if (auto base = bases.find(b.section); base != bases.end()) x.runtime = base->second + b.at;
    }
    out.push_back(std::move(x));
  }
  return out;
}

absl::Status Callers::Check(const CallersRequest& r) {
  return CheckTargetAndName(r.target, "spec", r.spec, kMaxSpecLength);
}

namespace {

// kprobe_events' target for `off` bytes into `in` at runtime address `addr` (0: none): _text+N in
// vmlinux, MOD:NAME+N where NAME is unique in its module, else the address.
std::string ProbeTargetAt(const Instance& in, uint64_t off, uint64_t addr) {
  if (in.module.empty()) return in.text_offset ? StrCat(in.text_anchor, "+", *in.text_offset + off) : std::string();
  if (in.same_name_in_module == 1) return StrCat(in.module, ":", in.name, "+", off);
  return addr ? fmt::format("0x{:x}", addr) : std::string();
}

// The instance as `which` gives it (the counts a probe target needs): `brief`'s own row.
absl::StatusOr<std::optional<Instance>> FullInstance(store::Db& db, const TargetInfo& t, const Instance& brief) {
  ASSIGN_OR_RETURN(std::vector<Instance> all, InstancesNamed(db, t, brief.name, true));
  for (Instance& in : all) {
    if (SamePlace(in, brief)) {
      return std::optional<Instance>(std::move(in));
    }
  }
  return std::optional<Instance>();
}

// A call in a module without a runtime address: its caller the module's symbol holding it (as
// `which` gives it), its frames from the module's address map `map` (null: none).
absl::StatusOr<CallerSite> PlacedBySymbol(store::Db& db, const TargetInfo& t, const CallEvidence::Branch& b,
                                          const debuginfo::MappedAddrMap* map) {
  CallerSite site;
  site.tail_call = !b.call;
  const std::string& module = b.place.module;
  ASSIGN_OR_RETURN(store::Containment held, store::SymbolInSection(db, t.id, module, b.place.section, b.place.at));
  if (held.symbol) {
    Instance brief;
    brief.name = held.symbol->name;
    brief.module = module;
    brief.section = b.place.section;
    brief.section_offset = held.symbol->addr;
    ASSIGN_OR_RETURN(site.where.symbol, FullInstance(db, t, brief));
    site.where.offset = b.place.at - held.symbol->addr;
  } else {
    site.where.note = held.why;
  }
  if (map != nullptr) {
    if (auto base = map->map().SectionBase(b.place.section))
      site.where.frames = map->map().FramesAt(*base + b.place.at);
  }
  return site;
}

}  // namespace

absl::StatusOr<CallersAnswer> Callers::Local(LocalQuery& q, const CallersRequest& r) {
  ASSIGN_OR_RETURN(ResolveResult res, q.ResolveOne(r.target, r.spec));
  const CanonicalMatch& the = res.matches[0];
  if (the.match.offset != 0) {
    return absl::InvalidArgumentError(StrCat("'", Excerpt(r.spec, 200), "' names a place inside ",
                                             the.match.instance.name,
                                             ": calls land on a copy's first byte (drop +OFFSET)"));
  }
  const Instance& k = the.match.instance;
  struct Found {
    std::vector<CallEvidence::Branch> branches;
    std::vector<CallerSite> offline;  // a module's calls without runtime addresses, placed by its symbols
    std::vector<std::string> notes;
  };
  ASSIGN_OR_RETURN(Found f, q.InTarget(r.target, [&](store::Db& db, const TargetInfo& t) -> absl::StatusOr<Found> {
    if (t.generation != res.target.generation) return absl::AbortedError("the index changed during the call");
    Found f;
    DebugFileLookup debug_file_of =
        [&](const std::string& m) -> absl::StatusOr<std::shared_ptr<const store::DebugFileInfo>> {
      ASSIGN_OR_RETURN(auto df, store::DebugFileOf(db, t.id, m));
      if (!df) return std::shared_ptr<const store::DebugFileInfo>();
      return std::make_shared<const store::DebugFileInfo>(std::move(*df));
    };
    SectionLookup sections_of = [&](const std::string& m) { return store::ModuleSections(db, t.id, m); };
    CallEvidence code(t, debug_file_of, sections_of);
    absl::StatusOr<std::vector<CallEvidence::Branch>> found = code.BranchesTo(k);
    if (!found.ok()) {
      return absl::FailedPreconditionError(
          StrCat("the callers of ", the.canonical, " are not known: ", found.status().message()));
    }
    std::unique_ptr<debuginfo::MappedAddrMap> map;  // the module's, for the offline calls' lines
    bool map_tried = false;
    for (CallEvidence::Branch& b : *found) {
      if (b.runtime) {
        f.branches.push_back(std::move(b));
        continue;
      }
      if (!map_tried) {
        map_tried = true;
        ASSIGN_OR_RETURN(auto df, debug_file_of(k.module));
        if (!df) return absl::InternalError("the module's debug file went away during the call");
        auto m =
            debuginfo::MappedAddrMap::Open(debuginfo::AddrMapPath(AddrMapDirFor(q.path()), df->build_id), df->build_id);
        if (m.ok()) map = std::move(*m);
      }
      ASSIGN_OR_RETURN(CallerSite site, PlacedBySymbol(db, t, b, map.get()));
      f.offline.push_back(std::move(site));
    }
    // Modules call an exported vmlinux function by name; their code is not read.
    if (k.module.empty() && (k.type == 'T' || k.type == 'W')) {
      ASSIGN_OR_RETURN(std::vector<Instance> exported, InstancesNamed(db, t, StrCat("__ksymtab_", k.name), true));
      if (!exported.empty()) {
        f.notes.push_back(StrCat(k.name, " is exported: calls from modules were not looked for"));
      }
    }
    return f;
  }));
  CallersAnswer out;
  out.target = res.target;
  out.instance = k;
  out.canonical = the.canonical;
  out.notes = std::move(f.notes);
  std::sort(f.branches.begin(), f.branches.end(),
            [](const CallEvidence::Branch& a, const CallEvidence::Branch& b) { return *a.runtime < *b.runtime; });
  std::vector<uint64_t> addrs;
  for (const CallEvidence::Branch& b : f.branches) addrs.push_back(*b.runtime);
  ASSIGN_OR_RETURN(SymbolizeResult s, q.Symbolize(res.target.name, addrs));
  if (s.target.generation != res.target.generation) return absl::AbortedError("the index changed during the call");
  // The callers as `which` gives them (their counts make a probe target), each asked once.
  std::map<std::string, std::vector<Instance>> named;
  for (size_t i = 0; i < addrs.size(); ++i) {
    const AddressInfo& info = *s.results[i];
    CallerSite site;
    site.where = {addrs[i], info.symbol, info.offset, info.frames, info.note};
    site.tail_call = !f.branches[i].call;
    if (info.symbol) {
      auto [it, fresh] = named.try_emplace(info.symbol->name);
      if (fresh) {
        ASSIGN_OR_RETURN(it->second,
                         q.InTarget(res.target.name,
                                    [&](store::Db& db, const TargetInfo& t) -> absl::StatusOr<std::vector<Instance>> {
                                      if (t.generation != res.target.generation)
                                        return absl::AbortedError("the index changed during the call");
                                      return InstancesNamed(db, t, info.symbol->name, true);
                                    }));
      }
      for (const Instance& in : it->second) {
        if (in.module == info.symbol->module && in.addr == info.symbol->addr) site.where.symbol = in;
      }
    }
    out.sites.push_back(std::move(site));
  }
  for (CallerSite& site : f.offline) out.sites.push_back(std::move(site));
  for (CallerSite& site : out.sites) {
    const LineAddress& w = site.where;
    if (w.symbol) site.probe = ProbeTargetAt(*w.symbol, w.offset, w.address);
  }
  // A jump from a copy to its own start is a loop, not a call.
  std::erase_if(out.sites, [&](const CallerSite& site) {
    const std::optional<Instance>& c = site.where.symbol;
    return site.tail_call && c && c->name == k.name && SamePlace(*c, k);
  });
  return out;
}

}  // namespace symdex::query
