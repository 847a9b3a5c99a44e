// `symdex inlined NAME` (the Inlined verb, verbs.h): every place a function's body was copied
// into another, from the address maps of vmlinux and of each module with debug info, each place
// named by the instance holding it.
#include <algorithm>
#include <map>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/query/local_query_impl.h"
#include "server/query/symbol_query.h"
#include "server/store/debuginfo_store.h"
#include "server/store/index_store.h"

namespace symdex::query {

absl::Status Inlined::Check(const InlinedRequest& r) {
  return CheckTargetAndName(r.target, "name", r.name, kMaxSymbolNameLength);
}

namespace {

// A copy inlined into a module: where its map puts it (section, offset into the section).
struct ModuleCopy {
  std::string module, section;
  uint64_t offset = 0;
  debuginfo::InlineCopy copy;
};

// The copies of `name` inlined into each module of `t` that has a debug file and an address map,
// and the modules whose map cannot be read.
absl::Status ModuleInlinedCopies(store::Db& db, const TargetInfo& t, const std::string& dir, const std::string& name,
                                 std::vector<ModuleCopy>& out, std::vector<std::string>& unreadable) {
  ASSIGN_OR_RETURN(auto modules, store::ModuleNames(db, t.id));
  for (const std::string& mod : modules) {
    ASSIGN_OR_RETURN(auto df, store::DebugFileOf(db, t.id, mod));
    if (!df || !df->relocatable) continue;
    auto m = debuginfo::MappedAddrMap::Open(debuginfo::AddrMapPath(dir, df->build_id), df->build_id);
    if (!m.ok()) {
      unreadable.push_back(mod);
      continue;
    }
    for (debuginfo::InlineCopy& c : (*m)->map().InlinedCopies(name)) {
      auto at = (*m)->map().SectionOf(c.addr);
      if (!at) continue;
      out.push_back({mod, std::move(at->first), at->second, std::move(c)});
    }
  }
  return absl::OkStatus();
}

InlinedSite SiteOf(const debuginfo::InlineCopy& c) {
  return InlinedSite{.file = c.call_file,
                     .line = c.call_line,
                     .column = c.call_column,
                     .inlined_into = c.inlined_into,
                     .depth = c.depth};
}

}  // namespace

absl::StatusOr<InlinedAnswer> Inlined::Local(LocalQuery& q, const InlinedRequest& r) {
  struct Found {
    InlinedAnswer answer;
    std::vector<debuginfo::InlineCopy> copies;
    uint64_t slide = 0;  // runtime - link-time (a live kernel's KASLR)
    std::vector<ModuleCopy> module_copies;
    std::vector<InlinedSite> module_sites;  // those not placed by a runtime address
    std::vector<uint64_t> module_addrs;     // the runtime addresses of the others (a live target)
    std::vector<const ModuleCopy*> addressed;
  };
  ASSIGN_OR_RETURN(Found f, q.InTarget(r.target, [&](store::Db& db, const TargetInfo& t) -> absl::StatusOr<Found> {
    Found f;
    f.answer.target = t;
    f.answer.name = r.name;
    const std::string dir = AddrMapDirFor(q.path());
    if (dir.empty()) return f;
    ASSIGN_OR_RETURN(auto vml, store::DebugFileOf(db, t.id, ""));
    if (!vml || vml->relocatable) {
      f.answer.notes.push_back("no debug info for vmlinux: where its functions were inlined is not known");
    } else if (auto m = debuginfo::MappedAddrMap::Open(debuginfo::AddrMapPath(dir, vml->build_id), vml->build_id);
               !m.ok()) {
      f.answer.notes.push_back(
          StrCat("vmlinux's address map cannot be read (", m.status().message(), "): run 'symdex index' again"));
    } else {
      f.copies = (*m)->map().InlinedCopies(r.name);
      f.slide = (t.text_addr && vml->text_addr) ? *t.text_addr - *vml->text_addr : 0;
    }
    std::vector<std::string> unreadable;
    RETURN_IF_ERROR(ModuleInlinedCopies(db, t, dir, r.name, f.module_copies, unreadable));
    if (!unreadable.empty()) {
      f.answer.notes.push_back(StrCat(unreadable.size(), " module address map", unreadable.size() == 1 ? "" : "s",
                                      " cannot be read (", Excerpt(StrJoin(unreadable, ", "), 200),
                                      "): run 'symdex index' again"));
    }
    // A module's copy is named by the runtime address of its section where the target has
    // one (a live host's loaded module), else by the module's symbol at that section offset.
    std::map<std::string, std::shared_ptr<const store::ModuleCodeSymbols>> tables;
    std::map<std::string, std::map<std::string, uint64_t>> bases;
    for (const ModuleCopy& c : f.module_copies) {
      auto [b, fresh] = bases.try_emplace(c.module);
      if (fresh) {
        ASSIGN_OR_RETURN(auto secs, store::ModuleSections(db, t.id, c.module));
        b->second.insert(secs.begin(), secs.end());
      }
      if (auto base = b->second.find(c.section); base != b->second.end()) {
        f.module_addrs.push_back(base->second + c.offset);
        f.addressed.push_back(&c);
        continue;
      }
      std::shared_ptr<const store::ModuleCodeSymbols>& table = tables[c.module];
      if (!table) {
        ASSIGN_OR_RETURN(table, store::LoadModuleCodeSymbols(db, t.id, c.module));
      }
      InlinedSite site = SiteOf(c.copy);
      store::Containment held = table->InSection(c.section, c.offset);
      if (held.symbol) {
        // The instance as `which` gives it: the counts and verdict a definition needs.
        ASSIGN_OR_RETURN(auto all, InstancesNamed(db, t, held.symbol->name, false));
        for (Instance& in : all) {
          if (in.module == c.module && in.section == c.section && in.section_offset == held.symbol->addr) {
            site.caller = std::move(in);
            break;
          }
        }
        site.offset = c.offset - held.symbol->addr;
      }
      f.module_sites.push_back(std::move(site));
    }
    return f;
  }));
  InlinedAnswer& out = f.answer;
  // The instance holding each copy: what `symdex addr` says of its first address.
  constexpr size_t kBatch = 16384;
  std::vector<uint64_t> all;
  all.reserve(f.copies.size() + f.module_addrs.size());
  for (const auto& c : f.copies) all.push_back(c.addr + f.slide);
  all.insert(all.end(), f.module_addrs.begin(), f.module_addrs.end());
  for (size_t from = 0; from < all.size(); from += kBatch) {
    const size_t to = std::min(all.size(), from + kBatch);
    std::vector<uint64_t> addrs(all.begin() + from, all.begin() + to);
    ASSIGN_OR_RETURN(SymbolizeResult s, q.Symbolize(out.target.name, addrs));
    if (s.target.generation != out.target.generation) return absl::AbortedError("the index changed during the call");
    for (size_t i = from; i < to; ++i) {
      const AddressInfo& info = *s.results[i - from];
      InlinedSite site = SiteOf(i < f.copies.size() ? f.copies[i] : f.addressed[i - f.copies.size()]->copy);
      site.caller = info.symbol;
      site.offset = info.offset;
      out.sites.push_back(std::move(site));
    }
  }
  // vmlinux's first, by address (as symbolized above); then the modules', by module, section,
  // the caller's place there and the offset (a copy no symbol holds last).
  for (InlinedSite& s : f.module_sites) out.sites.push_back(std::move(s));
  auto key = [](const InlinedSite& s) {
    const Instance* c = s.caller ? &*s.caller : nullptr;
    return std::make_tuple(c == nullptr, c ? c->module : std::string(), c ? c->section : std::string(),
                           c ? c->addr.value_or(c->section_offset) : 0, s.offset);
  };
  std::sort(out.sites.begin() + static_cast<ptrdiff_t>(f.copies.size()), out.sites.end(),
            [&](const InlinedSite& a, const InlinedSite& b) { return key(a) < key(b); });
  return out;
}

}  // namespace symdex::query
