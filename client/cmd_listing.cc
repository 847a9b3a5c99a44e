// symdex dups / symbols: a target's duplicated names counted, and every symbol listed.
#include <fmt/core.h>

#include <map>

#include "client/cli_common.h"
#include "client/instance_text.h"

namespace symdex::cli {
namespace {

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
      for (const auto& in : gr.instances) inst.push_back(InstanceRowJson(in));
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
        nlohmann::json j = InstanceRowJson(in);
        j["canonical"] = r->canonical[i];
        arr.push_back(std::move(j));
      } else {
        fmt::print("{}\t{}\t{}\n", EscapeControl(r->canonical[i]), Location(in),
                   in.module.empty() ? "vmlinux" : EscapeControl(in.module));
      }
    } else if (g.json) {
      arr.push_back(InstanceRowJson(in));
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

void AddListingCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
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
