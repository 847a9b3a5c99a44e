// The verbs about exactly one copy: `symdex kprobe` (a definition for it, in kprobe_events' or
// another tracer's syntax, written to tracefs without -n), `symdex vars` (what perf probe -V
// lists, for it) and `symdex callers` (who calls it).
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
#include <optional>
#include <set>

#include "client/cli_common.h"
#include "client/resolve_report.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"

namespace symdex::cli {
namespace {

// Where a function the kernel refuses to probe can be probed instead, as ready commands: the
// places its code was inlined into other functions (statement starts of its entry line, from
// `lines`: vmlinux only) and the entries of those callers when kprobe events accept them.
std::vector<std::string> ProbeableAlternatives(query::QueryApi& api, const std::string& target,
                                               const query::Instance& in) {
  std::vector<std::string> out;
  if (!in.dwarf || in.dwarf->entry_file.empty() || in.dwarf->entry_line <= 0) return out;
  const std::string where = fmt::format("{}:{}", in.dwarf->entry_file, in.dwarf->entry_line);
  if (in.verdict.kind == query::Probeability::kNoFentry && in.verdict.unit_without_fentry()) {
    // Every function of that file is refused alike: nothing inside it to point to.
    return out;
  }
  std::map<std::string, std::string> callers;  // canonical spec -> caller name
  std::set<uint64_t> seen;
  size_t sites = 0;
  // Inlined copies carry the body's lines, not always the entry row's: try both.
  std::vector<std::pair<std::string, int>> probes = {{in.dwarf->entry_file, static_cast<int>(in.dwarf->entry_line)}};
  if (!in.dwarf->decl_file.empty() && in.dwarf->decl_line > 0) {
    for (int d = 1; d <= 2; ++d) probes.push_back({in.dwarf->decl_file, static_cast<int>(in.dwarf->decl_line) + d});
  }
  for (const auto& [file, line] : in.module.empty() ? probes : decltype(probes){}) {
    auto lines = api.Ask<query::Lines>({.target = target, .file = file, .line = line});
    if (!lines.ok()) continue;
    for (const query::LineAddress& info : lines->addresses) {
      if (!info.symbol || !info.symbol->text_offset) continue;
      const query::Instance& caller = *info.symbol;
      if (caller.addr == in.addr || caller.name == in.name) continue;  // an out-of-line copy
      bool inlined = false;
      for (const auto& f : info.frames) inlined |= f.function == in.dwarf->function;
      if (!inlined || !caller.verdict.kprobe) continue;
      const uint64_t at = *caller.text_offset + info.offset;
      if (!seen.insert(at).second) continue;
      if (sites < 8) {
        out.push_back(fmt::format("symdex kprobe -n {}+{}    # inlined into {}+{:#x}", caller.text_anchor, at,
                                  caller.name, info.offset));
        ++sites;
      }
      if (callers.size() < 5) {
        auto r = api.Ask<query::Resolve>(
            {.target = target, .spec = fmt::format("{}+{}", caller.text_anchor, *caller.text_offset)});
        if (r.ok() && r->matches.size() == 1) callers.emplace(r->matches[0].canonical, caller.name);
      }
    }
  }
  for (const auto& [spec, name] : callers) {
    out.push_back(fmt::format("symdex kprobe -n {}    # entry of {}, which inlines it", spec, name));
  }
  if (out.empty())
    out.push_back(fmt::format("symdex lines {}    # its statements, and where they were inlined", where));
  return out;
}

struct KprobeCliOptions {
  std::string target;
  bool dry_run = false;
  bool force = false;
  std::string event;  // GRP/EVENT or EVENT
  bool ret = false;
  std::string tracefs;
  std::string format = "kprobe_events";
  std::optional<int> line, rel_line;
  bool inlined = false;
  std::vector<std::string> args;  // SPEC FETCHARGS...
};

// The definitions a probe result carries: one per place of a line, else the one.
std::vector<std::string> Definitions(const query::ProbeResult& p) {
  if (p.places.empty()) return {p.kprobe};
  std::vector<std::string> out;
  for (const auto& place : p.places) out.push_back(place.kprobe);
  return out;
}

// What --json adds for a line's places.
void AddPlacesJson(const query::ProbeResult& p, nlohmann::json& j) {
  if (p.places.empty()) return;
  nlohmann::json places = nlohmann::json::array();
  for (const auto& place : p.places) {
    places.push_back({{"offset", place.offset}, {"definition", place.kprobe}, {"notes", place.notes}});
  }
  j["line"] = {{"file", p.line_file}, {"line", p.line}};
  j["places"] = std::move(places);
}

// How many instances of m's name are declared in m's own DWARF declaration file (0: unknown).
size_t SameDeclFile(query::QueryApi& api, const std::string& target, const query::Instance& in) {
  if (!in.dwarf || in.dwarf->decl_file.empty()) return 0;
  auto all = api.Ask<query::Which>({.target = target, .name = in.name, .exact = true});
  if (!all.ok()) return 0;
  return std::count_if(all->instances.begin(), all->instances.end(),
                       [&](const query::Instance& i) { return i.dwarf && i.dwarf->decl_file == in.dwarf->decl_file; });
}

// A probe definition that would carry a control byte (a name the kernel keeps with one, and no
// address form for that copy: a module not loaded in this target) is refused, never printed or
// written: exit 4, as for a copy the tracer has no form for.
int RefuseControlByte(const GlobalOptions& g, const TargetInfo& t, const query::Match& m, std::string_view format) {
  const query::Instance& in = m.instance;
  const std::string who = EscapeControl(in.module.empty() ? in.name : in.module + ":" + in.name);
  const std::string message =
      StrCat(who, ": its name holds a control byte, which a probe definition never carries, and no address names ",
             "this copy in target '", t.name, "'",
             in.module.empty() ? "" : " (its module is not loaded there: index the live host with it loaded)");
  if (g.json) {
    PrintJson({{"target", t.name},
               {"status", "no-form"},
               {"format", std::string(format)},
               {"message", message},
               {"instance", InstanceJson(in, m.offset, "")}});
  } else {
    fmt::print(stderr, "symdex: {}\n", message);
  }
  return kRefused;
}

// A tracer that has no form for exactly this copy (at `offset`): exit 4, saying why.
int RefuseNoForm(const GlobalOptions& g, query::TracerSyntax syntax, const query::Match& m, const TargetInfo& t,
                 const absl::Status& why, const std::string& kprobe, uint64_t offset) {
  if (g.json) {
    PrintJson({{"target", t.name},
               {"status", "no-form"},
               {"format", std::string(query::TracerSyntaxName(syntax))},
               {"message", std::string(why.message())},
               {"kprobe_events", kprobe},
               {"instance", InstanceJson(m.instance, offset, "")}});
  } else {
    fmt::print(stderr, "symdex: {}\n", why.message());
  }
  return kRefused;
}

// `at`'s form in `syntax`, its fetch args those of `kprobe`, symdex's kprobe_events definition of
// it; none when the tracer has no form for it or the form would carry a control byte, the refusal
// printed (naming `m`, the copy asked for) and its exit code in `refused`.
std::optional<query::ProbeForm> TracerFormAt(const GlobalOptions& g, query::TracerSyntax syntax, const query::Match& m,
                                             const query::Match& at, const TargetInfo& t, query::KprobeOptions here,
                                             const std::string& kprobe, size_t same_file, int& refused) {
  here.fetchargs = query::TracerFetchArgs(syntax, here.fetchargs, kprobe);
  auto form = query::FormFor(syntax, at, t, here, same_file);
  if (!form.ok()) {
    refused = absl::IsFailedPrecondition(form.status())
                  ? RefuseNoForm(g, syntax, m, t, form.status(), kprobe, at.offset)
                  : Fail(g, form.status());
    return std::nullopt;
  }
  if (HasControlByte(form->text)) {
    refused = RefuseControlByte(g, t, m, query::TracerSyntaxName(syntax));
    return std::nullopt;
  }
  return std::move(*form);
}

// A line's places in another tracer's syntax: one form each, or the first refusal.
int PrintTracerPlaces(const GlobalOptions& g, query::TracerSyntax syntax, const query::KprobeOptions& ko,
                      const query::ProbeResult& probe, size_t same_file) {
  const query::Match& m = probe.resolved.matches[0].match;
  const TargetInfo& t = probe.resolved.target;
  std::vector<query::ProbeForm> forms;
  for (const auto& place : probe.places) {
    query::Match at = m;
    at.offset = place.offset;
    query::KprobeOptions here = ko;
    here.event = place.event;
    int refused = 0;
    auto form = TracerFormAt(g, syntax, m, at, t, here, place.kprobe, same_file, refused);
    if (!form) return refused;
    forms.push_back(std::move(*form));
  }
  if (g.json) {
    nlohmann::json j = {{"target", t.name}, {"format", std::string(query::TracerSyntaxName(syntax))}};
    nlohmann::json places = nlohmann::json::array();
    for (size_t k = 0; k < forms.size(); ++k) {
      places.push_back({{"offset", probe.places[k].offset},
                        {"definition", forms[k].text},
                        {"note", forms[k].note},
                        {"kprobe_events", probe.places[k].kprobe}});
      if (!forms[k].fetch.empty()) places.back()["fetch"] = forms[k].fetch;
    }
    j["line"] = {{"file", probe.line_file}, {"line", probe.line}};
    j["places"] = std::move(places);
    j["instance"] = InstanceJson(m.instance, m.offset, "");
    PrintJson(j);
  } else {
    for (const auto& f : forms) fmt::print("{}{}\n", f.fetch, f.text);
    if (!forms.front().note.empty()) fmt::print(stderr, "symdex: note: {}\n", forms.front().note);
    for (const auto& n : probe.notes) fmt::print(stderr, "symdex: note: {}\n", n);
  }
  return kFound;
}

// The probe in another tracer's syntax (--format): printed, never written to tracefs.
int PrintTracerForm(const GlobalOptions& g, query::QueryApi& api, const KprobeCliOptions& o, query::TracerSyntax syntax,
                    const query::KprobeOptions& ko, const query::ProbeResult& probe) {
  const query::Match& m = probe.resolved.matches[0].match;
  const TargetInfo& t = probe.resolved.target;
  const size_t same_file = syntax == query::TracerSyntax::kPerf && m.instance.same_name_total > 1 &&
                                   m.instance.same_name_in_module != 1 && !(t.kind == "live" && m.instance.addr)
                               ? SameDeclFile(api, o.target, m.instance)
                               : 0;
  if (!probe.places.empty()) return PrintTracerPlaces(g, syntax, ko, probe, same_file);
  int refused = 0;
  auto form = TracerFormAt(g, syntax, m, m, t, ko, probe.kprobe, same_file, refused);
  if (!form) return refused;
  if (g.json) {
    nlohmann::json j = {
        {"target", t.name},
        {"format", std::string(query::TracerSyntaxName(syntax))},
        {"definition", form->text},
        {"note", form->note},
        {"address", form->address ? nlohmann::json("0x" + Hex(*form->address)) : nlohmann::json(nullptr)},
        {"kprobe_events", probe.kprobe},
        {"instance", InstanceJson(m.instance, m.offset, "")}};
    if (!form->fetch.empty()) j["fetch"] = form->fetch;
    PrintJson(j);
  } else {
    fmt::print("{}{}\n", form->fetch, form->text);
    if (!form->note.empty()) fmt::print(stderr, "symdex: note: {}\n", form->note);
  }
  return kFound;
}

// Appends each definition to tracefs' kprobe_events; the file written, or why the kernel refused
// a line (its error_log's last entry).
absl::StatusOr<std::string> WriteKprobeEvents(const std::string& tracefs, const std::vector<std::string>& definitions) {
  std::string dir = TracefsDir(tracefs);
  std::string path = dir + "/kprobe_events";
  for (const std::string& def : definitions) {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return absl::FailedPreconditionError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
    std::string data = def + "\n";
    ssize_t n = ::write(fd, data.data(), data.size());
    int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(data.size())) {
      std::string reason;
      if (auto log = ReadFileBounded(dir + "/error_log", 1 << 20); log.ok() && !log->empty()) {
        std::string_view l = StripWhitespace(*log);
        size_t last = l.rfind('[');
        reason = std::string(last == std::string::npos ? l : l.substr(last));
      }
      return absl::FailedPreconditionError(
          StrCat("the kernel refused '", def, "': ", std::strerror(err), reason.empty() ? "" : "\n" + reason));
    }
  }
  return path;
}

// `symdex kprobe --inlined NAME[@FILE]`: a definition at each place NAME was inlined.
int RunKprobeInlined(const GlobalOptions& g, const KprobeCliOptions& o, query::TracerSyntax syntax,
                     query::QueryApi& api, const query::KprobeOptions& ko) {
  if (o.ret || o.line || o.rel_line) {
    return Fail(g, absl::InvalidArgumentError(
                       "--inlined probes each place a function's body was inlined, at its first address: it takes "
                       "no -r (an inlined copy has no return of its own) and no line"));
  }
  query::InlinedProbesRequest req{
      .target = o.target, .spec = o.args[0], .group = ko.group, .event = ko.event, .fetchargs = ko.fetchargs};
  auto r = api.Ask<query::InlinedProbes>(req);
  if (!r.ok()) return FailAnswer(g, r.status());
  const TargetInfo& t = r->target;
  if (r->probes.empty()) {  // every place left out: refused, as one copy's argument that cannot be fetched is
    if (g.json) {
      PrintJson({{"target", t.name},
                 {"status", "refused"},
                 {"name", r->name},
                 {"probes", nlohmann::json::array()},
                 {"left_out", r->left_out},
                 {"notes", r->notes}});
    } else {
      fmt::print(stderr, "symdex: no place {} was inlined at takes this probe; {} left out:\n", r->name,
                 r->left_out.size());
      for (const auto& l : r->left_out) fmt::print(stderr, "  {}\n", l);
      for (const auto& n : r->notes) fmt::print(stderr, "symdex: note: {}\n", n);
    }
    return kRefused;
  }
  std::vector<std::string> definitions;
  std::vector<std::string> fetches;  // parallel: libbpf with arguments, each place's C struct of fetches
  std::vector<std::string> notes;
  auto named = query::ProbeArgsAreNamed(ko.fetchargs);
  if (!named.ok()) return Fail(g, named.status());
  for (const auto& p : r->probes) {
    if (syntax == query::TracerSyntax::kKprobeEvents) {
      definitions.push_back(p.kprobe);
      fetches.emplace_back();
      continue;
    }
    query::KprobeOptions here = ko;
    here.event = p.event;
    here.fetchargs = query::TracerFetchArgs(syntax, ko.fetchargs, p.kprobe);
    const query::Match at{.instance = *p.caller, .offset = p.offset};
    if (*named && syntax == query::TracerSyntax::kPerf) {
      return RefuseNoForm(g, syntax, at, t,
                          absl::FailedPreconditionError(
                              "perf compiles arguments by name in the scope of the function it probes, which is not "
                              "the inlined copy's: use the kprobe_events definition (the default --format)"),
                          p.kprobe, p.offset);
    }
    auto form = query::FormFor(syntax, at, t, here, 0);
    if (!form.ok()) {
      if (!absl::IsFailedPrecondition(form.status())) return Fail(g, form.status());
      return RefuseNoForm(g, syntax, at, t, form.status(), p.kprobe, p.offset);
    }
    if (!form->note.empty()) notes.push_back(form->note);
    definitions.push_back(std::move(form->text));
    fetches.push_back(std::move(form->fetch));
  }
  std::string written;
  if (!o.dry_run && syntax == query::TracerSyntax::kKprobeEvents) {
    if (t.kind != "live") {
      return Fail(g, absl::InvalidArgumentError(StrCat("target '", t.name,
                                                       "' is an offline kernel: use -n to print the "
                                                       "definitions instead of writing them to this host's tracefs")));
    }
    auto path = WriteKprobeEvents(o.tracefs, definitions);
    if (!path.ok()) return Fail(g, path.status());
    written = *path;
  }
  if (g.json) {
    nlohmann::json probes = nlohmann::json::array();
    for (size_t k = 0; k < r->probes.size(); ++k) {
      const auto& p = r->probes[k];
      probes.push_back({{"caller", InstanceJson(*p.caller, p.offset, "")},
                        {"offset", p.offset},
                        {"call_site", {{"file", p.file}, {"line", p.line}, {"column", p.column}}},
                        {"decl_file", p.decl_file},
                        {"event", p.event},
                        {"definition", definitions[k]},
                        {"kprobe_events", p.kprobe},
                        {"notes", p.notes}});
      if (!fetches[k].empty()) probes.back()["fetch"] = fetches[k];
    }
    PrintJson({{"target", t.name},
               {"format", std::string(query::TracerSyntaxName(syntax))},
               {"name", r->name},
               {"written_to", written},
               {"probes", probes},
               {"left_out", r->left_out},
               {"notes", r->notes}});
    return kFound;
  }
  for (size_t k = 0; k < definitions.size(); ++k) {
    fmt::print("{}{}\n", fetches[k], definitions[k]);
    for (const auto& n : r->probes[k].notes) fmt::print(stderr, "symdex: note: {}\n", n);
  }
  for (const auto& n : notes) fmt::print(stderr, "symdex: note: {}\n", n);
  for (const auto& l : r->left_out) fmt::print(stderr, "symdex: left out: {}\n", l);
  for (const auto& n : r->notes) fmt::print(stderr, "symdex: note: {}\n", n);
  return kFound;
}

int RunKprobe(const GlobalOptions& g, const KprobeCliOptions& o) {
  // A malformed argument is told before a missing index.
  auto syntax = query::TracerSyntaxArg(o.format);
  if (!syntax.ok()) return Fail(g, syntax.status());
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  query::KprobeOptions ko;
  ko.ret = o.ret;
  if (!o.event.empty()) {
    size_t slash = o.event.find('/');
    if (slash != std::string::npos) {
      ko.group = o.event.substr(0, slash);
      ko.event = o.event.substr(slash + 1);
    } else {
      ko.event = o.event;
    }
  }
  ko.fetchargs.assign(o.args.begin() + 1, o.args.end());
  ko.line = o.line;
  ko.rel_line = o.rel_line;
  if (o.inlined) return RunKprobeInlined(g, o, *syntax, **api, ko);
  auto probe = (*api)->Ask<query::Probe>({.target = o.target, .spec = o.args[0], .opts = ko});
  if (!probe.ok()) {
    // An argument that exists but cannot be fetched at this address: refused, as a copy the
    // kernel would refuse is (the message names where it can be).
    if (absl::IsOutOfRange(probe.status())) {
      Fail(g, probe.status());
      return kRefused;
    }
    return Fail(g, probe.status());
  }
  if (probe->resolved.matches.size() != 1) {
    nlohmann::json j;
    int code = ReportResolve(o.args[0], probe->resolved, /*json=*/true, j, nullptr);
    j["target"] = probe->resolved.target.name;
    ReportNotUnique(o.args[0], j, code, g.json);
    return code;
  }
  const query::Match* m = &probe->resolved.matches[0].match;
  const TargetInfo* t = &probe->resolved.target;
  const std::string* line = &probe->kprobe;
  const query::ProbeVerdict& verdict = m->instance.verdict;
  if (verdict.known() && !verdict.kprobe) {
    const std::string canonical = probe->resolved.matches[0].canonical;
    if (!o.force) {
      std::vector<std::string> alt = ProbeableAlternatives(**api, o.target, m->instance);
      if (g.json) {
        PrintJson({{"target", t->name},
                   {"status", "refused"},
                   {"definition", *line},
                   {"instance", InstanceJson(m->instance, m->offset, canonical)},
                   {"alternatives", alt}});
      } else {
        fmt::print(stderr, "symdex: the kernel would refuse a kprobe on {}: {}\n", EscapeControl(canonical),
                   EscapeControl(verdict.reason));
        if (!alt.empty()) {
          fmt::print(stderr, "probe-able instead:\n");
          for (const auto& a : alt) fmt::print(stderr, "  {}\n", EscapeControl(a));
        }
        fmt::print(stderr, "(--force prints the definition anyway)\n");
      }
      return kRefused;
    }
    if (!g.json) fmt::print(stderr, "symdex: warning: the kernel would refuse it: {}\n", verdict.reason);
  }
  if (*syntax != query::TracerSyntax::kKprobeEvents) return PrintTracerForm(g, **api, o, *syntax, ko, *probe);
  if (HasControlByte(*line)) return RefuseControlByte(g, *t, *m, "kprobe_events");
  if (t->kind != "live" && !o.dry_run) {
    return Fail(g, absl::InvalidArgumentError(StrCat("target '", t->name,
                                                     "' is an offline kernel: use -n to print the "
                                                     "definition instead of writing it to this host's tracefs")));
  }
  const std::vector<std::string> definitions = Definitions(*probe);
  std::string written;
  if (!o.dry_run) {
    auto path = WriteKprobeEvents(o.tracefs, definitions);
    if (!path.ok()) return Fail(g, path.status());
    written = *path;
  }
  if (g.json) {
    nlohmann::json j = {{"target", t->name},     {"format", "kprobe_events"},
                        {"definition", *line},   {"written_to", written},
                        {"notes", probe->notes}, {"instance", InstanceJson(m->instance, m->offset, "")}};
    AddPlacesJson(*probe, j);
    PrintJson(j);
  } else {
    for (size_t k = 0; k < definitions.size(); ++k) {
      fmt::print("{}\n", definitions[k]);
      if (k < probe->places.size()) {
        for (const auto& n : probe->places[k].notes) fmt::print(stderr, "symdex: note: {}\n", n);
      }
    }
    for (const auto& n : probe->notes) fmt::print(stderr, "symdex: note: {}\n", n);
  }
  return kFound;
}

struct VarsCliOptions {
  query::VarsRequest q;
};

// "+0x10..+0x4a, +0x60..+0x72" from pairs of offsets.
std::string RangesText(const std::vector<uint64_t>& r) {
  std::vector<std::string> parts;
  for (size_t i = 0; i + 1 < r.size(); i += 2) parts.push_back(fmt::format("+{:#x}..+{:#x}", r[i], r[i + 1]));
  return parts.empty() ? "-" : StrJoin(parts, ", ");
}

int RunVars(const GlobalOptions& g, const VarsCliOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = (*api)->Ask<query::Vars>(o.q);
  if (!r.ok()) return FailAnswer(g, r.status());
  const std::string where =
      r->instance ? fmt::format("{}+{:#x}", EscapeControl(r->instance->name), r->offset) : std::string("?");
  if (g.json) {
    nlohmann::json vars = nlohmann::json::array();
    for (const auto& v : r->variables) {
      nlohmann::json ranges = nlohmann::json::array();
      for (size_t i = 0; i + 1 < v.ranges.size(); i += 2) ranges.push_back({v.ranges[i], v.ranges[i + 1]});
      vars.push_back({{"name", v.name},
                      {"type", v.type},
                      {"parameter", v.parameter},
                      {"available", v.available},
                      {"fetch", v.fetch},
                      {"why", v.why},
                      {"ranges", ranges}});
    }
    PrintJson(
        {{"target", r->target.name},
         {"canonical", r->canonical},
         {"offset", r->offset},
         {"instance", r->instance ? InstanceJson(*r->instance, r->offset, r->canonical) : nlohmann::json(nullptr)},
         {"variables", vars}});
    return kFound;
  }
  fmt::print("{} ({}) in target '{}': {} variable{} in scope\n", where, EscapeControl(r->canonical), r->target.name,
             r->variables.size(), r->variables.size() == 1 ? "" : "s");
  fmt::print("  {:<24} {:<32} {:<40} {}\n", "VARIABLE", "TYPE", "FETCH HERE", "WHERE IT HAS A LOCATION (offsets)");
  for (const auto& v : r->variables) {
    fmt::print("  {:<24} {:<32} {:<40} {}\n", (v.parameter ? "" : "(local) ") + v.name, v.type,
               v.available ? v.fetch : "-", RangesText(v.ranges));
  }
  for (const auto& v : r->variables) {
    if (!v.available && !v.why.empty()) fmt::print(stderr, "symdex: note: {}: {}\n", v.name, v.why);
  }
  return kFound;
}

struct CallersCliOptions {
  query::CallersRequest q;
};

// "drivers/pnp/card.c:200:9", and the function the call is written in when the compiler inlined
// it into the caller.
std::string CallPlace(const query::LineAddress& w) {
  if (w.frames.empty()) return "??";
  const Frame& f = w.frames.front();
  std::string s = fmt::format("{}:{}", f.file.empty() ? std::string("??") : f.file, f.line);
  if (f.column) s += fmt::format(":{}", f.column);
  if (w.frames.size() > 1) s += fmt::format(" (in {}, inlined)", f.function);
  return s;
}

int RunCallers(const GlobalOptions& g, const CallersCliOptions& o) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto r = (*api)->Ask<query::Callers>(o.q);
  if (!r.ok()) return FailAnswer(g, r.status());
  if (g.json) {
    nlohmann::json sites = nlohmann::json::array();
    for (const query::CallerSite& s : r->sites) {
      const query::LineAddress& w = s.where;
      nlohmann::json frames = nlohmann::json::array();
      for (const Frame& f : w.frames) {
        frames.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}, {"column", f.column}});
      }
      // 0: no address (an offline module's call, or one not shown to this caller).
      sites.push_back(
          {{"address", w.address ? nlohmann::json(fmt::format("0x{:x}", w.address)) : nlohmann::json(nullptr)},
           {"caller", w.symbol ? InstanceJson(*w.symbol, 0, "") : nlohmann::json(nullptr)},
           {"offset", w.offset},
           {"tail_call", s.tail_call},
           {"frames", frames},
           {"probe", s.probe},
           {"note", w.note}});
    }
    PrintJson({{"target", r->target.name},
               {"canonical", r->canonical},
               {"instance", r->instance ? InstanceJson(*r->instance, 0, r->canonical) : nlohmann::json(nullptr)},
               {"sites", sites},
               {"notes", r->notes}});
    return r->sites.empty() ? kNotFound : kFound;
  }
  const std::string who = EscapeControl(r->canonical.empty() && r->instance ? r->instance->name : r->canonical);
  if (r->sites.empty()) {
    fmt::print(stderr, "symdex: no direct call of {} in target '{}'\n", who, r->target.name);
  } else {
    fmt::print("{} in target '{}': called at {} place{}\n", who, r->target.name, r->sites.size(),
               r->sites.size() == 1 ? "" : "s");
    fmt::print("  {:<48} {:<5} {:<44} {}\n", "CALLER+OFFSET", "KIND", "CALL SITE", "PROBE");
    for (const query::CallerSite& s : r->sites) {
      const query::LineAddress& w = s.where;
      std::string caller = "??";
      if (w.symbol) {
        caller = fmt::format("{}+{:#x} [{}]", EscapeControl(w.symbol->name), w.offset,
                             w.symbol->module.empty() ? std::string("vmlinux") : EscapeControl(w.symbol->module));
      }
      fmt::print("  {:<48} {:<5} {:<44} {}\n", caller, s.tail_call ? "jump" : "call", CallPlace(w),
                 s.probe.empty() ? "-" : EscapeControl(s.probe));
    }
  }
  for (const std::string& n : r->notes) fmt::print(stderr, "symdex: note: {}\n", n);
  return r->sites.empty() ? kNotFound : kFound;
}

}  // namespace

void AddKprobeCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto k = std::make_shared<KprobeCliOptions>();
  CLI::App* kp = app.add_subcommand("kprobe", "Print (-n) or create the kprobe for exactly one function instance");
  kp->add_flag("-n,--dry-run", k->dry_run, "Print the kprobe_events line instead of writing it");
  kp->add_option("-e,--event", k->event, "GRP/EVENT (default symdex/<name>[_<file>_<line>])");
  kp->add_flag("-r,--return", k->ret, "Return probe (r:) instead of entry probe (p:)");
  kp->add_flag("-f,--force", k->force, "Print (or write) the definition even when the kernel would refuse it");
  AddTargetOptions(kp, k->target, "Target (default: 'host', or the only one)");
  kp->add_option("--tracefs", k->tracefs, "tracefs directory (default /sys/kernel/tracing)");
  kp->add_option("--format", k->format,
                 "The tracer's syntax: kprobe_events (default), perf, bpftrace, libbpf, cilium, kprobe_multi, fentry "
                 "(printed, never written)");
  kp->add_option("--line", k->line,
                 "A line of the copy's own source file, inside the copy: one definition per place it has")
      ->check(CLI::NonNegativeNumber);
  kp->add_option("--rel-line", k->rel_line, "A line counted from the copy's declaration line (perf's FUNC:RLN)")
      ->check(CLI::NonNegativeNumber)
      ->excludes("--line");
  kp->add_flag("--inlined", k->inlined,
               "A definition at each place the function's body was inlined (symdex inlined), the arguments "
               "as they are in each copy");
  kp->add_option("SPEC ARGS", k->args,
                 "A spec, then arguments: by name as perf probe takes them (count, file->f_path.dentry, "
                 "'$params'), or kprobe fetch args ('arg1=%di:u64')")
      ->required();
  kp->footer(R"(Prints the line the kernel accepts: _text+<decimal> for vmlinux (KASLR-proof, what perf probe
-D prints), MOD:NAME when NAME is unique in MOD, else the address. Without -n it is appended
to kprobe_events and, if the kernel refuses it, its error_log reason is printed.
A function the kernel refuses (no fentry call, init text, kprobe blacklist: see the VERDICT of
'symdex which') is refused here first, exit 4, with probe-able places instead; --force prints it.
--format names the same copy in another tracer's syntax, when it has one:
  perf      perf probe [-m MOD] -a 'GRP:EVENT=NAME[@DECL_FILE]' (a name perf resolves to this copy
            and its inlined places), else the live address 0xADDR (without arguments by name:
            perf compiles none at an address)
  bpftrace  kprobe:NAME or kprobe:MOD:NAME when unique there, else kprobe:0xADDR (--unsafe)
  libbpf    by address: bpf_kprobe_opts.offset with a NULL function name (a later cilium/ebpf's
            KprobeOptions.Address); a unique name, with an offset into it
  cilium    link.Kprobe("NAME", prog, nil) when NAME is unique; a vmlinux copy as its anchor plus
            offset, link.Kprobe("_text", prog, &link.KprobeOptions{Offset: N}) (KASLR-proof);
            Debian 12's cilium/ebpf 0.9.1 has no address option: a module's shared name has none
  kprobe_multi  libbpf's bpf_program__attach_kprobe_multi_opts: a unique name, else the live
            address in .addrs; refused on a kernel whose config has no CONFIG_FPROBE (Debian 12's)
  fentry    fentry/NAME (fexit/NAME with -r): libbpf's section, bpftrace kfunc:NAME, cilium/ebpf
            AttachTo NAME, only when the kernel resolves NAME to this copy (the fentry verdict of
            'symdex which --fentry'); else refused, exit 4, naming the copy it reaches instead
An address is given for a live target only: it holds for one boot.
With arguments, bpftrace's form is a program that prints them as the trace line would
(reg(), str(), kaddr() reading what the kprobe_events definition reads); libbpf's and
cilium's add a C struct of fetches and the function that fills it from ctx (vmlinux.h;
cilium/ebpf's bpf2go compiles the same C); an argument a tracer cannot read the same way is refused, exit 4.
Arguments by name, in perf probe's syntax, are compiled from this copy's DWARF at the probe's
address (its location lists, members, types): [NAME=]VAR[->M|.M|[N]]...[:TYPE], $params,
$vars, $retval (with -r). TYPE: u8..u64, s8..s64, x8..x64, string, ustring, bW@O/C; default from
DWARF (signed sN, else xN). One that exists but has no location there is refused, exit 4,
with the offsets where it has one; an unknown variable or member, exit 2. Anything else
('%di', '+8(%si):u32', '$comm') is kprobe_events' own syntax, passed as written.
--line L / --rel-line N put the probe on a line of the copy's body instead of its entry: every
address inside this copy where the line table starts a statement of that line of the copy's own
file (a line the compiler split has several: one definition each, events NAME_L<N>, _1, _2...),
with the arguments fetched as they are at each place. A line with no code in the copy is refused
(exit 2) with the nearest lines that have some.
--inlined puts one at each place the function's body was inlined into another (the places
'symdex inlined NAME' lists), at that copy's first address, its arguments compiled from that
copy's DWARF (events NAME, NAME_1, ...); NAME@FILE keeps the copies of the function declared in
FILE. A place the kernel refuses, or where an argument cannot be fetched, is left out and said.
Exit: 0 printed (or written), 1 no match, 2 ambiguous or usage, 3 no index / the kernel refused
the write, 4 refused on its verdict, the tracer has no form for exactly this copy, or an argument
cannot be fetched there.
Example: symdex kprobe -n -e t/pnp name_show@drivers/pnp/card.c:186
         p:t/pnp _text+6817776
         symdex kprobe -n name_show@drivers/pnp/card.c:186 'dmdev->kobj.name:string'
         p:symdex/name_show_card_c_186 _text+6817776 name=+0(+0(%di)):string
         symdex kprobe -n --rel-line 11 vfs_read count
         p:symdex/vfs_read_L11 vfs_read+92 count=%dx:x64
         symdex kprobe -n --inlined cpumask_weight srcp)");
  kp->callback([&g, &exit_code, k] { exit_code = RunKprobe(g, *k); });

  auto va = std::make_shared<VarsCliOptions>();
  CLI::App* vars =
      app.add_subcommand("vars", "The variables in scope in exactly one copy, and where each can be fetched");
  vars->add_option("SPEC", va->q.spec, "One copy (symdex help specs), +OFFSET for a place in its body")->required();
  AddTargetOptions(vars, va->q.target, "Target to query (default: 'host', or the only one)");
  vars->footer(R"(What perf probe -V lists, for the copy SPEC names: each parameter and local in scope at its
entry (or at +OFFSET), its C type, the fetch arg 'symdex kprobe SPEC NAME' would print there
('-' when none: a note says why), and the offsets from the symbol where its location list
gives it one. From the copy's own DWARF (vmlinux or a module).
Exit: 0 listed, 1 no match, 2 ambiguous or usage, 3 no index or no debug info for the copy.
Example: symdex vars vfs_read
         symdex vars 'name_show@drivers/pnp/card.c')");
  vars->callback([&g, &exit_code, va] { exit_code = RunVars(g, *va); });

  auto ca = std::make_shared<CallersCliOptions>();
  CLI::App* callers = app.add_subcommand("callers", "Every call of exactly one copy: the caller, file:line, a probe");
  callers->add_option("SPEC", ca->q.spec, "One copy (symdex help specs)")->required();
  AddTargetOptions(callers, ca->q.target, "Target to query (default: 'host', or the only one)");
  callers->footer(R"(Every direct call and tail call (KIND jump) of the copy SPEC names, found in the code of its
file (vmlinux, or its module) as the debug package holds it, each function decoded from its
start: the function the call is in, the kprobe target of the call instruction (probe there to
see this caller's calls only) and the call's file:line:column from the debug info. Calls
through pointers, static calls and code patched at boot are not in that code: not listed.
Exit: 0 listed, 1 no match or no direct call, 2 ambiguous or usage, 3 no index or no code.
Example: symdex callers 'name_show@drivers/pnp/card.c')");
  callers->callback([&g, &exit_code, ca] { exit_code = RunCallers(g, *ca); });
}

}  // namespace symdex::cli
