// symdex jit dsos: the jitted DSOs already on disk, which ingested load and perf era each is
// (server/jit/jit_files.h reads them here; the query API matches them against the index).
#include <fmt/core.h>

#include <filesystem>
#include <map>
#include <set>

#include "client/cli_common.h"
#include "client/cmd_jit.h"
#include "server/common/strings.h"
#include "server/jit/jit_files.h"

namespace symdex::cli {

namespace fs = std::filesystem;

int RunJitDsos(const GlobalOptions& g, const JitDsosOptions& o) {
  jit::JittedDsosOnDisk disk = jit::ReadJittedDsos(o.paths);
  const std::vector<JittedDso>& dsos = disk.dsos;
  const auto& unreadable = disk.unreadable;
  const std::vector<SharedDsoId>& shared = disk.shared;
  if (dsos.empty() && unreadable.empty()) {  // no file found (each found one is read or unreadable)
    if (g.json) {
      PrintJson({{"dsos", nlohmann::json::array()},
                 {"unreadable", nlohmann::json::array()},
                 {"shared_ids", nlohmann::json::array()}});
    } else {
      fmt::print(stderr, "symdex: no jitted-*.so files in {} (nor one directory down)\n", StrJoin(o.paths, ", "));
    }
    return kNotFound;
  }
  // The index (or the daemon) is optional: without one, the IDs and the on-disk collisions are
  // still reported.
  std::string no_index;
  std::vector<query::DsoMatch> matches;
  if (!dsos.empty()) {
    auto api = OpenQuery(g);
    if (api.ok()) {
      std::vector<query::JittedDsoKey> keys;
      for (const auto& d : dsos) {
        keys.push_back({.pid = d.name ? std::optional<uint32_t>(d.name->pid) : std::nullopt,
                        .code_index = d.name ? d.name->code_index : 0,
                        .build_id = d.build_id.ToHex(),
                        .symbol = d.symbol});
      }
      auto m = (*api)->MatchJittedDsos(keys);
      if (!m.ok()) return Fail(g, m.status());
      matches = std::move(*m);
    } else {
      no_index = std::string(api.status().message());
    }
  }
  if (matches.empty()) {
    for (size_t i = 0; i < dsos.size(); ++i) {
      matches.push_back(query::DsoMatch{.status = "no-index", .message = no_index});
    }
  }
  std::map<std::string, size_t> per_status;
  std::map<std::string, size_t> per_scheme;
  // The scheme each DSO's ID came from (first matching load), "" when none.
  std::vector<std::string> scheme_of(dsos.size());
  for (size_t i = 0; i < dsos.size(); ++i) {
    ++per_status[matches[i].status];
    for (const auto& c : matches[i].candidates) {
      if (!c.schemes.empty()) {
        scheme_of[i] = c.schemes.front();
        break;
      }
    }
    if (!scheme_of[i].empty()) ++per_scheme[scheme_of[i]];
  }
  auto shared_schemes = [&](const SharedDsoId& s) {
    std::set<std::string> out;
    for (size_t i : s.dsos) {
      if (!scheme_of[i].empty()) out.insert(scheme_of[i]);
    }
    return out;
  };

  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (size_t i = 0; i < dsos.size(); ++i) {
      const auto& d = dsos[i];
      const auto& m = matches[i];
      nlohmann::json loads = nlohmann::json::array();
      for (const auto& c : m.candidates) {
        loads.push_back({{"name", c.load.name},
                         {"pid", c.load.pid},
                         {"code_index", c.load.code_index},
                         {"code_addr", "0x" + Hex(c.load.code_addr)},
                         {"code_size", c.load.code_size},
                         {"load_time", c.load.load_time},
                         {"instance", InstanceJson(c.load.instance)},
                         {"schemes", c.schemes},
                         {"symbol_matches", c.symbol_matches},
                         {"build_ids", c.load.build_ids}});
      }
      nlohmann::json j = {{"path", d.path},
                          {"pid", d.name ? nlohmann::json(d.name->pid) : nlohmann::json(nullptr)},
                          {"code_index", d.name ? nlohmann::json(d.name->code_index) : nlohmann::json(nullptr)},
                          {"build_id", d.build_id.ToHex()},
                          {"symbol", d.symbol},
                          {"file_size", d.file_size},
                          {"status", m.status},
                          {"scheme", scheme_of[i].empty() ? nlohmann::json(nullptr) : nlohmann::json(scheme_of[i])},
                          {"era", scheme_of[i].empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(query::JitBuildIdSchemeEra(scheme_of[i]))},
                          {"message", m.message},
                          {"loads_with_id", m.loads_with_id},
                          {"loads", loads}};
      arr.push_back(j);
    }
    nlohmann::json bad = nlohmann::json::array();
    for (const auto& [p, why] : unreadable) {
      bad.push_back({{"path", p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p)}, {"error", why}});
    }
    nlohmann::json sh = nlohmann::json::array();
    for (const auto& s : shared) {
      nlohmann::json paths = nlohmann::json::array();
      for (size_t i : s.dsos) paths.push_back(dsos[i].path);
      sh.push_back({{"build_id", s.build_id},
                    {"dsos", paths},
                    {"functions", s.symbols},
                    {"distinct_functions", s.symbols.size()},
                    {"schemes", shared_schemes(s)}});
    }
    PrintJson(
        {{"dsos", arr}, {"unreadable", bad}, {"shared_ids", sh}, {"counts", per_status}, {"schemes", per_scheme}});
  } else {
    for (size_t i = 0; i < dsos.size(); ++i) {
      const auto& d = dsos[i];
      const auto& m = matches[i];
      fmt::print("{}\n  pid {} idx {}  build-id {}  symbol {}\n", d.path, d.name ? std::to_string(d.name->pid) : "?",
                 d.name ? std::to_string(d.name->code_index) : "?", d.build_id.ToHex(),
                 d.symbol.empty() ? "(none)" : d.symbol);
      if (m.status != "matched") {
        fmt::print("  {}: {}\n", m.status, m.message);
        continue;
      }
      for (const auto& c : m.candidates) {
        if (c.schemes.empty()) continue;
        fmt::print("  load {} (jitdump {}, header timestamp {}): scheme {} = {}\n", c.load.name, c.load.instance.path,
                   c.load.instance.dump_timestamp, StrJoin(c.schemes, ", "),
                   query::JitBuildIdSchemeEra(c.schemes.front()));
        if (!c.symbol_matches) {
          fmt::print("  note: the DSO's symbol '{}' is not the load's name\n", d.symbol);
        }
      }
    }
    for (const auto& [p, why] : unreadable) fmt::print(stderr, "symdex: cannot read {}\n", why);
    if (!shared.empty()) {
      fmt::print("build-IDs shared by several DSOs on disk (tools keyed by build-ID show them as one):\n");
      for (const auto& s : shared) {
        auto schemes = shared_schemes(s);
        fmt::print("  {}{} shared by {} DSOs, {} distinct functions: {}\n", s.build_id,
                   schemes.empty() ? "" : " (" + StrJoin(schemes, ", ") + ")", s.dsos.size(), s.symbols.size(),
                   StrJoin(s.symbols, ", "));
        std::vector<std::string> names;
        for (size_t i : s.dsos) names.push_back(fs::path(dsos[i].path).filename().string());
        fmt::print("    {}\n", StrJoin(names, ", "));
      }
    }
    std::vector<std::string> parts;
    for (const auto& [st, n] : per_status) parts.push_back(StrCat(n, " ", st));
    std::vector<std::string> sparts;
    for (const auto& [sc, n] : per_scheme) sparts.push_back(StrCat(sc, " ", n));
    fmt::print("{} DSOs read{}{}{}; {} build-IDs shared on disk; {} unreadable\n", dsos.size(),
               parts.empty() ? "" : ": " + StrJoin(parts, ", "),
               sparts.empty() ? "" : " (" + StrJoin(sparts, ", ") + ")", no_index.empty() ? "" : " [" + no_index + "]",
               shared.size(), unreadable.size());
  }
  return unreadable.empty() ? kFound : kEnvError;
}

}  // namespace symdex::cli
