// symdex status: what is indexed, from which files, with which problems.
#include <fmt/core.h>

#include <map>
#include <optional>

#include "client/cli_common.h"
#include "server/common/kernel_arch.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

nlohmann::json DebugJson(const std::vector<query::DebugFileState>& dbg) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : dbg) {
    out.push_back({{"module", d.module.empty() ? "vmlinux" : d.module},
                   {"build_id", d.build_id},
                   {"status", d.status},
                   {"path", d.path},
                   {"origin", d.origin},
                   {"detail", d.detail},
                   {"reader", d.reader}});
  }
  return out;
}

nlohmann::json DroppedJson(const std::vector<DroppedSymbols>& dropped) {
  nlohmann::json out = nlohmann::json::array();
  for (const DroppedSymbols& d : dropped) out.push_back({{"rule", d.rule}, {"count", d.count}});
  return out;
}

// "3 symbols of PATH, as the kernel leaves them out: 2 local labels (.L, L0), 1 mapping symbols ($x, $d)"
std::string DroppedText(const std::vector<DroppedSymbols>& dropped, std::string_view of) {
  std::vector<std::string> rules;
  for (const DroppedSymbols& d : dropped) rules.push_back(fmt::format("{} {}", d.count, d.rule));
  return fmt::format("{} symbol{} of {}, as the kernel leaves them out: {}", DroppedTotal(dropped),
                     DroppedTotal(dropped) == 1 ? "" : "s", of, StrJoin(rules, ", "));
}

std::vector<std::string> Warnings(const std::string& joined) {
  if (joined.empty()) return {};
  std::vector<std::string> out;
  for (auto w : Split(joined, '\n', true)) out.emplace_back(w);
  return out;
}

// vmlinux's address map (debuginfo/symbolize/addr_map.h): present, missing or unusable, and why —
// as JSON (null: no vmlinux debug file to map) and as the text line ("": none to show).
std::pair<nlohmann::json, std::string> AddrMapOf(const query::AddrMapState& am, bool verbose) {
  const std::string am_status(query::AddrMapStatusName(am.status));
  if (am.status == query::AddrMapStatus::kNone) return {nullptr, ""};
  nlohmann::json jmap = {{"path", am.path}, {"status", am_status}, {"detail", am.detail}};
  std::string line =
      am.status == query::AddrMapStatus::kPresent
          ? fmt::format("present ({}){}", am.detail, verbose ? " " + am.path : "")
          : fmt::format("{}: 'symdex addr' reads DWARF instead (slower); 'symdex index' writes it{}", am_status,
                        am.status == query::AddrMapStatus::kMissing ? "" : "\n      " + am.detail);
  return {std::move(jmap), std::move(line)};
}

nlohmann::json TargetJson(const query::TargetState& ts, nlohmann::json jmap) {
  const TargetInfo& t = ts.summary.info;
  const TargetCounts& counts = ts.summary.counts;
  nlohmann::json jf = nlohmann::json::array();
  for (const auto& f : ts.files) {
    jf.push_back({{"role", f.role},
                  {"path", f.path},
                  {"status", f.status},
                  {"detail", f.detail},
                  {"dropped", DroppedJson(f.dropped)}});
  }
  return {{"name", t.name},
          {"kind", t.kind},
          {"release", t.release},
          {"build_id", t.build_id},
          {"text_addr", t.text_addr ? nlohmann::json("0x" + Hex(*t.text_addr)) : nlohmann::json(nullptr)},
          {"text_anchor", t.text_anchor},
          {"machine", t.machine},
          {"arch", ArchOfMachine(t.machine) ? std::string(ArchOfMachine(t.machine)->name) : std::string()},
          {"anchor_addr", t.AnchorAddr() ? nlohmann::json("0x" + Hex(*t.AnchorAddr())) : nlohmann::json(nullptr)},
          {"source", t.source},
          {"indexed_at", t.indexed_at},
          {"generation", t.generation},
          {"modules", counts.modules},
          {"vmlinux_symbols", counts.vmlinux_symbols},
          {"module_symbols", counts.module_symbols},
          {"text_symbols", counts.text_symbols},
          {"warnings", Warnings(t.warnings)},
          {"kernel_config", t.kernel_config},
          {"kprobe_events_on_notrace",
           t.kprobe_events_on_notrace ? nlohmann::json(*t.kprobe_events_on_notrace) : nlohmann::json(nullptr)},
          {"fprobe", t.fprobe ? nlohmann::json(*t.fprobe) : nlohmann::json(nullptr)},
          {"ftrace_direct", t.ftrace_direct ? nlohmann::json(*t.ftrace_direct) : nlohmann::json(nullptr)},
          {"files", jf},
          {"debuginfo", DebugJson(ts.debuginfo)},
          {"addr_map", std::move(jmap)}};
}

// The input files: a count by status, the problems (every file with -v), and what the run left
// out of each, as the kernel does (ingest/kallsyms.h): each file's with -v, else one line a file
// and one for all module files together.
void PrintInputFiles(const query::TargetState& ts, bool verbose) {
  std::map<std::string, int> by_status;
  for (const auto& f : ts.files) ++by_status[f.status];
  std::string summary;
  for (const auto& [s, n] : by_status) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, s);
  fmt::print("  input files       {}\n", summary);
  std::vector<DroppedSymbols> module_dropped;
  size_t module_files = 0;
  for (const auto& f : ts.files) {
    if (verbose || f.problem) {
      fmt::print("    {:<8} {:<10} {}{}\n", f.status, f.role, EscapeControl(f.path),
                 f.detail.empty() ? "" : ": " + EscapeControl(f.detail));
      if (verbose && !f.dropped.empty()) fmt::print("      left out {}\n", DroppedText(f.dropped, "it"));
    }
    if (verbose || f.dropped.empty()) continue;
    if (f.role == "module") {
      ++module_files;
      for (const DroppedSymbols& d : f.dropped) CountDropped(module_dropped, d.rule, d.count);
    } else {
      fmt::print("  left out          {}\n", DroppedText(f.dropped, EscapeControl(f.path)));
    }
  }
  if (module_files > 0) {
    fmt::print("  left out          {}\n", DroppedText(module_dropped, fmt::format("{} module file{}", module_files,
                                                                                   module_files == 1 ? "" : "s")));
  }
}

// The debug files: a count by status, and the ones to look at (every module's with -v).
void PrintDebugInfo(const query::TargetState& ts, bool verbose) {
  if (ts.debuginfo.empty()) return;
  std::map<std::string, int> dbg_status;
  for (const auto& d : ts.debuginfo) ++dbg_status[d.status];
  std::string ds;
  for (const auto& [s, n] : dbg_status) ds += fmt::format("{}{} {}", ds.empty() ? "" : ", ", n, s);
  fmt::print("  debug info        {}\n", ds);
  for (const auto& d : ts.debuginfo) {
    if (verbose || (!d.usable && d.module.empty())) {
      fmt::print("    {:<18} {:<10} {}{}{}{}\n", d.module.empty() ? "vmlinux" : d.module, d.status,
                 d.path.empty() ? "" : d.path, d.origin.empty() ? "" : " (" + d.origin + ")",
                 d.detail.empty() || (d.usable && !verbose) ? "" : "\n      " + d.detail,
                 d.reader.empty() || !verbose ? "" : "\n      read by " + d.reader);
    }
  }
  if (!verbose && dbg_status.size() > 1) fmt::print("    ('symdex status -v' lists every module)\n");
}

void PrintTarget(const query::TargetState& ts, const std::string& map_line, bool verbose) {
  const TargetInfo& t = ts.summary.info;
  const TargetCounts& counts = ts.summary.counts;
  fmt::print("\ntarget {} ({}){}\n", t.name, t.kind, t.release.empty() ? "" : "  release " + t.release);
  fmt::print("  vmlinux build-id  {}\n", t.build_id.empty() ? "(unknown)" : t.build_id);
  if (const KernelArch* arch = ArchOfMachine(t.machine)) fmt::print("  architecture      {}\n", arch->name);
  fmt::print("  _text             {}\n", t.text_addr ? Hex(*t.text_addr) : "(unknown)");
  if (t.text_anchor != "_text") {
    fmt::print("  {:<17} {} (kallsyms lists no _text: KASLR-proof probes are {}+N)\n", t.text_anchor,
               t.AnchorAddr() ? Hex(*t.AnchorAddr()) : "(unknown)", t.text_anchor);
  }
  fmt::print("  indexed           {} (generation {}) from {}\n", FormatTime(t.indexed_at), t.generation, t.source);
  fmt::print("  kernel config     {}\n",
             t.kernel_config.empty()
                 ? std::string("(none found: probe verdicts assume CONFIG_KPROBE_EVENTS_ON_NOTRACE=n)")
                 : fmt::format("{} (kprobe events on functions without fentry: {})", t.kernel_config,
                               t.kprobe_events_on_notrace.value_or(false) ? "allowed" : "refused"));
  fmt::print("  symbols           {} vmlinux + {} in {} modules ({} text)\n", counts.vmlinux_symbols,
             counts.module_symbols, counts.modules, counts.text_symbols);
  PrintInputFiles(ts, verbose);
  PrintDebugInfo(ts, verbose);
  if (!map_line.empty()) fmt::print("  address map       {}\n", map_line);
  for (const auto& w : Warnings(t.warnings)) fmt::print("  warning           {}\n", w);
}

// A fleet replica's kernels by build-ID (through a daemon with --fleet-cache only).
nlohmann::json FleetJson(const query::ServerState& server) {
  nlohmann::json jk = nlohmann::json::array();
  for (const query::FleetKernelState& k : server.fleet_kernels) {
    jk.push_back({{"build_id", k.build_id},
                  {"state", k.state},
                  {"bytes", k.bytes},
                  {"modules", k.modules},
                  {"modules_failed", k.modules_failed},
                  {"index_seconds", k.index_seconds},
                  {"idle_seconds", k.idle_seconds},
                  {"error", k.error}});
  }
  return {{"cache", server.fleet_cache}, {"kernels", jk}};
}

void PrintFleet(const query::ServerState& server) {
  if (!server.fleet_cache.empty()) {
    fmt::print("\nfleet cache {}: {} kernel(s)\n", server.fleet_cache, server.fleet_kernels.size());
  }
  for (const query::FleetKernelState& k : server.fleet_kernels) {
    fmt::print("  {} {:<9} {:>6.1f} MB  {} modules{}  indexed in {:.1f} s, idle {:.0f} s{}\n", k.build_id, k.state,
               static_cast<double>(k.bytes) / 1e6, k.modules,
               k.modules_failed ? fmt::format(" ({} failed)", k.modules_failed) : "", k.index_seconds, k.idle_seconds,
               k.error.empty() ? "" : "\n    " + k.error);
  }
}

// The daemon's live target (through a daemon that tracks the live host only): how it follows
// the host, and whether it is behind because its last re-index failed.
bool Tracked(const query::ServerState& server) {
  return !server.live_tracking.empty() && server.live_tracking != "off";
}

nlohmann::json LiveJson(const query::ServerState& server) {
  nlohmann::json jb = nullptr;
  if (const auto& behind = server.live_behind) {
    jb = {{"since", behind->since},
          {"attempt", behind->attempt},
          {"error", behind->error},
          {"failures", behind->failures},
          {"next_attempt", behind->next_attempt}};
  }
  return {{"tracking", server.live_tracking}, {"updates", server.live_updates}, {"behind", jb}};
}

void PrintLive(const query::ServerState& server) {
  fmt::print("\nlive tracking     {}; {} re-index(es) applied since the daemon started\n", server.live_tracking,
             server.live_updates);
  if (const auto& behind = server.live_behind) {
    fmt::print("  BEHIND the host since {}: re-index ({}) failed, {} attempt(s): {}\n", FormatTime(behind->since),
               behind->attempt, behind->failures, behind->error);
    fmt::print("  the index holds the state before it; {}\n",
               behind->next_attempt ? "next attempt " + FormatTime(behind->next_attempt) + " (SIGHUP: at once)"
                                    : std::string("no attempt scheduled"));
  } else {
    fmt::print("  current (the last re-index succeeded)\n");
  }
}

int RunStatus(const GlobalOptions& g, bool verbose) {
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto status = (*api)->Ask<query::IndexStatus>({.index = true, .check_integrity = true});
  if (!status.ok()) return Fail(g, status.status());
  if (!status->index) return Fail(g, absl::DataLossError("the answer holds no index state"));
  const query::IndexState* index = &*status->index;
  const query::ServerState& server = status->server;
  if (g.json) {
    nlohmann::json jt = nlohmann::json::array();
    for (const auto& ts : index->targets) jt.push_back(TargetJson(ts, AddrMapOf(ts.addr_map, verbose).first));
    nlohmann::json j = {{"db", index->database},
                        {"schema_version", index->schema_version},
                        {"integrity", index->integrity_checked ? "ok" : "unchecked"},
                        {"addr_map_temp_files", index->addr_map_temp_files},
                        {"targets", jt}};
    if (!server.fleet_cache.empty()) j["fleet"] = FleetJson(server);
    if (Tracked(server)) j["live"] = LiveJson(server);
    PrintJson(j);
    return kFound;
  }
  const std::string integrity = index->integrity_checked
                                    ? "ok"
                                    : fmt::format("not checked (quick_check ran over {} s)", index->integrity_seconds);
  fmt::print("index {} (schema {}, integrity {})\n", index->database, index->schema_version, integrity);
  if (verbose) {
    for (const auto& l : index->addr_map_temp_files) fmt::print("temporary address map {}\n", l);
  }
  if (index->targets.empty()) fmt::print("no targets: run 'symdex index'\n");
  for (const auto& ts : index->targets) PrintTarget(ts, AddrMapOf(ts.addr_map, verbose).second, verbose);
  PrintFleet(server);
  if (Tracked(server)) PrintLive(server);
  return kFound;
}

}  // namespace

void AddStatusCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto verbose = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand("status", "Targets in the index: build-IDs, counts, input files and their problems");
  c->add_flag("-v,--verbose", *verbose, "List every input file, not only the problems");
  c->footer("Exit: 0 reported, 2 usage, 3 no index (or a damaged one).");
  c->callback([&g, &exit_code, verbose] { exit_code = RunStatus(g, *verbose); });
}

}  // namespace symdex::cli
