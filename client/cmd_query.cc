// symdex which / dups / symbols / inlined: kallsyms-level answers, and where a function was inlined.
#include <fmt/core.h>

#include <map>

#include "client/cli_common.h"
#include "client/help_topics.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

std::string Location(const query::Instance& in) {
  if (in.addr) return Hex(*in.addr);
  return fmt::format("{}+{:#x}", in.section, in.section_offset);
}

std::string SizeText(const query::Instance& in) {
  if (!in.size) return "?";
  return fmt::format("{}{:#x}", in.size_exact ? "" : "~", *in.size);
}

nlohmann::json ToJson(const query::Instance& in) {
  nlohmann::json j = {{"name", in.name},
                      {"module", in.module.empty() ? "vmlinux" : in.module},
                      {"type", std::string(1, in.type)},
                      {"probe", in.probe},
                      {"same_name_total", in.same_name_total},
                      {"same_name_in_module", in.same_name_in_module}};
  j["address"] = in.addr ? nlohmann::json("0x" + Hex(*in.addr)) : nlohmann::json(nullptr);
  j["text_offset"] = in.text_offset ? nlohmann::json(*in.text_offset) : nlohmann::json(nullptr);
  // The symbol text_offset counts from: _text, or _stext where kallsyms lists no _text (arm64).
  if (in.text_offset) j["text_anchor"] = in.text_anchor;
  if (!in.section.empty()) {
    j["section"] = in.section;
    j["section_offset"] = in.section_offset;
    j["init_or_exit"] = in.init_or_exit;
  }
  j["size"] = in.size ? nlohmann::json(*in.size) : nlohmann::json(nullptr);
  j["size_exact"] = in.size_exact;
  if (in.dwarf) {
    j["dwarf"] = {{"function", in.dwarf->function},      {"cu", in.dwarf->cu},
                  {"file", in.dwarf->entry_file},        {"line", in.dwarf->entry_line},
                  {"decl_file", in.dwarf->decl_file},    {"decl_line", in.dwarf->decl_line},
                  {"inline_copy", in.dwarf->inline_copy}};
  } else {
    j["dwarf"] = nullptr;
  }
  if (!in.dwarf_note.empty()) j["dwarf_note"] = in.dwarf_note;
  j["verdict"] = VerdictJson(in.verdict);
  return j;
}

// "drivers/pnp/card.c:186 (decl :184)", with the CU when the code comes from another file
// (a header inline, an #included .c), or the reason there is no DWARF.
std::string SourceText(const query::Instance& in) {
  if (!in.dwarf) return in.dwarf_note.empty() ? "" : "[" + in.dwarf_note + "]";
  const DwarfInfo& d = *in.dwarf;
  std::string out = fmt::format("{}:{}", d.entry_file.empty() ? "?" : d.entry_file, d.entry_line);
  if (!d.decl_file.empty()) {
    out += d.decl_file == d.entry_file ? fmt::format(" (decl :{})", d.decl_line)
                                       : fmt::format(" (decl {}:{})", d.decl_file, d.decl_line);
  }
  if (!d.cu.empty() && d.cu != d.entry_file) out += " in " + d.cu;
  if (d.inline_copy) out += " [out-of-line inline]";
  if (!in.dwarf_note.empty()) out += " [" + in.dwarf_note + "]";
  return out;
}

void PrintInstanceRow(const query::Instance& in, bool show_name, bool reasons) {
  std::string module = in.module.empty() ? "vmlinux" : EscapeControl(in.module);
  std::string probe = in.probe.empty() ? "-" : EscapeControl(in.probe);
  if (in.init_or_exit) probe += " (init/exit)";
  if (show_name) {
    fmt::print("  {:<28} {:<16} {:<22} {} {:>7}  {:<22} {:<17} {}\n", EscapeControl(in.name), module, Location(in),
               in.type, SizeText(in), probe, VerdictText(in.verdict), SourceText(in));
  } else {
    fmt::print("  {:<16} {:<22} {} {:>7}  {:<22} {:<17} {}\n", module, Location(in), in.type, SizeText(in), probe,
               VerdictText(in.verdict), SourceText(in));
  }
  if (reasons && !in.verdict.reason.empty()) fmt::print("      {}\n", in.verdict.reason);
}

struct WhichOptions {
  std::string target;
  std::string name;
  bool exact = false;
  bool fentry = false;  // each copy's fentry verdict on a line of its own
};

// What fentry/fexit by the name does about this copy (query/fentry_verdict.h).
nlohmann::json FentryJson(const query::FentryVerdict& f) {
  return {{"reach", std::string(query::FentryReachName(f.kind))}, {"reason", f.reason}};
}

int RunWhich(const GlobalOptions& g, const WhichOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = (*api)->Ask<query::Which>({.target = o.target, .name = o.name, .exact = o.exact});
  if (!r.ok()) return Fail(g, r.status());
  const TargetInfo* t = &r->target;
  const std::vector<query::Instance>* found = &r->instances;
  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& in : *found) {
      nlohmann::json j = ToJson(in);
      j["fentry"] = FentryJson(in.fentry);
      arr.push_back(std::move(j));
    }
    PrintJson({{"target", t->name}, {"name", o.name}, {"count", found->size()}, {"instances", arr}});
  } else if (found->empty()) {
    fmt::print(stderr, "symdex: no symbol named '{}' in target '{}'\n", EscapeControl(o.name), t->name);
  } else {
    fmt::print("{}: {} instance{} in target '{}'\n", EscapeControl(o.name), found->size(),
               found->size() == 1 ? "" : "s", t->name);
    fmt::print("  {:<28} {:<16} {:<22} {} {:>7}  {:<22} {:<17} {}\n", "NAME", "MODULE", "ADDRESS", "T", "SIZE",
               "KPROBE TARGET", "VERDICT", "SOURCE (entry line, declaration, compilation unit)");
    for (const auto& in : *found) {
      PrintInstanceRow(in, true, true);
      if (o.fentry) {
        fmt::print("      fentry: {}: {}\n", query::FentryReachName(in.fentry.kind), EscapeControl(in.fentry.reason));
      }
    }
  }
  return found->empty() ? kNotFound : kFound;
}

// The kprobe target of the code `off` bytes into `in` (one copy of an inlined function): in
// vmlinux _text+N (_stext+N), KASLR-proof and exact whatever the name; "-" elsewhere.
std::string ProbeAt(const query::Instance& in, uint64_t off) {
  if (in.module.empty() && in.text_offset) return fmt::format("{}+{}", in.text_anchor, *in.text_offset + off);
  if (!in.module.empty() && in.same_name_in_module == 1) {
    return off ? fmt::format("{}:{}+{}", in.module, in.name, off) : fmt::format("{}:{}", in.module, in.name);
  }
  if (!in.module.empty() && in.addr) return fmt::format("{:#x}", *in.addr + off);
  return "-";
}

struct InlinedOptions {
  query::InlinedRequest q;
};

int RunInlined(const GlobalOptions& g, const InlinedOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = (*api)->Ask<query::Inlined>(o.q);
  if (!r.ok()) return Fail(g, r.status());
  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& s : r->sites) {
      nlohmann::json j = {{"caller", s.caller ? ToJson(*s.caller) : nlohmann::json(nullptr)},
                          {"offset", s.offset},
                          {"probe", s.caller ? ProbeAt(*s.caller, s.offset) : "-"},
                          {"file", s.file},
                          {"line", s.line},
                          {"column", s.column},
                          {"inlined_into", s.inlined_into},
                          {"depth", s.depth}};
      arr.push_back(std::move(j));
    }
    PrintJson({{"target", r->target.name},
               {"name", r->name},
               {"count", r->sites.size()},
               {"sites", arr},
               {"notes", r->notes}});
  } else if (r->sites.empty()) {
    fmt::print(stderr, "symdex: '{}' is not inlined anywhere in target '{}'\n", EscapeControl(r->name), r->target.name);
  } else {
    fmt::print("{}: inlined at {} place{} in target '{}' (copies a kprobe on {} does not see)\n",
               EscapeControl(r->name), r->sites.size(), r->sites.size() == 1 ? "" : "s", r->target.name,
               EscapeControl(r->name));
    fmt::print("  {:<40} {:<16} {:<18} {:<17} {:<44} {}\n", "CALLER+OFFSET", "MODULE", "KPROBE TARGET", "VERDICT",
               "CALL SITE", "INLINED INTO");
    for (const auto& s : r->sites) {
      const std::string caller = s.caller ? fmt::format("{}+{:#x}", EscapeControl(s.caller->name), s.offset) : "?";
      const std::string module = !s.caller                  ? "-"
                                 : s.caller->module.empty() ? "vmlinux"
                                                            : EscapeControl(s.caller->module);
      const std::string site = s.file.empty() ? "?"
                               : s.column > 0 ? fmt::format("{}:{}:{}", s.file, s.line, s.column)
                                              : fmt::format("{}:{}", s.file, s.line);
      const std::string into = s.depth > 1 ? fmt::format("{} (depth {})", s.inlined_into, s.depth) : s.inlined_into;
      fmt::print("  {:<40} {:<16} {:<18} {:<17} {:<44} {}\n", caller, module,
                 s.caller ? EscapeControl(ProbeAt(*s.caller, s.offset)) : "-",
                 s.caller ? VerdictText(s.caller->verdict) : "-", site, EscapeControl(into));
    }
  }
  if (!g.json) {
    for (const auto& n : r->notes) fmt::print(stderr, "symdex: note: {}\n", n);
  }
  return r->sites.empty() ? kNotFound : kFound;
}

struct DupsCliOptions {
  std::string target;
  query::DupsOptions q;
};

int RunDups(const GlobalOptions& g, const DupsCliOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = (*api)->Ask<query::ListDuplicates>({o.target, o.q});
  if (!r.ok()) return Fail(g, r.status());
  const TargetInfo* t = &r->target;
  const std::vector<query::DupGroup>* groups = r->groups.get();
  size_t symbols = 0, vmlinux_only = 0;
  for (const auto& gr : *groups) {
    symbols += gr.instances.size();
    bool all_vmlinux = true;
    size_t in_vmlinux = 0;
    for (const auto& in : gr.instances) {
      all_vmlinux &= in.module.empty();
      in_vmlinux += in.module.empty();
    }
    vmlinux_only += in_vmlinux > 1;
    (void)all_vmlinux;
  }
  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& gr : *groups) {
      nlohmann::json inst = nlohmann::json::array();
      for (const auto& in : gr.instances) inst.push_back(ToJson(in));
      arr.push_back({{"name", gr.name}, {"count", gr.instances.size()}, {"instances", inst}});
    }
    PrintJson({{"target", t->name},
               {"types", o.q.all_types ? "all" : "text"},
               {"names", groups->size()},
               {"symbols", symbols},
               {"names_duplicated_within_vmlinux", vmlinux_only},
               {"duplicates", arr}});
  } else {
    for (const auto& gr : *groups) {
      std::map<std::string, int> per;
      for (const auto& in : gr.instances) ++per[in.module.empty() ? "vmlinux" : in.module];
      std::string where;
      size_t shown = 0;
      for (const auto& [m, n] : per) {
        if (++shown > 8) {
          where += fmt::format(", ... {} more modules", per.size() - 8);
          break;
        }
        where +=
            fmt::format("{}{}{}", where.empty() ? "" : ", ", EscapeControl(m), n > 1 ? fmt::format(" x{}", n) : "");
      }
      fmt::print("{} ({}: {})\n", EscapeControl(gr.name), gr.instances.size(), where);
      for (const auto& in : gr.instances) PrintInstanceRow(in, false, false);
    }
    fmt::print("{} duplicated {} names, {} symbols carry them ({} names repeat inside vmlinux) in target '{}'\n",
               groups->size(), o.q.all_types ? "symbol" : "text", symbols, vmlinux_only, t->name);
  }
  return groups->empty() ? kNotFound : kFound;
}

struct SymbolsOptions {
  std::string target;
  std::string module;
  bool all_types = false;
  bool canonical = false;
};

// Every symbol, one per line (TSV) or as a JSON array: for scripts that compare symdex with
// other tools. --canonical: every text instance with its canonical spec (resolve's round trip).
int RunSymbols(const GlobalOptions& g, const SymbolsOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = (*api)->Ask<query::ListSymbols>(
      {o.target, {.module = o.module, .all_types = o.all_types, .canonical = o.canonical}});
  if (!r.ok()) return Fail(g, r.status());
  nlohmann::json arr = nlohmann::json::array();
  for (size_t i = 0; i < r->instances.size(); ++i) {
    const query::Instance& in = r->instances[i];
    if (o.canonical) {
      if (g.json) {
        nlohmann::json j = ToJson(in);
        j["canonical"] = r->canonical[i];
        arr.push_back(std::move(j));
      } else {
        fmt::print("{}\t{}\t{}\n", EscapeControl(r->canonical[i]), Location(in),
                   in.module.empty() ? "vmlinux" : EscapeControl(in.module));
      }
    } else if (g.json) {
      arr.push_back(ToJson(in));
    } else {
      fmt::print("{}\t{}\t{}\t{}\t{}\t{}\t{}\n", Location(in), in.type, EscapeControl(in.name),
                 in.module.empty() ? "vmlinux" : EscapeControl(in.module),
                 in.dwarf ? fmt::format("{}:{}", in.dwarf->entry_file, in.dwarf->entry_line) : "-",
                 in.dwarf ? in.dwarf->cu : "-", in.dwarf ? in.dwarf->function : in.dwarf_note);
    }
  }
  const size_t n = r->instances.size();
  if (g.json) PrintJson({{"target", r->target.name}, {"count", n}, {"symbols", arr}});
  return n ? kFound : kNotFound;
}

}  // namespace

void AddQueryCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto w = std::make_shared<WhichOptions>();
  CLI::App* which = app.add_subcommand("which", "Every instance of a symbol name, with its kprobe target");
  which->add_option("NAME", w->name, "Symbol name as kallsyms shows it (e.g. name_show)")->required();
  AddTargetOptions(which, w->target, "Target to query (default: 'host', or the only one)");
  which->add_flag("--exact", w->exact, "Only NAME itself, not its compiler clones (NAME.isra.0, NAME.cold, ...)");
  which->add_flag("--fentry", w->fentry,
                  "Under each instance, what fentry/fexit by the name does about it (always in --json)");
  which->footer(R"(Columns: module (vmlinux or the module), address (offline modules: section+offset),
nm type, size (~ = distance to the next symbol), and the kprobe_events target the
kernel accepts for exactly that instance: NAME if unique, MOD:NAME if unique in MOD,
_text+N for vmlinux (KASLR-proof), else the absolute address; then its probe VERDICT
(traceable, traceable(kprobe): kprobe events yes, ftrace no; no-fentry, init, blacklisted,
not-code, unknown) from the kernel's own tables, with the reason on the next line.
--fentry adds what a BPF trampoline attached by the name (fentry/fexit, bpftrace kfunc:,
cilium/ebpf AttachTracing) does about each copy, from the BTF and the kernel's own lookup:
reaches (the name attaches here), elsewhere (at another copy, named), attach-fails (the copy
the name resolves to has no fentry call), no-btf (no BTF function of the name), load-order
(the modules' load order decides), unknown (BTF not read).
Exit: 0 found, 1 no such symbol, 2 usage, 3 no index.)");
  which->callback([&g, &exit_code, w] { exit_code = RunWhich(g, *w); });

  auto in = std::make_shared<InlinedOptions>();
  CLI::App* inlined =
      app.add_subcommand("inlined", "Every place a function was inlined: the copies a kprobe on it misses");
  inlined->add_option("NAME", in->q.name, "The function's name in the source (e.g. kfree_skb_reason)")->required();
  AddTargetOptions(inlined, in->q.target, "Target to query (default: 'host', or the only one)");
  inlined->footer(R"(A kprobe or ftrace filter on NAME sees its out-of-line code only ('symdex which NAME');
every copy the compiler inlined elsewhere runs without it. Each row: the function the copy
is in (CALLER+OFFSET of its first instruction), the kprobe target of that instruction,
the caller's probe VERDICT, the call site (file:line:column) and what it was inlined into
directly (another inlined function's copy at depth > 1). --json describes each caller as
'symdex addr' does. From the address maps of vmlinux and of each module with debug info:
vmlinux's places first, then each module's (kprobe target MOD:NAME+OFF where NAME is unique
in MOD, else its address on a live host).
Exit: 0 copies listed, 1 none, 2 usage, 3 no index.)");
  inlined->callback([&g, &exit_code, in] { exit_code = RunInlined(g, *in); });

  auto d = std::make_shared<DupsCliOptions>();
  CLI::App* dups = app.add_subcommand("dups", "Duplicated symbol names, counted over vmlinux + modules");
  AddTargetOptions(dups, d->target, "Target to query (default: 'host', or the only one)");
  dups->add_option("-m,--module", d->q.module, "Only names with an instance in this module ('vmlinux' allowed)");
  dups->add_flag("--all-types", d->q.all_types, "Count every symbol type, not only text (t/T)");
  dups->add_flag("--traceable", d->q.traceable,
                 "Only the instances kprobe events accept (verdict traceable), and the names that have one");
  dups->add_flag("--with-init", d->q.with_init,
                 "Also count module .init/.exit text (init_module, cleanup_module...): plain nm counting");
  dups->footer(R"(Counts as kas_alias did: text symbols over vmlinux + all modules, skipping generated
names (__func__.N, CSWTCH.N, __key.N, __pfx_*, __cfi_*, __UNIQUE_ID_*, ...) and the
[bpf]/[__builtin__*] pseudo-modules, and module .init/.exit text, which is freed after
load (--with-init counts it, as plain nm over the .ko files would). --traceable: only
the instances kprobe events accept (their VERDICT), counts still over every copy.
Exit: 0 duplicates listed, 1 none, 2 usage, 3 no index.)");
  dups->callback([&g, &exit_code, d] { exit_code = RunDups(g, *d); });

  auto so = std::make_shared<SymbolsOptions>();
  CLI::App* syms = app.add_subcommand("symbols", "Every symbol of a target with its source line (TSV or --json)");
  AddTargetOptions(syms, so->target, "Target to query (default: 'host', or the only one)");
  syms->add_option("-m,--module", so->module, "Only this module ('vmlinux' allowed)");
  syms->add_flag("--all-types", so->all_types, "All symbol types, not only text");
  syms->add_flag("--canonical", so->canonical,
                 "Text symbols with their canonical spec (the shortest spec naming exactly that copy)");
  syms->footer(R"(TSV columns: address (or section+offset), type, name, module, entry file:line, compilation
unit, DWARF function name (or why there is none).
Exit: 0 listed, 1 none (a module with no symbols), 2 usage, 3 no index or no such target.)");
  syms->callback([&g, &exit_code, so] { exit_code = RunSymbols(g, *so); });
}

}  // namespace symdex::cli
