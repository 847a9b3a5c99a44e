// symdex jit ingest|addr|collisions|export (dsos: cmd_jit_dsos.cc): JIT code from jitdump and
// perf-map files. Lookups go through the query API; ingest and export work
// on the index file here (server/jit/jit_files.h).
#include <fmt/core.h>

#include <map>
#include <set>

#include "client/cli_common.h"
#include "client/cmd_jit.h"
#include "server/common/hex.h"
#include "server/common/strings.h"
#include "server/jit/jit_files.h"

namespace symdex::cli {
namespace {

constexpr char kSchemeHelp[] =
    "Build-ID scheme: symdex (default; unique per process instance and load), sha1-symtab (perf with "
    "the Nov 2025 fix), sha1-code (perf 6.17: identical code => identical ID), md5-addr (perf <= 6.16 "
    "with libcrypto)";

// ---------------------------------------------------------------------------------------------

struct IngestOptions {
  std::vector<std::string> paths;
};

int RunIngest(const GlobalOptions& g, const IngestOptions& o) {
  auto reports = jit::IngestJitFilesInto(DbPath(g), o.paths);
  if (!reports.ok()) return Fail(g, reports.status(), true);
  if (reports->empty()) {
    if (g.json) {
      PrintJson({{"files", nlohmann::json::array()}, {"errors", 0}});
    } else {
      fmt::print(stderr, "symdex: no jit-*.dump or perf-*.map files in {}\n", StrJoin(o.paths, ", "));
    }
    return kNotFound;
  }
  int errors = 0;
  nlohmann::json arr = nlohmann::json::array();
  for (const JitIngestReport& r : *reports) {
    errors += r.status == "error";
    if (g.json) {
      arr.push_back({{"path", r.path},
                     {"kind", r.kind},
                     {"pid", r.pid},
                     {"dump_timestamp", r.dump_timestamp},
                     {"status", r.status},
                     {"message", r.message},
                     {"start_offset", r.start_offset},
                     {"end_offset", r.end_offset},
                     {"file_size", r.file_size},
                     {"bytes_read", r.bytes_read},
                     {"loads", r.loads},
                     {"moves", r.moves},
                     {"debug_infos", r.debug_infos},
                     {"rejected_debug_infos", r.rejected_debug_infos},
                     {"unknown_records", r.unknown_records},
                     {"duplicates", r.duplicates},
                     {"orphan_moves", r.orphan_moves},
                     {"map_entries", r.map_entries},
                     {"malformed_lines", r.malformed_lines}});
      continue;
    }
    if (r.status == "error") {
      fmt::print(stderr, "symdex: {}: {} (records before it were kept)\n", r.path, r.message);
      continue;
    }
    if (r.kind == "jitdump") {
      fmt::print("{}: jitdump pid {} (dump {}): {} new loads, {} moves, {} with DEBUG_INFO", r.path, r.pid,
                 r.dump_timestamp, r.loads, r.moves, r.debug_infos);
      if (r.duplicates) fmt::print(", {} already indexed", r.duplicates);
      if (r.orphan_moves) fmt::print(", {} moves of unknown code", r.orphan_moves);
      if (r.rejected_debug_infos) fmt::print(", {} malformed DEBUG_INFO dropped", r.rejected_debug_infos);
      fmt::print(" [{}]\n", r.status);
    } else {
      fmt::print("{}: perf map pid {}: {} new entries, {} malformed lines [{}]\n", r.path, r.pid, r.map_entries,
                 r.malformed_lines, r.status);
    }
    if (!r.message.empty()) fmt::print("  {}\n", r.message);
  }
  if (g.json) PrintJson({{"files", arr}, {"errors", errors}});
  return errors ? kEnvError : kFound;
}

// ---------------------------------------------------------------------------------------------

struct JitAddrOptions {
  uint32_t pid = 0;
  std::optional<uint64_t> time;
  std::optional<uint64_t> instance;
  std::string scheme = "symdex";
  std::vector<std::string> addrs;
};

int RunJitAddr(const GlobalOptions& g, const JitAddrOptions& o) {
  auto scheme = query::JitSchemeArg(o.scheme);
  if (!scheme.ok()) return Fail(g, scheme.status());
  query::JitAddrRequest req{.pid = o.pid, .time = o.time, .instance = o.instance};
  for (const std::string& a : o.addrs) {
    auto v = ParseHex(a);
    if (!v) return Fail(g, absl::InvalidArgumentError(StrCat("'", a, "' is not a hex address")));
    req.addresses.push_back(*v);
  }
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto answer = (*api)->Ask<query::JitAddr>(req);
  if (!answer.ok()) return Fail(g, answer.status());
  const std::string& sname = *scheme;
  size_t missing = 0;
  nlohmann::json arr = nlohmann::json::array();
  for (query::JitAddrResult& r : answer->results) {
    const uint64_t a = r.address;
    std::optional<query::JitFunction>& hit = r.function;
    const std::optional<query::PerfMapSymbol>& map_hit = r.perf_map;
    missing += !r.found();
    if (g.json) {
      nlohmann::json j = {{"address", "0x" + Hex(a)}, {"found", hit || map_hit}};
      if (hit) {
        j["from"] = "jitdump";
        j["function"] = LoadJson(*hit);
        j["build_id"] = hit->build_ids[sname];
        j["scheme"] = sname;
        j["offset"] = a - hit->addr;
      } else if (map_hit) {
        j["from"] = "perf-map";
        j["function"] = {{"name", map_hit->name},
                         {"code_start", "0x" + Hex(map_hit->start)},
                         {"code_end", "0x" + Hex(map_hit->start + map_hit->size)},
                         {"map", map_hit->map_path},
                         {"map_line", map_hit->map_line}};
        j["offset"] = a - map_hit->start;
      }
      arr.push_back(j);
      continue;
    }
    if (hit) {
      fmt::print("0x{} {}+{:#x}\n", Hex(a), hit->name, a - hit->addr);
      fmt::print("  code      0x{}-0x{} ({} bytes), code_index {}, loaded at time {}", Hex(hit->addr),
                 Hex(hit->addr + hit->code_size), hit->code_size, hit->code_index, hit->load_time);
      if (hit->placed_by == "move") fmt::print(", moved here at {} from 0x{}", hit->placed_time, Hex(hit->code_addr));
      if (hit->until) fmt::print(" [moved away at {}]", *hit->until);
      fmt::print("\n");
      if (hit->line) {
        fmt::print("  source    {}:{}:{}\n", hit->line->file, hit->line->line, hit->line->column);
      } else {
        fmt::print("  source    {}\n", hit->line_entries ? "before the first DEBUG_INFO entry" : "(no DEBUG_INFO)");
      }
      fmt::print("  dso       {} build-id {} ({})\n", hit->DsoName(), hit->build_ids[sname], sname);
      fmt::print("  process   pid {}, jitdump {} (header timestamp {})\n", hit->instance.pid, hit->instance.path,
                 hit->instance.dump_timestamp);
    } else if (map_hit) {
      fmt::print("0x{} {}+{:#x}\n  code      0x{}-0x{} (perf map {}:{}; no jitdump: no code index or build-ID)\n",
                 Hex(a), map_hit->name, a - map_hit->start, Hex(map_hit->start), Hex(map_hit->start + map_hit->size),
                 map_hit->map_path, map_hit->map_line);
    } else {
      fmt::print("0x{} not covered by any jitted code of pid {}{}\n", Hex(a), o.pid,
                 o.time ? StrCat(" at time ", *o.time) : "");
    }
  }
  if (g.json) {
    PrintJson({{"pid", o.pid},
               {"time", o.time ? nlohmann::json(*o.time) : nlohmann::json(nullptr)},
               {"instance", answer->instance ? InstanceJson(*answer->instance) : nlohmann::json(nullptr)},
               {"addresses", arr}});
  }
  return missing ? kNotFound : kFound;
}

// ---------------------------------------------------------------------------------------------

struct CollisionOptions {
  std::optional<std::string> scheme;
  size_t show = 20;
};

int RunCollisions(const GlobalOptions& g, const CollisionOptions& o) {
  std::optional<std::string> scheme;
  if (o.scheme) {
    auto s = query::JitSchemeArg(*o.scheme);
    if (!s.ok()) return Fail(g, s.status());
    scheme = *s;
  }
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto answer = (*api)->Ask<query::JitCollisions>({.scheme = scheme.value_or("")});
  if (!answer.ok()) return Fail(g, answer.status());
  const std::vector<query::JitCollision>* groups = &answer->collisions;
  const std::map<std::string, query::JitSchemeCount>* counts = &answer->counts;
  // Per scheme: groups, loads merged, groups merging distinct names.
  std::map<std::string, nlohmann::json> per;
  for (const auto& [s, c] : *counts) {
    per[s] = {{"scheme", s},
              {"loads", c.loads},
              {"distinct_ids", c.distinct_ids},
              {"shared_ids", 0},
              {"merged_loads", 0},
              {"ids_merging_distinct_names", 0},
              {"groups", nlohmann::json::array()}};
  }
  for (const auto& gr : *groups) {
    nlohmann::json& p = per[gr.scheme];
    p["shared_ids"] = p["shared_ids"].get<int64_t>() + 1;
    p["merged_loads"] = p["merged_loads"].get<int64_t>() + static_cast<int64_t>(gr.loads.size());
    if (gr.distinct_names > 1) p["ids_merging_distinct_names"] = p["ids_merging_distinct_names"].get<int64_t>() + 1;
    nlohmann::json loads = nlohmann::json::array();
    for (const auto& l : gr.loads) {
      loads.push_back({{"name", l.name},
                       {"dso", l.DsoName()},
                       {"pid", l.pid},
                       {"code_index", l.code_index},
                       {"dump_timestamp", l.instance.dump_timestamp}});
    }
    p["groups"].push_back({{"build_id", gr.build_id},
                           {"loads", gr.loads.size()},
                           {"distinct_names", gr.distinct_names},
                           {"dsos", loads}});
  }
  size_t shared = groups->size();
  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (auto& [s, p] : per) arr.push_back(p);
    PrintJson({{"schemes", arr}, {"shared_ids", shared}});
    return shared ? kFound : kNotFound;
  }
  for (auto& [s, p] : per) {
    fmt::print("{}: {} loads, {} distinct build-IDs; {} IDs shared by {} DSOs, {} of them by different functions\n", s,
               p["loads"].get<int64_t>(), p["distinct_ids"].get<int64_t>(), p["shared_ids"].get<int64_t>(),
               p["merged_loads"].get<int64_t>(), p["ids_merging_distinct_names"].get<int64_t>());
    size_t shown = 0;
    for (const auto& gr : *groups) {
      if (gr.scheme != s) continue;
      if (++shown > o.show) {
        fmt::print("  ... (--show N for more)\n");
        break;
      }
      std::set<std::string> names;
      for (const auto& l : gr.loads) names.insert(l.name);
      fmt::print("  {} shared by {} DSOs ({} distinct functions): ", gr.build_id, gr.loads.size(), gr.distinct_names);
      size_t n = 0;
      for (const auto& name : names) {
        if (++n > 4) {
          fmt::print(", ... {} more", names.size() - 4);
          break;
        }
        fmt::print("{}{}", n > 1 ? ", " : "", name);
      }
      fmt::print("\n    e.g. {}", gr.loads.front().DsoName());
      if (gr.loads.size() > 1) fmt::print(", {}", gr.loads[1].DsoName());
      fmt::print("\n");
    }
  }
  return shared ? kFound : kNotFound;
}

// ---------------------------------------------------------------------------------------------

struct ExportOptions {
  std::string out;
  std::string scheme = "symdex";
  std::optional<uint32_t> pid;
  std::optional<uint64_t> instance;
};

int RunExport(const GlobalOptions& g, const ExportOptions& o) {
  auto scheme = query::JitSchemeArg(o.scheme);
  if (!scheme.ok()) return Fail(g, scheme.status());
  const std::string& sname = *scheme;
  if (!g.connect.empty()) {
    return Fail(g, absl::FailedPreconditionError(
                       "'jit export' works on files on this machine and reads the index file itself: run it where "
                       "the index is, without --connect (--db names the index)"));
  }
  auto exported = jit::ExportJitDsos(
      DbPath(g), {.out = o.out, .scheme = sname, .pid = o.pid, .instance = o.instance},
      [](uint32_t pid, uint32_t elf_mach) {
        fmt::print(stderr, "symdex: skipping pid {}: e_machine {} (only x86-64 and aarch64 dumps are exported)\n", pid,
                   elf_mach);
      });
  if (!exported.ok()) return Fail(g, exported.status());
  const size_t written = exported->files.size(), with_lines = exported->with_lines;
  const size_t distinct = exported->distinct_build_ids;
  if (g.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const jit::ExportedDso& f : exported->files) {
      files.push_back({{"path", f.path}, {"name", f.name}, {"build_id", f.build_id}, {"lines", f.lines}});
    }
    PrintJson({{"out", o.out},
               {"scheme", sname},
               {"written", written},
               {"with_debug_line", with_lines},
               {"distinct_build_ids", distinct},
               {"files", files}});
  } else {
    fmt::print("wrote {} jitted DSOs to {} ({} with .debug_line), {} distinct {} build-IDs\n", written, o.out,
               with_lines, distinct, sname);
    if (distinct < written) {
      fmt::print("  note: scheme {} gives some of them the same build-ID; tools keyed by build-ID will merge them\n",
                 sname);
    }
  }
  return written ? kFound : kNotFound;
}

}  // namespace

nlohmann::json LoadJson(const query::JitFunction& l) {
  nlohmann::json j = {{"name", l.name},
                      {"pid", l.pid},
                      {"code_index", l.code_index},
                      {"dso", l.DsoName()},
                      {"code_start", "0x" + Hex(l.addr)},
                      {"code_end", "0x" + Hex(l.addr + l.code_size)},
                      {"code_size", l.code_size},
                      {"loaded_at", "0x" + Hex(l.code_addr)},
                      {"load_time", l.load_time},
                      {"placed_by", l.placed_by},
                      {"placed_time", l.placed_time},
                      {"moved_away_at", l.until ? nlohmann::json(*l.until) : nlohmann::json(nullptr)},
                      {"instance", InstanceJson(l.instance)},
                      {"build_ids", l.build_ids}};
  if (l.line) {
    j["source"] = {{"file", l.line->file},
                   {"line", l.line->line},
                   {"column", l.line->column},
                   {"entry_address", "0x" + Hex(l.line->addr)}};
  } else {
    j["source"] = nullptr;
  }
  return j;
}

nlohmann::json InstanceJson(const query::JitInstanceInfo& i) {
  return {
      {"pid", i.pid}, {"dump_timestamp", i.dump_timestamp}, {"path", i.path}, {"status", i.status}, {"loads", i.loads}};
}

void AddJitCommands(CLI::App& app, GlobalOptions& g, int& exit_code) {
  CLI::App* jit = app.add_subcommand(
      "jit", "JIT code: ingest jitdump / perf-map files, resolve addresses, build-IDs of jitted DSOs");
  jit->require_subcommand(1);
  jit->footer(R"(Typical use, for a Node process profiled with perf:
  node --perf-prof --interpreted-frames-native-stack app.js    writes ./jit-<pid>.dump
  symdex jit ingest .                                           index every jit-*.dump / perf-*.map here
  symdex jit addr --pid 4242 0x7f6d5bf891d0                     which JS function, line, DSO, build-ID
  symdex jit collisions --scheme sha1-code                      which DSOs perf 6.17 would merge
  symdex jit export --out ./jitted --pid 4242                   jitted-<pid>-<idx>.so with unique build-IDs
  symdex jit dsos ~/.debug/jit .                                which load and perf era each jitted-*.so is
Times (--time, --instance) are the dump's own timestamps (CLOCK_MONOTONIC ns for Node, as perf -k 1).)");

  auto ingest = std::make_shared<IngestOptions>();
  CLI::App* ci = jit->add_subcommand(
      "ingest",
      "Index jitdump (jit-<pid>.dump) and perf map (perf-<pid>.map) files. A DIR is scanned (not recursively) for "
      "both. Re-running adds only what is new; a truncated or still-growing dump yields its complete records; a "
      "file that fails keeps the records before the bad one, and everything indexed earlier.");
  ci->footer(R"(Exit: 0 ingested (a truncated dump's complete records too), 1 no jit-*.dump or perf-*.map found,
3 some file failed, or the index cannot be written.)");
  ci->add_option("paths", ingest->paths, "Files or directories")->required();
  ci->add_flag("--json", g.json, "JSON output");
  ci->callback([&g, &exit_code, ingest] { exit_code = RunIngest(g, *ingest); });

  auto addr = std::make_shared<JitAddrOptions>();
  CLI::App* ca = jit->add_subcommand(
      "addr",
      "Which jitted function was at ADDR in process PID: name, code range, source line (nearest DEBUG_INFO entry at or "
      "before ADDR), code_index, the DSO `perf inject -j` writes for it and its build-ID. Falls back to the perf map "
      "when only that was ingested.");
  ca->footer(R"(Exit: 0 every ADDR covered, 1 some not, 2 a malformed address or scheme, or a pid several processes
used (choose with --time or --instance), 3 no index, or nothing ingested for the pid.)");
  ca->add_option("--pid", addr->pid, "Process id")->required();
  ca->add_option("--time", addr->time,
                 "Dump timestamp to resolve at (as in the dump: CLOCK_MONOTONIC ns); default: the latest placement. "
                 "Handles CODE_MOVE and address reuse, and picks the process instance when the pid was reused");
  ca->add_option("--instance", addr->instance, "The jitdump header timestamp of the process instance (pid reuse)");
  ca->add_option("--scheme", addr->scheme, kSchemeHelp)->capture_default_str();
  ca->add_option("addrs", addr->addrs, "Hex addresses (0x optional)")->required();
  ca->add_flag("--json", g.json, "JSON output (build-IDs under every scheme)");
  ca->callback([&g, &exit_code, addr] { exit_code = RunJitAddr(g, *addr); });

  auto coll = std::make_shared<CollisionOptions>();
  CLI::App* cc = jit->add_subcommand(
      "collisions",
      "Build-IDs shared by more than one jitted DSO, per scheme, and which distinct functions each merges (a tool "
      "keyed by build-ID shows them all as one).");
  cc->footer("Exit: 0 some build-ID is shared, 1 none, 2 an unknown scheme, 3 no index.");
  cc->add_option("--scheme", coll->scheme, kSchemeHelp);
  cc->add_option("--show", coll->show, "Groups to list per scheme")->capture_default_str();
  cc->add_flag("--json", g.json, "JSON output (every group)");
  cc->callback([&g, &exit_code, coll] { exit_code = RunCollisions(g, *coll); });

  auto exp = std::make_shared<ExportOptions>();
  CLI::App* ce = jit->add_subcommand(
      "export",
      "Write jitted-<pid>-<code_index>.so for every ingested CODE_LOAD, laid out as perf's genelf (ET_DYN, .text at "
      "0x80, symtab, .note.gnu.build-id) plus .debug_line/.debug_info where DEBUG_INFO exists, with the chosen "
      "scheme's build-ID (default symdex: unique per load).");
  ce->footer(R"(Exit: 0 written, 1 nothing to write (no dump of a supported machine), 2 an unknown scheme, or a pid
reused without --instance, 3 no index or nothing ingested, an unwritable --out, or --connect given.)");
  ce->add_option("--out", exp->out, "Directory to write into (created)")->required();
  ce->add_option("--scheme", exp->scheme, kSchemeHelp)->capture_default_str();
  ce->add_option("--pid", exp->pid, "Only this process");
  ce->add_option("--instance", exp->instance, "Only the dump with this header timestamp (pid reuse)");
  ce->add_flag("--json", g.json, "JSON output");
  ce->callback([&g, &exit_code, exp] { exit_code = RunExport(g, *exp); });

  auto dsos = std::make_shared<JitDsosOptions>();
  CLI::App* cd = jit->add_subcommand(
      "dsos",
      "Read the build-IDs of jitted DSOs already on disk -- the jitted-<pid>-<idx>.so files `perf inject -j` "
      "writes next to the dump (and perf's ~/.debug/jit/<name>/) or `symdex jit export` wrote -- and tell, for "
      "each, which ingested CODE_LOAD it is (same pid and code_index) and which scheme, i.e. perf era, produced its "
      "ID: md5-addr (perf <= 6.16 with libcrypto), sha1-code (perf 6.17), sha1-symtab (the Nov 2025 fix), symdex "
      "(symdex jit export); 'unknown' when it is none of them (e.g. perf built without libcrypto writes random "
      "IDs), 'no-load' when that load is not ingested. Then lists build-IDs shared by several DSOs on disk and the "
      "functions each merges (perf 6.17's collision).");
  cd->footer("Exit: 0 every DSO read, 1 no jitted-*.so found, 3 some could not be read (each reason printed).");
  cd->add_option("paths", dsos->paths,
                 "DSO files (any name), or directories: the jitted-*.so in them and one directory down")
      ->required();
  cd->add_flag("--json", g.json, "JSON output (every load compared, with all its scheme IDs)");
  cd->callback([&g, &exit_code, dsos] { exit_code = RunJitDsos(g, *dsos); });
}

}  // namespace symdex::cli
