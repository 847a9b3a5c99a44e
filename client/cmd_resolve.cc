// symdex resolve: specs to exactly one instance each; and what resolve shares with kprobe, vars,
// callers and ftrace-index (resolve_report.h): a match as JSON, a resolution reported.
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

}  // namespace

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

void AddResolveCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto r = std::make_shared<ResolveOptions>();
  CLI::App* res = app.add_subcommand("resolve", "Resolve function specs to exactly one instance each");
  res->add_option("SPEC", r->specs, "Specs ('symdex help specs'); '-' reads one per line from stdin")->required();
  AddTargetOptions(res, r->target, "Target (default: 'host', or the only one)");
  res->footer(R"(Prints: spec, address, _text+N or MOD:NAME, source line (and CU), canonical spec.
Exit: 0 every spec resolved to one instance, 1 some matched nothing, 2 some were ambiguous
(candidates listed with their canonical specs) or malformed, 3 no index.)");
  res->callback([&g, &exit_code, r] { exit_code = RunResolve(g, *r); });
}

}  // namespace symdex::cli
