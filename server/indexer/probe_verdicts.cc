// Step 5b of an index run (steps.h, JudgeProbes): the probe bits (kernel/probe_bits.h) of every
// code symbol, from the kernel's own tables (ingest/probe_tables.h) applied the way the kernel
// applies them:
//  - an fentry site belongs to the symbol kallsyms would name for it: the greatest symbol
//    address not above it, of the same owner (vmlinux, or the module: for an offline module,
//    the same section), every alias at that address alike (kallsyms_lookup_size_offset);
//  - a site is the address ftrace patches (ingest/probe_tables.h, per the file's entry layout);
//    ftrace lists a function when a site is at its entry (x86-64's FTRACE_MCOUNT_MAX_OFFSET: 0,
//    4 with IBT's endbr64; arm64: its second patchable NOP, 4 in or 8 after a BTI) — a site
//    further in is code a dropped weak function left behind, which x86-64 6.1 lists as
//    __ftrace_invalid_address___N and arm64, which has no such limit, lists under the name of
//    the symbol holding it (common/kernel_arch.h);
//  - kprobe events' notrace check (trace_kprobe.c within_notrace_func) passes when any site lies
//    in the symbol's extent, or, for NAME.suffix, in the extent of the first symbol named NAME
//    (the kernel's kprobe_lookup_name: vmlinux first, then modules in order);
//  - a blacklist entry blacklists the symbol holding it; an area, every symbol starting in it
//    and the one holding its start (kprobe_add_area_blacklist); a clone whose base name is
//    blacklisted is refused too (within_kprobe_blacklist);
//  - init text: symbols starting in [_sinittext, _einittext), or in a module's .init* section;
//  - BTF: the code symbols whose name is a function of their owner's BTF (a module's read over
//    vmlinux's strings), which fentry/fexit can name (query/fentry_verdict.h FillFentryVerdicts).
// Areas come from the image when it was read, else from the same symbols in kallsyms/System.map
// (_sinittext, __noinstr_text_start, ...), so init and blacklist verdicts need no debug file.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "server/common/file_util.h"
#include "server/common/kernel_arch.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/files/probe_files.h"
#include "server/indexer/steps.h"
#include "server/ingest/btf.h"
#include "server/ingest/config_text.h"
#include "server/ingest/kallsyms.h"
#include "server/kernel/probe_bits.h"
#include "server/kernel/symbol_spill.h"
#include "server/store/index_store.h"

namespace symdex::indexer {
namespace {

using kernel::SymbolEntry;

// The blacklist areas every architecture has (kernel/kprobes.c), beside the arch's own.
constexpr BoundedText kGenericBlacklist[] = {{"__kprobes_text_start", "__kprobes_text_end", ".kprobes.text"},
                                             {"__noinstr_text_start", "__noinstr_text_end", ".noinstr.text"}};

// The symbols of one address space (vmlinux; a live module; one section of an offline
// module), sorted by address, ties in input order (kallsyms lists aliases in that order).
struct Space {
  std::vector<size_t> syms;
  std::vector<uint64_t> addrs;  // parallel

  // [first, last) of the symbols at the greatest address <= a; first == last: none.
  std::pair<size_t, size_t> Holding(uint64_t a) const {
    size_t hi = static_cast<size_t>(std::upper_bound(addrs.begin(), addrs.end(), a) - addrs.begin());
    if (hi == 0) return {0, 0};
    size_t lo = hi - 1;
    while (lo > 0 && addrs[lo - 1] == addrs[hi - 1]) --lo;
    return {lo, hi};
  }
};

struct Owner {
  int module = -1;
  std::map<std::string, Space, std::less<>> spaces;  // by section ("" = absolute addresses)
  bool fentry_known = false;
};

class Judge {
 public:
  // Judges `syms`, the symbols of t's owners Build is given (t.symbols, or a spilled module's).
  Judge(const kernel::KernelTarget& t, std::vector<SymbolEntry>& syms) : t_(t), syms_(syms) {}

  void Build(const std::vector<int>& owners) {
    for (int m : owners) owners_.emplace(m, Owner{.module = m});
    for (size_t i = 0; i < syms_.size(); ++i) {
      const SymbolEntry& s = syms_[i];
      auto it = owners_.find(s.module);
      if (it == owners_.end()) continue;
      it->second.spaces[s.section].syms.push_back(i);
    }
    for (auto& [m, o] : owners_) {
      for (auto& [sec, sp] : o.spaces) {
        std::stable_sort(sp.syms.begin(), sp.syms.end(),
                         [&](size_t a, size_t b) { return syms_[a].addr < syms_[b].addr; });
        sp.addrs.reserve(sp.syms.size());
        for (size_t i : sp.syms) sp.addrs.push_back(syms_[i].addr);
      }
    }
  }

  Owner& owner(int m) { return owners_.at(m); }

  // Where a table place lands in `o`: its space, its address there, and the lowest address of
  // its section in that space (a symbol below it is of another section and cannot hold it).
  struct Landing {
    Space* space;
    uint64_t addr;
    uint64_t floor;
  };

  // vmlinux adds the KASLR slide; a live module turns (section, offset) into an absolute
  // address through its section bases.
  std::optional<Landing> Locate(Owner& o, const std::string& section, uint64_t addr, uint64_t slide) {
    if (o.module < 0) return Where(o, "", addr + slide, 0);
    if (o.spaces.count(section) && !section.empty()) return Where(o, section, addr, 0);
    const auto& m = t_.modules[static_cast<size_t>(o.module)];
    for (const auto& [name, base] : m.sections) {
      if (name == section) return Where(o, "", base + addr, base);
    }
    return std::nullopt;
  }

  // Holding(a), as kallsyms attributes an address (to the symbol before it, whatever its size),
  // unless that symbol lies below `floor`, the start of the place's own section: a site in text
  // no listed symbol covers (a loaded module's freed .init.text, mapped past its last listed
  // function) must not land on the function before it.
  std::pair<size_t, size_t> Containing(const Space& sp, uint64_t a, uint64_t floor = 0) const {
    auto r = sp.Holding(a);
    if (r.first == r.second || sp.addrs[r.first] < floor) return {r.first, r.first};
    return r;
  }

  void Mark(Space& sp, std::pair<size_t, size_t> r, uint32_t bits) {
    for (size_t k = r.first; k < r.second; ++k) {
      SymbolEntry& s = syms_[sp.syms[k]];
      if (IsCodeSymbolType(s.type)) s.probe |= bits;
    }
  }

  // `layout` (common/kernel_arch.h): how far past the symbol a site is still its own
  // (ftrace_entry_max_offset), and whether a site further in is listed under its name once more
  // (ftrace_names_far_sites). nullptr: an unknown architecture, whose sites count at the symbol.
  void Fentry(Space& sp, uint64_t site, uint64_t floor, const EntryLayout* layout) {
    auto r = Containing(sp, site, floor);
    if (r.first == r.second) return;
    uint32_t bits = kernel::kProbeFentryInside;
    const uint64_t in = site - sp.addrs[r.first];
    if (in <= (layout != nullptr ? layout->ftrace_entry_max_offset : 0)) {
      bits |= kernel::kProbeFentryEntry;
      // A site past the entry that is still the function's own follows a landing pad.
      if (layout != nullptr && layout->kprobe_entry_pad != 0 && in == layout->kprobe_entry_pad) {
        bits |= kernel::kProbeEntryEndbr;
      }
    } else if (layout != nullptr && layout->ftrace_names_far_sites) {
      for (size_t k = r.first; k < r.second; ++k) {
        SymbolEntry& s = syms_[sp.syms[k]];
        if (IsCodeSymbolType(s.type) && kernel::FarFtraceSites(s.probe) < 0xff) {
          s.probe += 1u << kernel::kProbeFarSitesShift;
        }
      }
    }
    Mark(sp, r, bits);
  }

  void Area(Space& sp, uint64_t lo, uint64_t hi, uint32_t bits, bool with_holder, uint64_t floor = 0) {
    if (with_holder) Mark(sp, Containing(sp, lo, floor), bits);
    size_t a = static_cast<size_t>(std::lower_bound(sp.addrs.begin(), sp.addrs.end(), lo) - sp.addrs.begin());
    size_t b = static_cast<size_t>(std::lower_bound(sp.addrs.begin(), sp.addrs.end(), hi) - sp.addrs.begin());
    Mark(sp, {a, b}, bits);
  }

  void Apply(Owner& o, const ingest::ProbeTables& tab, uint64_t slide, bool kernel_records_fentry) {
    // A module without __mcount_loc of a kernel that records fentry sites has none.
    o.fentry_known = tab.fentry_known || (tab.relocatable && kernel_records_fentry);
    for (const auto& p : tab.fentry) {
      if (auto w = Locate(o, p.section, p.addr, slide)) Fentry(*w->space, w->addr, w->floor, tab.layout);
    }
    for (const auto& p : tab.blacklist) {
      if (auto w = Locate(o, p.section, p.addr, slide)) Mark(*w->space, Containing(*w->space, w->addr, w->floor), kBl);
    }
    for (const auto& a : tab.blacklist_areas) {
      if (auto w = Locate(o, a.section, a.lo, slide)) {
        Area(*w->space, w->addr, w->addr + (a.hi - a.lo), kBl, true, w->floor);
        if (a.what == ".noinstr.text") {
          Area(*w->space, w->addr, w->addr + (a.hi - a.lo), kernel::kProbeNoinstr, false);
        }
      }
    }
    for (const auto& a : tab.init_areas) {
      if (auto w = Locate(o, a.section, a.lo, slide)) {
        Area(*w->space, w->addr, w->addr + (a.hi - a.lo), kernel::kProbeInit, false);
      }
    }
  }

  // vmlinux areas from its own symbols, when no image was read: the generic ones and those of
  // `arch` (unknown: .entry.text, which every architecture blacklists).
  void AreasFromSymbols(Owner& o, const KernelArch* arch) {
    auto it = o.spaces.find("");
    if (it == o.spaces.end()) return;
    std::unordered_map<std::string_view, uint64_t> v;
    for (size_t i : it->second.syms) v.emplace(syms_[i].name, syms_[i].addr);
    auto area = [&](std::string_view s, std::string_view e, uint32_t bits, bool holder) {
      auto a = v.find(s), b = v.find(e);
      if (a != v.end() && b != v.end() && b->second > a->second) Area(it->second, a->second, b->second, bits, holder);
    };
    area("_sinittext", "_einittext", kernel::kProbeInit, false);
    for (const BoundedText& b : kGenericBlacklist) {
      area(b.start, b.end, kBl | (b.what == ".noinstr.text" ? kernel::kProbeNoinstr : 0u), true);
    }
    if (arch != nullptr) {
      for (const BoundedText& b : arch->blacklist_areas) area(b.start, b.end, kBl, true);
    } else {
      area("__entry_text_start", "__entry_text_end", kBl, true);
    }
  }

  // Offline modules: symbols of .init* sections are init text whatever the tables say.
  void ModuleInitSections(Owner& o) {
    for (auto& [sec, sp] : o.spaces) {
      if (sec.starts_with(".init")) Mark(sp, {0, sp.syms.size()}, kernel::kProbeInit);
    }
  }

  // kProbeJudged where the fentry sites are known.
  void MarkJudged() {
    for (auto& [m, o] : owners_) {
      if (!o.fentry_known) continue;
      for (auto& [sec, sp] : o.spaces) Mark(sp, {0, sp.syms.size()}, kernel::kProbeJudged);
    }
  }

 private:
  static constexpr uint32_t kBl = kernel::kProbeBlacklisted;

  std::optional<Landing> Where(Owner& o, const std::string& section, uint64_t addr, uint64_t floor) {
    auto it = o.spaces.find(section);
    if (it == o.spaces.end()) return std::nullopt;
    return Landing{&it->second, addr, floor};
  }
  const kernel::KernelTarget& t_;
  std::vector<SymbolEntry>& syms_;
  std::map<int, Owner> owners_;
};

// The verdicts that look across parts, once every part is judged:
//  - NAME.suffix: traceable through its base when the first code symbol named NAME (vmlinux, then
//    the modules in order, as kprobe_lookup_name finds it) has a site inside, and refused when
//    that one is blacklisted;
//  - a compilation unit without a single fentry site: its judged symbols say so.
// Collect sees each judged part's symbols (what it keeps is per name and per unit, not per
// symbol), Next every symbol in order, Fix then changes each symbol that needs it.
class CrossRules {
 public:
  void Collect(const std::vector<SymbolEntry>& syms) {
    for (const SymbolEntry& s : syms) {
      if (!(s.probe & kernel::kProbeJudged)) continue;
      if (IsCodeSymbolType(s.type)) {
        const size_t dot = s.name.find('.');
        if (dot != std::string::npos && dot != 0) bases_.emplace(s.name.substr(0, dot), std::nullopt);
      }
      if (s.debug_file_id && s.src_unit) {
        unit_has_[{*s.debug_file_id, *s.src_unit}] |= (s.probe & kernel::kProbeFentryInside) != 0;
      }
    }
  }
  // The next symbol in order (vmlinux's, then each module's): the first code symbol of each base
  // name sets its bits.
  void Next(char type, std::string_view name, uint32_t probe) {
    if (bases_.empty() || !IsCodeSymbolType(type)) return;
    auto it = bases_.find(name);
    if (it != bases_.end() && !it->second) it->second = probe;
  }
  void Fix(std::vector<SymbolEntry>& syms) const {
    for (SymbolEntry& s : syms) {
      if (!(s.probe & kernel::kProbeJudged)) continue;
      if (IsCodeSymbolType(s.type)) {
        const size_t dot = s.name.find('.');
        if (dot != std::string::npos && dot != 0) {
          auto it = bases_.find(std::string_view(s.name).substr(0, dot));
          if (it != bases_.end() && it->second) {
            const uint32_t base = *it->second;
            if (!(s.probe & kernel::kProbeFentryInside) && (base & kernel::kProbeFentryInside)) {
              s.probe |= kernel::kProbeBaseTraceable;
            }
            if (base & kernel::kProbeBlacklisted) s.probe |= kernel::kProbeBlacklisted;
          }
        }
      }
      if ((s.probe & kernel::kProbeFentryInside) || !s.debug_file_id || !s.src_unit) continue;
      if (auto it = unit_has_.find({*s.debug_file_id, *s.src_unit}); it != unit_has_.end() && !it->second) {
        s.probe |= kernel::kProbeUnitWithoutFentry;
      }
    }
  }

 private:
  std::map<std::string, std::optional<uint32_t>, std::less<>> bases_;  // base name -> its first's bits
  std::map<std::pair<int64_t, int64_t>, bool> unit_has_;
};

// The vmlinux debug file this run (or an earlier one) found: its path and link-time _text.
absl::StatusOr<std::optional<store::DebugFileInfo>> VmlinuxDebugFile(store::Db& db, const kernel::KernelTarget& t) {
  for (const auto& d : t.debuginfo) {
    if (d.module.empty() && d.debug_file_id) return store::FindDebugFileById(db, *d.debug_file_id);
  }
  ASSIGN_OR_RETURN(auto old, store::FindTarget(db, t.name));
  if (!old) return std::optional<store::DebugFileInfo>();
  return store::DebugFileOf(db, old->id, "");
}

// The kernel config (when one was read) selects one entry layout of the architecture by its
// option; the records showed `tab.layout`. "" when they agree or nothing tells, else a warning.
std::string LayoutAgainstConfig(const kernel::KernelTarget& t, const ingest::ProbeTables& tab) {
  const KernelArch* arch = ArchOfMachine(tab.machine);
  if (t.kernel_config.empty() || arch == nullptr) return "";
  auto text = ReadFileBounded(t.kernel_config, size_t{16} << 20);
  if (!text.ok()) return "";
  const EntryLayout* selected = &arch->layouts.back();
  for (const EntryLayout& l : arch->layouts) {
    if (!l.config.empty() && ingest::KernelConfigBool(*text, l.config).value_or(false)) {
      selected = &l;
      break;
    }
  }
  if (selected == tab.layout) return "";
  return StrCat("probe verdicts: vmlinux's ftrace records show the entry layout '", tab.layout->name, "', but ",
                t.kernel_config, " selects '", selected->name, "'; the verdicts follow the records");
}

// The BTF bits of an owner's code symbols (`module`: -1 vmlinux) from its .BTF section `btf`
// ("" when it has none: no BTF functions), read over `base_strings` (a module's, over vmlinux's):
// judged, and a function of its BTF when the BTF has the name. The BTF's own strings, or why it
// could not be read (its symbols stay unjudged).
absl::StatusOr<std::string> JudgeBtf(std::vector<SymbolEntry>& syms, int module, std::string_view btf,
                                     std::string_view base_strings = {}) {
  ingest::BtfInfo info;
  if (!btf.empty()) {
    ASSIGN_OR_RETURN(info, ingest::ReadBtf(btf, base_strings));
  }
  std::unordered_set<std::string_view> names(info.funcs.begin(), info.funcs.end());
  for (SymbolEntry& s : syms) {
    if (s.module != module || !IsCodeSymbolType(s.type)) continue;
    s.probe |= kernel::kProbeBtfJudged | (names.count(s.name) ? kernel::kProbeBtfFunc : 0u);
  }
  return std::move(info.strings);
}

}  // namespace

absl::Status JudgeProbes(store::Db& db, kernel::KernelTarget& t, const PartFilter& want, IndexSummary& sum) {
  // The modules' symbols come out of the spill one module at a time; vmlinux's stay in t.symbols.
  RETURN_IF_ERROR(kernel::SpillModuleSymbols(t));
  std::vector<int> modules;
  for (size_t i = 0; i < t.modules.size(); ++i) {
    if (want(static_cast<int>(i)) && !ingest::IsPseudoModule(t.modules[i].name)) modules.push_back(static_cast<int>(i));
  }
  Judge judge(t, t.symbols);
  judge.Build({-1});  // vmlinux always: clones in modules may need its names
  size_t read = 0, failed = 0;
  std::vector<std::string> failures;

  // vmlinux: its debug file (a vmlinux from the -dbg package has every table), slid by KASLR.
  ASSIGN_OR_RETURN(auto vml, VmlinuxDebugFile(db, t));
  bool vmlinux_read = false;
  bool kernel_records_fentry = false;
  // vmlinux's BTF strings: a module's BTF is read over them.
  std::string vmlinux_btf_strings;
  std::vector<std::string> btf_failures;
  uint16_t machine = 0;  // the kernel's architecture, from the first table read
  if (vml && !vml->path.empty()) {
    auto tab = debuginfo::ReadProbeTablesFile(vml->path);
    if (tab.ok() && !tab->relocatable) {
      uint64_t slide = 0;
      if (t.text_addr && vml->text_addr) slide = *t.text_addr - *vml->text_addr;
      judge.Apply(judge.owner(-1), *tab, slide, false);
      if (auto strings = JudgeBtf(t.symbols, -1, tab->btf); strings.ok()) {
        vmlinux_btf_strings = std::move(*strings);
      } else {
        btf_failures.push_back(StrCat(vml->path, ": ", strings.status().message()));
      }
      kernel_records_fentry = tab->fentry_known;
      machine = tab->machine;
      if (tab->layout != nullptr && tab->fentry_known) {
        sum.entry_layout = std::string(tab->layout->name);
        if (std::string why = LayoutAgainstConfig(t, *tab); !why.empty()) t.warnings.push_back(std::move(why));
      }
      vmlinux_read = true;
      ++read;
    } else {
      ++failed;
      failures.push_back(tab.ok() ? StrCat(vml->path, ": not a linked image") : std::string(tab.status().message()));
    }
  }
  // Modules: the debug file the join used, else the module file itself (an offline kernel's
  // .ko keeps __mcount_loc and its relocations when stripped of debug info).
  std::unordered_map<std::string, const kernel::DebugInfoRecord*> records;
  for (const auto& d : t.debuginfo) {
    if (!d.module.empty() && d.debug_file_id && !d.path.empty()) records[d.module] = &d;
  }
  auto cross = std::make_shared<CrossRules>();  // kept by t.spill->finish for the write
  for (const int m : modules) {
    const kernel::ModuleInfo& mod = t.modules[static_cast<size_t>(m)];
    std::vector<std::string> paths;
    if (auto it = records.find(mod.name); it != records.end()) paths.push_back(it->second->path);
    if (!mod.path.empty()) paths.push_back(mod.path);
    ASSIGN_OR_RETURN(std::vector<SymbolEntry> syms, t.spill->Get(m));
    Judge of_module(t, syms);
    of_module.Build({m});
    Owner& o = of_module.owner(m);
    of_module.ModuleInitSections(o);
    for (const std::string& p : paths) {
      auto tab = debuginfo::ReadProbeTablesFile(p);
      if (tab.ok() && tab->relocatable) {
        of_module.Apply(o, *tab, 0, kernel_records_fentry);
        // A module's BTF names vmlinux's strings: without them it stays unjudged.
        if (tab->btf.empty() || !vmlinux_btf_strings.empty()) {
          if (auto strings = JudgeBtf(syms, m, tab->btf, vmlinux_btf_strings);
              !strings.ok() && btf_failures.size() < 3) {
            btf_failures.push_back(StrCat(p, ": ", strings.status().message()));
          }
        }
        if (machine == 0) machine = tab->machine;
        ++read;
        break;
      }
      if (p == paths.back()) {
        ++failed;
        if (failures.size() < 3) {
          failures.push_back(tab.ok() ? StrCat(p, ": not a module") : std::string(tab.status().message()));
        }
      }
    }
    of_module.MarkJudged();
    cross->Collect(syms);
    if (!syms.empty()) RETURN_IF_ERROR(t.spill->Put(m, syms));
  }
  if (!vmlinux_read) judge.AreasFromSymbols(judge.owner(-1), ArchOfMachine(machine));
  if (machine != 0) t.machine = machine;
  judge.MarkJudged();
  cross->Collect(t.symbols);

  // Across the parts: every symbol in order for the first of each name (the modules' read in
  // brief), then vmlinux's changed here and the modules' on their way to the store.
  for (const SymbolEntry& s : t.symbols) cross->Next(s.type, s.name, s.probe);
  for (const int m : t.spill->Modules()) {
    RETURN_IF_ERROR(
        t.spill->VisitBriefs(m, [&](const kernel::SymbolSpill::Brief& b) { cross->Next(b.type, b.name, b.probe); }));
  }
  cross->Fix(t.symbols);
  t.spill->finish = [cross](std::vector<SymbolEntry>& syms) { cross->Fix(syms); };
  sum.probe_tables_read = read;
  if (!btf_failures.empty()) {
    t.warnings.push_back(StrCat("fentry verdicts: unreadable BTF (", StrJoin(btf_failures, "; "),
                                "); its functions have no fentry verdict"));
  }
  if (failed > 0) {
    t.warnings.push_back(StrCat("probe verdicts: ", failed, " file(s) without readable probe tables (",
                                StrJoin(failures, "; "), failed > failures.size() ? "; ..." : "", ")"));
  }
  return absl::OkStatus();
}

}  // namespace symdex::indexer
