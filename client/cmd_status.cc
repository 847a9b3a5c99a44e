// symdex status: what is indexed, from which files, with which problems.
#include <fmt/core.h>

#include <map>

#include "server/common/strings.h"
#include "client/cli_common.h"
#include "server/common/file_util.h"
#include "server/debuginfo/addr_map.h"
#include "server/store/debuginfo_store.h"
#include "server/store/index_store.h"

namespace symdex::cli {
namespace {

nlohmann::json DebugJson(const std::vector<store::DebugInfoStatus>& dbg) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : dbg) {
    out.push_back({{"module", d.module.empty() ? "vmlinux" : d.module},
                   {"build_id", d.build_id},
                   {"status", target::Name(d.status)},
                   {"path", d.path},
                   {"origin", d.origin},
                   {"detail", d.detail}});
  }
  return out;
}

std::vector<std::string> Warnings(const std::string& joined) {
  if (joined.empty()) return {};
  std::vector<std::string> out;
  for (auto w : Split(joined, '\n', true)) out.emplace_back(w);
  return out;
}

// PRAGMA quick_check on a full Debian kernel index (54 MB: 1121 modules, 244k symbols, their
// DWARF functions) takes 0.25 s warm; the limit keeps `status` quick on indexes 20 times that.
constexpr double kQuickCheckSeconds = 5;

// Temporary address maps a killed `symdex index` left (the next one removes them), and ones
// being written right now.
std::vector<std::string> AddrMapLeftovers(const GlobalOptions& g) {
  std::vector<std::string> out;
  const std::string dir = AddrMapDirFor(DbPath(g));
  if (dir.empty()) return out;
  for (const TempFile& t : debuginfo::AddrMapTempFiles(dir)) {
    out.push_back(fmt::format("{} ({}, {} s old)", t.path,
                              t.stale ? "left by a killed writer: the next 'symdex index' removes it"
                                      : fmt::format("being written by process {}", t.pid),
                              t.age_seconds));
  }
  return out;
}

int RunStatus(const GlobalOptions& g, bool verbose) {
  auto db = OpenForRead(g);
  if (!db.ok()) return Fail(g, db.status());
  // A damaged page anywhere fails here, with the file and the cure, instead of surfacing later
  // as a bare "database disk image is malformed" from whichever query reads it.
  auto sound = db->QuickCheck(kQuickCheckSeconds);
  if (!sound.ok()) return Fail(g, sound.status());
  const std::string integrity = *sound ? "ok" : fmt::format("not checked (quick_check ran over {} s)", kQuickCheckSeconds);
  const std::vector<std::string> leftovers = AddrMapLeftovers(g);
  auto version = db->UserVersion();
  auto targets = store::ListTargets(*db);
  if (!targets.ok()) return Fail(g, targets.status());
  nlohmann::json jt = nlohmann::json::array();
  if (!g.json) {
    fmt::print("index {} (schema {}, integrity {})\n", DbPath(g), version.ok() ? *version : -1, integrity);
    if (verbose) {
      for (const auto& l : leftovers) fmt::print("temporary address map {}\n", l);
    }
  }
  if (!g.json && targets->empty()) fmt::print("no targets: run 'symdex index'\n");
  for (const auto& t : *targets) {
    auto counts = store::CountTarget(*db, t.id);
    if (!counts.ok()) return Fail(g, counts.status());
    auto files = store::TargetFiles(*db, t.id);
    if (!files.ok()) return Fail(g, files.status());
    std::map<std::string, int> by_status;
    for (const auto& f : *files) ++by_status[std::string(target::Name(f.status))];
    auto dbg = store::TargetDebugInfo(*db, t.id);
    if (!dbg.ok()) return Fail(g, dbg.status());
    std::map<std::string, int> dbg_status;
    for (const auto& d : *dbg) ++dbg_status[std::string(target::Name(d.status))];
    // vmlinux's address map (debuginfo/addr_map.h): present, missing or unusable, and why.
    nlohmann::json jmap = nullptr;
    std::string map_line;
    auto am = VmlinuxAddrMap(g, *db, t);
    if (!am.ok()) return Fail(g, am.status());
    if (!am->status.empty()) {
      jmap = {{"path", am->path}, {"status", am->status}, {"detail", am->detail}};
      map_line = am->status == "present"
                     ? fmt::format("present ({}){}", am->detail, verbose ? " " + am->path : "")
                     : fmt::format("{}: 'symdex addr' reads DWARF instead (slower); 'symdex index' writes it{}",
                                   am->status, am->status == "missing" ? "" : "\n      " + am->detail);
    }
    if (g.json) {
      nlohmann::json jf = nlohmann::json::array();
      for (const auto& f : *files) {
        jf.push_back({{"role", f.role}, {"path", f.path}, {"status", target::Name(f.status)}, {"detail", f.detail}});
      }
      jt.push_back({{"name", t.name},
                    {"kind", t.kind},
                    {"release", t.release},
                    {"build_id", t.build_id},
                    {"text_addr", t.text_addr ? nlohmann::json("0x" + Hex(*t.text_addr)) : nlohmann::json(nullptr)},
                    {"source", t.source},
                    {"indexed_at", t.indexed_at},
                    {"generation", t.generation},
                    {"modules", counts->modules},
                    {"vmlinux_symbols", counts->vmlinux_symbols},
                    {"module_symbols", counts->module_symbols},
                    {"text_symbols", counts->text_symbols},
                    {"warnings", Warnings(t.warnings)},
                    {"files", jf},
                    {"debuginfo", DebugJson(*dbg)},
                    {"addr_map", jmap}});
      continue;
    }
    fmt::print("\ntarget {} ({}){}\n", t.name, t.kind, t.release.empty() ? "" : "  release " + t.release);
    fmt::print("  vmlinux build-id  {}\n", t.build_id.empty() ? "(unknown)" : t.build_id);
    fmt::print("  _text             {}\n", t.text_addr ? Hex(*t.text_addr) : "(unknown)");
    fmt::print("  indexed           {} (generation {}) from {}\n", FormatTime(t.indexed_at), t.generation, t.source);
    fmt::print("  symbols           {} vmlinux + {} in {} modules ({} text)\n", counts->vmlinux_symbols,
               counts->module_symbols, counts->modules, counts->text_symbols);
    std::string summary;
    for (const auto& [s, n] : by_status) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, s);
    fmt::print("  input files       {}\n", summary);
    for (const auto& f : *files) {
      if (verbose || f.status == target::InputFileStatus::kError ||
          (f.status == target::InputFileStatus::kMissing && f.role != "module")) {
        fmt::print("    {:<8} {:<10} {}{}\n", target::Name(f.status), f.role, f.path, f.detail.empty() ? "" : ": " + f.detail);
      }
    }
    if (!dbg->empty()) {
      std::string ds;
      for (const auto& [s, n] : dbg_status) ds += fmt::format("{}{} {}", ds.empty() ? "" : ", ", n, s);
      fmt::print("  debug info        {}\n", ds);
      for (const auto& d : *dbg) {
        bool ok = d.status == target::DebugFileStatus::kUsed || d.status == target::DebugFileStatus::kCached;
        if (verbose || (!ok && d.module.empty())) {
          fmt::print("    {:<18} {:<10} {}{}{}\n", d.module.empty() ? "vmlinux" : d.module, target::Name(d.status),
                     d.path.empty() ? "" : d.path, d.origin.empty() ? "" : " (" + d.origin + ")",
                     d.detail.empty() || (ok && !verbose) ? "" : "\n      " + d.detail);
        }
      }
      if (!verbose && dbg_status.size() > 1) fmt::print("    ('symdex status -v' lists every module)\n");
    }
    if (!map_line.empty()) fmt::print("  address map       {}\n", map_line);
    for (const auto& w : Warnings(t.warnings)) fmt::print("  warning           {}\n", w);
  }
  if (g.json) {
    PrintJson({{"db", DbPath(g)},
               {"schema_version", version.ok() ? *version : -1},
               {"integrity", *sound ? "ok" : "unchecked"},
               {"addr_map_temp_files", leftovers},
               {"targets", jt}});
  }
  return kFound;
}

}  // namespace

void AddStatusCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto verbose = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand("status", "Targets in the index: build-IDs, counts, input files and their problems");
  c->add_flag("-v,--verbose", *verbose, "List every input file, not only the problems");
  c->callback([&g, &exit_code, verbose] { exit_code = RunStatus(g, *verbose); });
}

}  // namespace symdex::cli
