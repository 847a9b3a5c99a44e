// symdex ftrace-index / kallsyms: one copy's line in tracefs's available_filter_functions, and a
// kallsyms listing with kas_alias-style aliases for the duplicated names.
#include <fmt/core.h>

#include <algorithm>
#include <utility>

#include "client/cli_common.h"
#include "client/help_topics.h"
#include "client/resolve_report.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"

namespace symdex::cli {
namespace {

struct FtraceOptions {
  std::string target;
  std::string tracefs;
  std::string spec;
  bool force = false;
};

// available_filter_functions lists "name" or "name [module]" per line; its 1-based line number
// selects one function in set_ftrace_filter. With available_filter_functions_addrs (6.5+) the
// address picks the line; otherwise same-named lines of one owner are taken in address order
// (the order ftrace records them in).
int RunFtraceIndex(const GlobalOptions& g, const FtraceOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  int code = 0;
  auto resolved = ResolveUnique(**api, o.target, o.spec, code, g.json);
  if (!resolved.ok()) return code;
  const query::Match* m = &resolved->matches[0].match;
  const query::Instance& in = m->instance;
  if (in.verdict.known() && !in.verdict.ftrace && !o.force) {
    const std::string reason =
        in.verdict.reason.empty() ? std::string(query::ProbeabilityName(in.verdict.kind)) : in.verdict.reason;
    if (g.json) {
      PrintJson({{"status", "refused"},
                 {"function", in.name},
                 {"module", in.module},
                 {"canonical", resolved->matches[0].canonical},
                 {"verdict", VerdictJson(in.verdict)}});
    } else {
      fmt::print(stderr, "symdex: ftrace does not list {}: {} (--force looks anyway)\n",
                 EscapeControl(resolved->matches[0].canonical), reason);
    }
    return kRefused;
  }
  std::string dir = TracefsDir(o.tracefs);
  auto text = ReadFileBounded(dir + "/available_filter_functions", size_t{256} << 20);
  if (!text.ok()) return Fail(g, text.status());
  const std::string tag = in.module.empty() ? "" : "[" + in.module + "]";
  std::vector<size_t> lines;  // 1-based line numbers naming this function in this owner
  size_t n = 0;
  for (std::string_view l : Split(*text, '\n', false)) {
    if (l.empty()) continue;
    ++n;
    auto parts = Split(l, ' ', true);
    if (parts.empty() || parts[0] != in.name) continue;
    std::string_view mod = parts.size() > 1 ? parts[1] : "";
    if (mod == tag) lines.push_back(n);
  }
  if (lines.empty()) {
    return Fail(g, absl::NotFoundError(StrCat(in.name, tag.empty() ? "" : " " + tag,
                                              " is not in available_filter_functions (notrace, inlined, or __init)")));
  }
  size_t index = 0;
  std::string method;
  if (auto addrs = ReadFileBounded(dir + "/available_filter_functions_addrs", size_t{256} << 20);
      addrs.ok() && in.addr) {
    size_t k = 0;
    for (std::string_view l : Split(*addrs, '\n', false)) {
      if (l.empty()) continue;
      ++k;
      auto parts = Split(l, ' ', true);
      if (parts.size() >= 2 && parts[1] == in.name) {
        const uint64_t a = ParseHex(parts[0], HexPrefix::kNone).value_or(0);
        // The ftrace site may sit after the symbol start (__fentry__ after endbr64 / padding).
        if (a >= *in.addr && a < *in.addr + in.size.value_or(64)) index = k;
      }
    }
    method = "available_filter_functions_addrs";
  }
  if (index == 0) {
    auto all = (*api)->Ask<query::Which>({.target = o.target, .name = in.name, .exact = true});
    if (!all.ok()) return Fail(g, all.status());
    // ftrace lists only the copies with an fentry call at their entry, and not freed init
    // code: counting any other copy would select a different line. After a copy's own line
    // come the lines of the sites ftrace names after it (arm64: overridden __weak bodies).
    // Positions: absolute addresses, or (offline modules) offsets within one section.
    using Pos = std::pair<std::string, uint64_t>;
    auto pos = [](const query::Instance& c) { return c.addr ? Pos{"", *c.addr} : Pos{c.section, c.section_offset}; };
    std::vector<std::pair<Pos, size_t>> same_owner;  // position, lines ftrace lists for it
    for (const auto& c : all->instances) {
      if (c.module != in.module || !IsCodeSymbolType(c.type) || c.name != in.name) continue;
      const size_t far = c.verdict.far_ftrace_sites();
      if (c.verdict.known() && !c.verdict.ftrace && far == 0 && pos(c) != pos(in)) continue;
      same_owner.emplace_back(pos(c), (c.verdict.known() && !c.verdict.ftrace ? 0 : 1) + far);
    }
    std::sort(same_owner.begin(), same_owner.end());
    const bool one_space = std::all_of(same_owner.begin(), same_owner.end(),
                                       [&](const auto& p) { return p.first.first == pos(in).first; });
    size_t listed = 0, before = 0;
    bool found = false;
    for (const auto& [p, n] : same_owner) {
      if (p == pos(in)) found = true;
      if (!found) before += n;
      listed += n;
    }
    if (!one_space || !found || listed != lines.size()) {
      return Fail(
          g, absl::FailedPreconditionError(StrCat("cannot tell which of the ", lines.size(), " '", in.name,
                                                  "' lines of available_filter_functions is this one", " (", listed,
                                                  " lines ftrace would list for its ", same_owner.size(),
                                                  " copies, no available_filter_functions_addrs)")));
    }
    index = lines[before];
    method = "address order among the same-named functions ftrace lists";
  }
  if (g.json) {
    PrintJson({{"index", index}, {"function", in.name}, {"module", in.module}, {"method", method}});
  } else {
    fmt::print("{}\n", index);
  }
  return kFound;
}

struct KallsymsOptions {
  std::string target;
  bool aliases = false;
  std::string separator = "@";
};

// A kallsyms listing plus kas_alias-compatible alias lines (name@path_c_LINE) for every
// duplicated text symbol, with lines from DWARF.
int RunKallsyms(const GlobalOptions& g, const KallsymsOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto all = (*api)->Ask<query::ListSymbols>({o.target, {.all_types = true, .aliases = o.aliases}});
  if (!all.ok()) return Fail(g, all.status());
  size_t aliases = 0;
  std::string out;
  const bool live = all->target.kind == "live";
  for (size_t i = 0; i < all->instances.size(); ++i) {
    const query::Instance& in = all->instances[i];
    // Offline module symbols have no address to list; a live kernel's addresses the caller may
    // not see read as zeros, as /proc/kallsyms shows them to it.
    if (!in.addr && !live) continue;
    const uint64_t addr = in.addr.value_or(0);
    // (A name with control bytes is listed escaped, as all text output prints it.)
    std::string tag = in.module.empty() ? "" : "\t[" + EscapeControl(in.module) + "]";
    const std::string name = EscapeControl(in.name);
    out += fmt::format("{:016x} {} {}{}\n", addr, in.type, name, tag);
    if (o.aliases && !all->alias[i].empty()) {
      out += fmt::format("{:016x} {} {}{}{}{}\n", addr, in.type, name, o.separator, all->alias[i], tag);
      ++aliases;
    }
  }
  fmt::print("{}", out);
  if (!g.json && o.aliases) fmt::print(stderr, "symdex: {} alias lines\n", aliases);
  return kFound;
}

}  // namespace

void AddKallsymsCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto f = std::make_shared<FtraceOptions>();
  CLI::App* ft = app.add_subcommand("ftrace-index", "The available_filter_functions index selecting one instance");
  ft->add_option("SPEC", f->spec, "A spec ('symdex help specs')")->required();
  AddTargetOptions(ft, f->target, "Target (default: 'host'); must be this live host");
  ft->add_option("--tracefs", f->tracefs, "tracefs directory (default /sys/kernel/tracing)");
  ft->add_flag("-f,--force", f->force, "Look it up even when its verdict says ftrace does not list it");
  ft->footer(R"(Write the number to set_ftrace_filter: echo $(symdex ftrace-index SPEC) > set_ftrace_filter
Exit: 0 printed, 1 not listed / no match, 2 ambiguous, 3 no index or tracefs, 4 its verdict says
ftrace does not list it (no fentry call at its entry, init text): --force looks anyway.)");
  ft->callback([&g, &exit_code, f] { exit_code = RunFtraceIndex(g, *f); });

  auto ks = std::make_shared<KallsymsOptions>();
  CLI::App* kal = app.add_subcommand("kallsyms", "A kallsyms listing, with kas_alias-style aliases for duplicates");
  kal->add_flag("--aliases", ks->aliases, "Add 'name@path_c_LINE' alias lines for duplicated text symbols");
  kal->add_option("--separator", ks->separator, "Alias separator (default '@')")->check([](const std::string& s) {
    return s.size() == 1 ? std::string() : std::string("the separator is one character");
  });
  AddTargetOptions(kal, ks->target, "Target (default: 'host', or the only one)");
  kal->footer("Exit: 0 listed, 2 usage, 3 no index or no such target.");
  kal->callback([&g, &exit_code, ks] { exit_code = RunKallsyms(g, *ks); });
}

}  // namespace symdex::cli
