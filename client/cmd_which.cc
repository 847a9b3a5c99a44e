// symdex which / inlined: every copy of a name, with its kprobe target and verdict; every place a
// function was inlined.
#include <fmt/core.h>

#include "client/cli_common.h"
#include "client/instance_text.h"

namespace symdex::cli {
namespace {

struct WhichOptions {
  std::string target;
  std::string name;
  bool exact = false;
  bool fentry = false;  // each copy's fentry verdict on a line of its own
};

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
      nlohmann::json j = InstanceRowJson(in);
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
      nlohmann::json j = {{"caller", s.caller ? InstanceRowJson(*s.caller) : nlohmann::json(nullptr)},
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

}  // namespace

void AddWhichCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
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
}

}  // namespace symdex::cli
