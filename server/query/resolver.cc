#include "server/query/resolver.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "server/common/kernel_arch.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/kernel/probe_bits.h"
#include "server/store/debuginfo_store.h"

namespace symdex::query {
namespace {

// "a/b/c.c" -> {"c.c", "b/c.c", "a/b/c.c"}
std::vector<std::string> PathSuffixes(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  for (size_t pos = path.size(); pos != std::string::npos && pos > 0;) {
    size_t slash = path.rfind('/', pos - 1);
    out.push_back(slash == std::string::npos ? path : path.substr(slash + 1));
    if (slash == std::string::npos) break;
    pos = slash;
  }
  return out;
}

bool IsCodeInstance(const Instance& in) { return IsCodeSymbolType(in.type); }

std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (!out.empty() && std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
  return out;
}

}  // namespace

bool SpecMatches(const Spec& s, const Instance& in) {
  if (!s.module.empty()) {
    if (s.module == "vmlinux" ? !in.module.empty() : in.module != s.module) return false;
  }
  if (s.at_addr) {
    if (s.at_section.empty()) return in.addr && *in.addr == *s.at_addr;
    return in.section == s.at_section && in.section_offset == *s.at_addr;
  }
  const DwarfInfo* d = in.dwarf ? &*in.dwarf : nullptr;
  if (!s.kas_alias.empty()) {
    if (d == nullptr || d->entry_file.empty() || KasAlias(d->entry_file, d->entry_line) != s.kas_alias) return false;
  }
  if (!s.path.empty()) {
    if (d == nullptr) return false;
    bool ok;
    if (s.line) {
      ok = (PathSuffixMatch(d->entry_file, s.path) && d->entry_line == *s.line) ||
           (PathSuffixMatch(d->decl_file, s.path) && d->decl_line == *s.line);
    } else {
      ok = PathSuffixMatch(d->entry_file, s.path) || PathSuffixMatch(d->decl_file, s.path) ||
           PathSuffixMatch(d->cu, s.path);
    }
    if (!ok) return false;
  }
  if (!s.cu.empty() && (d == nullptr || !PathSuffixMatch(d->cu, s.cu))) return false;
  return true;
}

absl::StatusOr<InstanceSource::List> DbSource::Which(const std::string& name, bool with_clones) {
  ASSIGN_OR_RETURN(auto v, InstancesNamed(db_, t_, name, with_clones));
  return std::make_shared<const std::vector<Instance>>(std::move(v));
}

absl::StatusOr<store::Containment> DbSource::Containing(uint64_t addr) {
  return store::SymbolContaining(db_, t_.id, addr);
}

absl::StatusOr<std::vector<Match>> MatchSpec(store::Db& db, const TargetInfo& t, const Spec& spec,
                                             std::vector<Instance>* candidates) {
  DbSource src(db, t);
  return MatchSpec(src, t, spec, candidates);
}

absl::StatusOr<std::vector<Match>> MatchSpec(InstanceSource& src, const TargetInfo& t, const Spec& spec,
                                             std::vector<Instance>* candidates, std::string* group) {
  std::vector<Match> out;
  // _text+N (or the target's anchor: _stext+N on arm64) names an address (the form perf probe -D
  // and symdex kprobe print): resolve it to the function there, as for 0xADDR.
  const std::optional<uint64_t> base = spec.name == t.text_anchor ? t.AnchorAddr()
                                       : spec.name == "_text"     ? t.text_addr
                                                                  : std::nullopt;
  if (!spec.address && base && spec.offset && spec.module.empty() && spec.path.empty() && spec.kas_alias.empty() &&
      !spec.at_addr && spec.cu.empty()) {
    Spec as_address;
    as_address.address = *base + spec.offset;
    return MatchSpec(src, t, as_address, candidates, group);
  }
  if (spec.address) {
    ASSIGN_OR_RETURN(store::Containment found, src.Containing(*spec.address));
    // Exactly at a region's end label: that label's instance (its verdict says what a probe
    // there meets), though no function holds the address.
    if (!found.symbol && !found.end_label) return out;
    const store::SymbolRecord* hit = found.symbol ? &*found.symbol : &*found.end_label;
    ASSIGN_OR_RETURN(auto all, src.Which(hit->name, false));
    if (group) *group = hit->name;
    for (const auto& in : *all) {
      if (in.addr && hit->addr == *in.addr && in.module == hit->module) {
        out.push_back({in, *spec.address - hit->addr});
        break;
      }
    }
    if (candidates) {
      candidates->clear();
      for (const auto& in : *all) {
        if (IsCodeInstance(in)) candidates->push_back(in);
      }
    }
    return out;
  }
  if (group) *group = spec.name;
  ASSIGN_OR_RETURN(auto list, src.Which(spec.name, false));
  std::vector<const Instance*> cands;
  for (const auto& in : *list) {
    if (IsCodeInstance(in)) cands.push_back(&in);
  }
  if (cands.empty()) {  // a source name whose only copies are clones: name_show -> name_show.cold
    ASSIGN_OR_RETURN(list, src.Which(spec.name, true));
    for (const auto& in : *list) {
      if (IsCodeInstance(in)) cands.push_back(&in);
    }
  }
  for (const Instance* in : cands) {
    if (SpecMatches(spec, *in)) out.push_back({*in, spec.offset});
  }
  if (candidates) {
    candidates->clear();
    for (const Instance* in : cands) candidates->push_back(*in);
  }
  return out;
}

std::string CanonicalSpec(const Instance& in, const std::vector<Instance>& same_name) {
  // A name the spec grammar cannot say (the linker's erratum veneers, "e843419@0770_0000bb36_12e4"):
  // its address names it, when the target has one.
  if (in.name.find_first_of("@#:+ \t") != std::string::npos) {
    auto parsed = ParseSpec(in.name);
    const bool bare = parsed.ok() && parsed->name == in.name && !parsed->address && parsed->module.empty() &&
                      parsed->path.empty() && !parsed->line && parsed->kas_alias.empty() && !parsed->at_addr &&
                      parsed->at_section.empty() && parsed->cu.empty() && parsed->offset == 0;
    if (!bare && in.addr) {
      Spec a;
      a.address = *in.addr;
      return FormatSpec(a);
    }
  }
  Spec base;
  base.name = in.name;
  auto same = [&](const Instance& a) {
    return a.module == in.module && a.addr == in.addr && a.section == in.section &&
           a.section_offset == in.section_offset && a.name == in.name;
  };
  // A name no other instance carries: the bare name is the shortest try and matches only `in`
  // (what the search below returns first, without building the others — most names are unique).
  if (same_name.size() == 1 && same(same_name[0])) return FormatSpec(base);
  std::vector<Spec> tries;
  std::vector<std::string> modules = {""};
  modules.push_back(in.module.empty() ? "vmlinux" : in.module);
  std::vector<std::string> files, cus;
  int64_t line = 0;
  if (in.dwarf) {
    files = PathSuffixes(in.dwarf->entry_file);
    cus = PathSuffixes(in.dwarf->cu);
    line = in.dwarf->entry_line;
  }
  cus.insert(cus.begin(), "");
  for (const auto& m : modules) {
    for (const auto& cu : cus) {
      Spec s = base;
      s.module = m;
      s.cu = cu;
      tries.push_back(s);
      for (const auto& f : files) {
        s.path = f;
        s.line.reset();
        tries.push_back(s);
        if (line > 0) {
          s.line = line;
          tries.push_back(s);
        }
      }
    }
  }
  std::vector<std::pair<size_t, std::string>> ordered;
  ordered.reserve(tries.size());
  for (const Spec& t : tries) {
    std::string f = FormatSpec(t);
    ordered.emplace_back(f.size(), std::move(f));
  }
  std::vector<size_t> idx(tries.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return ordered[a].first < ordered[b].first; });
  for (size_t i : idx) {
    const Spec& s = tries[i];
    int n = 0;
    bool hits_in = false;
    for (const auto& c : same_name) {
      if (!SpecMatches(s, c)) continue;
      ++n;
      hits_in |= same(c);
      if (n > 1) break;
    }
    if (n == 1 && hits_in) return ordered[i].second;
  }
  Spec last = base;
  if (!in.module.empty()) last.module = in.module;
  last.at_section = in.section;
  last.at_addr = in.addr ? *in.addr : in.section_offset;
  return FormatSpec(last);
}

const std::pair<std::string, uint64_t>* SectionHolding(const std::vector<std::pair<std::string, uint64_t>>& sections,
                                                       uint64_t addr) {
  const std::pair<std::string, uint64_t>* best = nullptr;
  for (const auto& s : sections) {
    if (s.second <= addr && (best == nullptr || s.second > best->second)) best = &s;
  }
  return best;
}

absl::StatusOr<std::string> CanonicalSpecFor(store::Db& db, const TargetInfo& t, const Instance& in) {
  ASSIGN_OR_RETURN(auto all, InstancesNamed(db, t, in.name, false));
  std::vector<Instance> group;
  for (auto& c : all) {
    if (IsCodeInstance(c)) group.push_back(std::move(c));
  }
  return CanonicalSpec(in, group);
}

absl::StatusOr<std::vector<std::pair<Instance, std::string>>> AllCanonicalSpecs(store::Db& db, const TargetInfo& t) {
  // A spec is resolved among every code symbol of the name (a module's weak definition too), so
  // each text instance's spec is made against all of them: a name whose only other copy is a W
  // symbol in another module is no bare name.
  ASSIGN_OR_RETURN(auto all, AllInstances(db, t, true));
  std::unordered_map<std::string, std::vector<size_t>> by_name;
  for (size_t i = 0; i < all.size(); ++i) {
    if (IsCodeInstance(all[i])) by_name[all[i].name].push_back(i);
  }
  std::vector<std::pair<Instance, std::string>> out;
  out.reserve(all.size());
  for (const auto& [name, idx] : by_name) {
    std::vector<Instance> group;
    for (size_t i : idx) group.push_back(all[i]);
    for (const auto& in : group) {
      if (IsTextSymbolType(in.type)) out.emplace_back(in, CanonicalSpec(in, group));
    }
  }
  return out;
}

absl::StatusOr<AddressInfo> SymbolizeAddress(store::Db& db, const TargetInfo& t, debuginfo::Symbolizer& sym,
                                             uint64_t addr) {
  DbSource src(db, t);
  return SymbolizeAddress(
      src,
      [&](const std::string& module) -> absl::StatusOr<std::shared_ptr<const store::DebugFileInfo>> {
        ASSIGN_OR_RETURN(auto df, store::DebugFileOf(db, t.id, module));
        if (!df) return nullptr;
        return std::make_shared<const store::DebugFileInfo>(std::move(*df));
      },
      [&](const std::string& module) { return store::ModuleSections(db, t.id, module); }, t, sym, addr);
}

std::string_view PaddedFunction(const Instance& in) {
  if (!IsCodeSymbolType(in.type)) return {};
  for (std::string_view prefix : {"__pfx_", "__cfi_"}) {
    if (in.name.size() > prefix.size() && std::string_view(in.name).starts_with(prefix)) {
      return std::string_view(in.name).substr(prefix.size());
    }
  }
  return {};
}

std::string PaddingNote(std::string_view padded) {
  return StrCat("function padding before ", padded, " (no source line)");
}

uint64_t CodeOffset(const TargetInfo& t, const Instance& in, uint64_t offset) {
  const KernelArch* arch = ArchOfMachine(t.machine);
  if (arch != nullptr && arch->entry_pad_words != 0 && (in.verdict.bits & kernel::kProbeFentryEntry) &&
      offset < arch->EntryPad()) {
    return arch->EntryPad();
  }
  return offset;
}

absl::StatusOr<AddressInfo> SymbolizeAddress(InstanceSource& src, const DebugFileLookup& debug_file_of,
                                             const SectionLookup& sections_of, const TargetInfo& t,
                                             debuginfo::Symbolizer& sym, uint64_t addr) {
  AddressInfo out;
  // The symbol row alone (no per-name counts: a stack frame does not need them, and gathering
  // every same-named symbol per address would dominate a batch).
  ASSIGN_OR_RETURN(store::Containment found, src.ContainingBrief(addr));
  if (!found.symbol) {
    out.note = std::move(found.why);
    return out;
  }
  const store::SymbolRecord* hit = &*found.symbol;
  out.symbol = InstanceOf(t, *hit);
  out.offset = addr - hit->addr;
  const Instance& in = *out.symbol;
  if (std::string_view padded = PaddedFunction(in); !padded.empty()) {
    // No source line: the line table's row there is the end of the function before.
    out.note = PaddingNote(padded);
    return out;
  }
  addr = hit->addr + CodeOffset(t, in, out.offset);
  ASSIGN_OR_RETURN(auto df, debug_file_of(in.module));
  absl::StatusOr<std::vector<Frame>> frames = std::vector<Frame>();
  if (df && !df->relocatable) {
    uint64_t slide = (t.text_addr && df->text_addr) ? *t.text_addr - *df->text_addr : 0;
    frames = sym.SymbolizeLinked(df->path, df->build_id, addr - slide);
  } else if (df && in.addr) {
    // A loaded module: the section holding addr (the highest base at or below it), then the
    // offset into it in the module's relocatable DWARF.
    ASSIGN_OR_RETURN(auto sections, sections_of(in.module));
    if (const auto* best = SectionHolding(sections, addr)) {
      frames = sym.SymbolizeInSection(df->path, df->build_id, best->first, addr - best->second);
    } else {
      frames = absl::NotFoundError("no section base recorded for this module (offline target?)");
    }
  }
  if (df && frames.ok() && (!df->relocatable || in.addr)) {
    out.frames = std::move(*frames);
    // The outermost frame is the symbol itself: show its kallsyms name, clone suffix and all
    // (name_show.cold, memremap_is_efi_data.constprop.0), as stack traces and perf do.
    if (!out.frames.empty() && in.name.starts_with(out.frames.back().function + ".")) {
      out.frames.back().function = in.name;
    }
    // No DW_TAG_subprogram here (assembly, static-call trampolines): name it by its symbol,
    // as llvm-symbolizer does from the symbol table.
    if (out.frames.empty()) out.frames.push_back({in.name, "", 0, 0});
    if (out.frames.back().function.empty()) out.frames.back().function = in.name;
    return out;
  }
  if (!frames.ok()) {
    out.note = std::string(frames.status().message());
  } else if (df) {
    out.note = "module symbol without an address (offline target): function and line from the index";
  } else {
    out.note = "no debug info for this vmlinux/module";
  }
  // Fall back to what the index knows: the function and the line at the symbol's start (the
  // whole row, unless this one already has its line: a brief one has no DWARF columns).
  if (in.dwarf && in.dwarf->entry_line == 0 && out.offset == 0) {
    ASSIGN_OR_RETURN(auto full, src.Containing(addr));
    if (full.symbol) out.symbol = InstanceOf(t, *full.symbol);
  }
  if (in.dwarf && in.dwarf->entry_line > 0 && out.offset == 0) {
    out.frames.push_back({in.dwarf->has_function ? in.dwarf->function : in.name, in.dwarf->entry_file,
                          static_cast<int>(in.dwarf->entry_line), 0});
  }
  return out;
}

std::string ProbeEventName(const Instance& in, const KprobeOptions& opts) {
  return opts.event.empty() ? DefaultEventName(in) : opts.event;
}

absl::Status CheckReturnProbe(const Match& m, const KprobeOptions& opts) {
  if (opts.ret && m.offset) return absl::InvalidArgumentError("a return probe (-r) needs offset 0");
  return absl::OkStatus();
}

std::string DefaultEventName(const Instance& in) {
  std::string ev = Sanitize(in.name);
  if (in.same_name_total > 1) {
    if (in.dwarf && !in.dwarf->entry_file.empty()) {
      std::string file = in.dwarf->entry_file.substr(in.dwarf->entry_file.rfind('/') + 1);
      ev += "_" + Sanitize(file) + "_" + std::to_string(in.dwarf->entry_line);
    } else if (!in.module.empty()) {
      ev += "_" + Sanitize(in.module);
    }
  }
  if (ev.size() > 63) ev.resize(63);
  return ev;
}

absl::StatusOr<std::string> KprobeDefinition(const Match& m, const KprobeOptions& o) {
  const Instance& in = m.instance;
  std::string target;
  if (in.same_name_total == 1) {
    target = in.name;
    if (m.offset) target += StrCat("+", m.offset);
  } else if (!in.module.empty() && in.same_name_in_module == 1) {
    target = StrCat(in.module, ":", in.name);
    if (m.offset) target += StrCat("+", m.offset);
  } else if (in.module.empty() && in.text_offset) {
    target = StrCat(in.text_anchor, "+", *in.text_offset + m.offset);
  } else if (in.addr) {
    target = fmt::format("0x{:x}", *in.addr + m.offset);
  } else {
    return absl::FailedPreconditionError(
        StrCat(in.module, ":", in.name, " occurs ", in.same_name_in_module,
               " times inside its module and the module is not loaded in this target: no kprobe form names exactly "
               "this copy. Index the live host (with the module loaded) and use its address."));
  }
  RETURN_IF_ERROR(CheckReturnProbe(m, o));
  std::string line = StrCat(o.ret ? "r" : "p", ":", o.group, "/", ProbeEventName(in, o), " ", target);
  for (const auto& a : o.fetchargs) line += " " + a;
  return line;
}

}  // namespace symdex::query
