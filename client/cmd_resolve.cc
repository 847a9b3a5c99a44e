// The resolve verbs: resolve, ftrace-index, kallsyms --aliases, help specs (kprobe and vars:
// cmd_kprobe.cc), and what they share with kprobe: a match as JSON, a resolution reported.
#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

#include "client/cli_common.h"
#include "client/help_topics.h"
#include "client/resolve_report.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"

namespace symdex::cli {
namespace {

struct ResolveOptions {
  std::string target;
  std::vector<std::string> specs;
};

std::string Where(const query::Instance& in) {
  if (in.addr) return fmt::format("0x{:016x}", *in.addr);
  return fmt::format("{}+{:#x}", in.section, in.section_offset);
}

std::string SourceOf(const query::Instance& in) {
  if (!in.dwarf) return in.dwarf_note.empty() ? "-" : "[" + in.dwarf_note + "]";
  std::string s = fmt::format("{}:{}", in.dwarf->entry_file.empty() ? "?" : in.dwarf->entry_file, in.dwarf->entry_line);
  if (!in.dwarf->cu.empty() && in.dwarf->cu != in.dwarf->entry_file) s += " in " + in.dwarf->cu;
  return s;
}

}  // namespace

nlohmann::json InstanceJson(const query::Instance& in, uint64_t offset, const std::string& canonical) {
  nlohmann::json j = {{"name", in.name},
                      {"module", in.module.empty() ? "vmlinux" : in.module},
                      {"type", std::string(1, in.type)},
                      {"offset", offset},
                      {"canonical", canonical},
                      {"probe", in.probe},
                      {"verdict", VerdictJson(in.verdict)}};
  j["address"] = in.addr ? nlohmann::json(fmt::format("0x{:x}", *in.addr + offset)) : nlohmann::json(nullptr);
  j["text_offset"] = in.text_offset ? nlohmann::json(*in.text_offset + offset) : nlohmann::json(nullptr);
  if (in.text_offset) j["text_anchor"] = in.text_anchor;
  if (!in.section.empty()) {
    j["section"] = in.section;
    j["section_offset"] = in.section_offset + offset;
  }
  if (in.dwarf) {
    j["dwarf"] = {{"function", in.dwarf->function},   {"cu", in.dwarf->cu},
                  {"file", in.dwarf->entry_file},     {"line", in.dwarf->entry_line},
                  {"decl_file", in.dwarf->decl_file}, {"decl_line", in.dwarf->decl_line}};
  } else {
    j["dwarf"] = nullptr;
  }
  return j;
}

// Reports one spec's resolution (printed unless json); fills `j` and returns the exit code for it.
int ReportResolve(const std::string& text, absl::StatusOr<query::ResolveResult> r, bool json, nlohmann::json& j,
                  query::ResolveResult* out) {
  j = {{"spec", text}};
  if (!r.ok()) {
    j["status"] = "error";
    j["error"] = std::string(r.status().message());
    if (!json) fmt::print(stderr, "symdex: {}\n", r.status().message());
    // A malformed spec or an unknown target is a usage error; anything else the environment's.
    return r.status().code() == absl::StatusCode::kInvalidArgument ? kAmbiguous : kEnvError;
  }
  const auto& matches = r->matches;
  if (matches.empty()) {
    j["status"] = "not-found";
    if (!json) fmt::print(stderr, "symdex: {}: no function instance matches in target '{}'\n", text, r->target.name);
    if (out) *out = std::move(*r);
    return kNotFound;
  }
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& m : matches) cands.push_back(InstanceJson(m.match.instance, m.match.offset, m.canonical));
  int code = kAmbiguous;
  if (matches.size() == 1) {
    j["status"] = "ok";
    j["instance"] = cands[0];
    if (!json) {
      const auto& m = matches[0].match;
      std::string place =
          m.instance.module.empty() && m.instance.text_offset
              ? fmt::format("{}+{}", m.instance.text_anchor, *m.instance.text_offset + m.offset)
              : m.instance.module + ":" + m.instance.name + (m.offset ? fmt::format("+{:#x}", m.offset) : "");
      fmt::print("{}\t{}\t{}\t{}\t{}\n", EscapeControl(text), Where(m.instance), EscapeControl(place),
                 SourceOf(m.instance), EscapeControl(matches[0].canonical));
    }
    code = kFound;
  } else {
    j["status"] = "ambiguous";
    j["candidates"] = cands;
    if (!json) {
      fmt::print(stderr, "symdex: {} is ambiguous: {} candidates; name one with its canonical spec:\n",
                 EscapeControl(text), matches.size());
      for (const auto& m : matches) {
        fmt::print(stderr, "  {:<60} {:<20} {}\n", EscapeControl(m.canonical), Where(m.match.instance),
                   SourceOf(m.match.instance));
      }
    }
  }
  if (out) *out = std::move(*r);
  return code;
}

// The tracefs directory: `given`, else the first of the usual two that has kprobe_events.
std::string TracefsDir(const std::string& given) {
  if (!given.empty()) return given;
  for (const char* d : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    if (::access((std::string(d) + "/kprobe_events").c_str(), F_OK) == 0) return d;
  }
  return "/sys/kernel/tracing";
}

// Prints why `spec` did not resolve to exactly one instance (json: the resolve object).
void ReportNotUnique(const std::string& spec, const nlohmann::json& j, int code, bool json) {
  if (json) {
    PrintJson(j);
  } else if (code == kAmbiguous && j.contains("candidates")) {
    fmt::print(stderr, "symdex: {} is ambiguous: {} candidates; name one with its canonical spec:\n",
               EscapeControl(spec), j["candidates"].size());
    for (const auto& c : j["candidates"]) {
      fmt::print(stderr, "  {}\n", EscapeControl(c["canonical"].get<std::string>()));
    }
  } else if (j.contains("error")) {
    fmt::print(stderr, "symdex: {}\n", EscapeControl(j["error"].get<std::string>()));
  } else {
    fmt::print(stderr, "symdex: {}: no function instance matches in target '{}'\n", EscapeControl(spec),
               j.value("target", ""));
  }
}

namespace {

// Resolves one spec text; fills `j` and returns the exit code for it.
int ResolveOne(query::QueryApi& api, const std::string& target, const std::string& text, bool json, nlohmann::json& j,
               query::ResolveResult* out = nullptr) {
  return ReportResolve(text, api.Ask<query::Resolve>({.target = target, .spec = text}), json, j, out);
}

int RunResolve(const GlobalOptions& g, const ResolveOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  std::vector<std::string> specs;
  for (const auto& s : o.specs) {
    if (s != "-") {
      specs.push_back(s);
      continue;
    }
    for (std::string line; std::getline(std::cin, line);) {
      std::string_view v = StripWhitespace(line);
      if (!v.empty() && !v.starts_with('#')) specs.emplace_back(v);
    }
  }
  int worst = kFound;
  std::string target_name = o.target;
  JsonArrayOut arr("results");
  for (const auto& s : specs) {
    nlohmann::json j;
    query::ResolveResult r;
    worst = std::max(worst, ResolveOne(**api, o.target, s, g.json, j, &r));
    if (!r.target.name.empty()) target_name = r.target.name;
    if (g.json) arr.Add(j);
  }
  return FinishAnswers(g, **api, o.target, target_name, arr, worst);
}

// Resolves `spec` to exactly one match, printing candidates otherwise.
absl::StatusOr<query::ResolveResult> ResolveUnique(query::QueryApi& api, const std::string& target,
                                                   const std::string& spec, int& code, bool json) {
  nlohmann::json j;
  query::ResolveResult r;
  code = ResolveOne(api, target, spec, /*json=*/true, j, &r);
  if (code == kFound) return r;
  j["target"] = r.target.name;
  ReportNotUnique(spec, j, code, json);
  return absl::NotFoundError("unresolved");
}

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

void AddResolveCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto r = std::make_shared<ResolveOptions>();
  CLI::App* res = app.add_subcommand("resolve", "Resolve function specs to exactly one instance each");
  res->add_option("SPEC", r->specs, "Specs ('symdex help specs'); '-' reads one per line from stdin")->required();
  AddTargetOptions(res, r->target, "Target (default: 'host', or the only one)");
  res->footer(R"(Prints: spec, address, _text+N or MOD:NAME, source line (and CU), canonical spec.
Exit: 0 every spec resolved to one instance, 1 some matched nothing, 2 some were ambiguous
(candidates listed with their canonical specs) or malformed, 3 no index.)");
  res->callback([&g, &exit_code, r] { exit_code = RunResolve(g, *r); });

  AddKprobeCommands(app, g, exit_code);

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

  AddAddrCommands(app, g, exit_code);  // after kallsyms in --help, as before
  AddFramesCommand(app, g, exit_code);
  AddDecodeCommand(app, g, exit_code);
  AddPprofCommand(app, g, exit_code);

  auto topic = std::make_shared<std::string>();
  CLI::App* help = app.add_subcommand("help", "Longer help on a topic: 'symdex help specs'");
  help->add_option("TOPIC", *topic, "The topic")
      ->required()
      ->check(CLI::IsMember(std::vector<std::string>(HelpTopics().begin(), HelpTopics().end())));
  help->callback([&exit_code, topic] {
    fmt::print("{}", HelpTopic(*topic).value_or(""));
    exit_code = kFound;
  });
}

}  // namespace symdex::cli
