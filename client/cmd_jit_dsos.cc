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

namespace {

// The DSOs read from disk and what the index says of each: its match (status "no-index" and why,
// without an index), the scheme its ID came from (first matching load; "" when none), counts.
struct DsoReport {
  jit::JittedDsosOnDisk disk;
  std::string no_index;
  std::vector<query::DsoMatch> matches;  // parallel to disk.dsos
  std::vector<std::string> scheme_of;    // parallel to disk.dsos
  std::map<std::string, size_t> per_status, per_scheme;
  // The schemes of the DSOs sharing `s`'s ID.
  std::set<std::string> SharedSchemes(const SharedDsoId& s) const {
    std::set<std::string> out;
    for (size_t i : s.dsos) {
      if (!scheme_of[i].empty()) out.insert(scheme_of[i]);
    }
    return out;
  }
};

// The index (or the daemon) is optional: without one, the IDs and the on-disk collisions are
// still reported. Fails only when the index answers with an error.
absl::Status MatchAgainstTheIndex(const GlobalOptions& g, DsoReport& r) {
  const std::vector<JittedDso>& dsos = r.disk.dsos;
  if (!dsos.empty()) {
    auto api = OpenQuery(g);
    if (api.ok()) {
      query::MatchDsosRequest req;
      for (const auto& d : dsos) {
        req.dsos.push_back({.pid = d.name ? std::optional<uint32_t>(d.name->pid) : std::nullopt,
                            .code_index = d.name ? d.name->code_index : 0,
                            .build_id = d.build_id.ToHex(),
                            .symbol = d.symbol});
      }
      ASSIGN_OR_RETURN(auto answer, (*api)->Ask<query::MatchJittedDsos>(req));
      r.matches = std::move(answer.matches);
    } else {
      r.no_index = std::string(api.status().message());
    }
  }
  if (r.matches.empty()) {
    for (size_t i = 0; i < dsos.size(); ++i) {
      r.matches.push_back(query::DsoMatch{.status = "no-index", .message = r.no_index});
    }
  }
  r.scheme_of.resize(dsos.size());
  for (size_t i = 0; i < dsos.size(); ++i) {
    ++r.per_status[r.matches[i].status];
    for (const auto& c : r.matches[i].candidates) {
      if (!c.schemes.empty()) {
        r.scheme_of[i] = c.schemes.front();
        break;
      }
    }
    if (!r.scheme_of[i].empty()) ++r.per_scheme[r.scheme_of[i]];
  }
  return absl::OkStatus();
}

nlohmann::json DsoJson(const JittedDso& d, const query::DsoMatch& m, const std::string& scheme) {
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
  return {{"path", d.path},
          {"pid", d.name ? nlohmann::json(d.name->pid) : nlohmann::json(nullptr)},
          {"code_index", d.name ? nlohmann::json(d.name->code_index) : nlohmann::json(nullptr)},
          {"build_id", d.build_id.ToHex()},
          {"symbol", d.symbol},
          {"file_size", d.file_size},
          {"status", m.status},
          {"scheme", scheme.empty() ? nlohmann::json(nullptr) : nlohmann::json(scheme)},
          {"era", scheme.empty() ? nlohmann::json(nullptr) : nlohmann::json(query::JitBuildIdSchemeEra(scheme))},
          {"message", m.message},
          {"loads_with_id", m.loads_with_id},
          {"loads", loads}};
}

void PrintReportJson(const DsoReport& r) {
  const std::vector<JittedDso>& dsos = r.disk.dsos;
  nlohmann::json arr = nlohmann::json::array();
  for (size_t i = 0; i < dsos.size(); ++i) arr.push_back(DsoJson(dsos[i], r.matches[i], r.scheme_of[i]));
  nlohmann::json bad = nlohmann::json::array();
  for (const auto& [p, why] : r.disk.unreadable) {
    bad.push_back({{"path", p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p)}, {"error", why}});
  }
  nlohmann::json sh = nlohmann::json::array();
  for (const auto& s : r.disk.shared) {
    nlohmann::json paths = nlohmann::json::array();
    for (size_t i : s.dsos) paths.push_back(dsos[i].path);
    sh.push_back({{"build_id", s.build_id},
                  {"dsos", paths},
                  {"functions", s.symbols},
                  {"distinct_functions", s.symbols.size()},
                  {"schemes", r.SharedSchemes(s)}});
  }
  PrintJson(
      {{"dsos", arr}, {"unreadable", bad}, {"shared_ids", sh}, {"counts", r.per_status}, {"schemes", r.per_scheme}});
}

void PrintReportText(const DsoReport& r) {
  const std::vector<JittedDso>& dsos = r.disk.dsos;
  for (size_t i = 0; i < dsos.size(); ++i) {
    const auto& d = dsos[i];
    const auto& m = r.matches[i];
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
  for (const auto& [p, why] : r.disk.unreadable) fmt::print(stderr, "symdex: cannot read {}\n", why);
  if (!r.disk.shared.empty()) {
    fmt::print("build-IDs shared by several DSOs on disk (tools keyed by build-ID show them as one):\n");
    for (const auto& s : r.disk.shared) {
      auto schemes = r.SharedSchemes(s);
      fmt::print("  {}{} shared by {} DSOs, {} distinct functions: {}\n", s.build_id,
                 schemes.empty() ? "" : " (" + StrJoin(schemes, ", ") + ")", s.dsos.size(), s.symbols.size(),
                 StrJoin(s.symbols, ", "));
      std::vector<std::string> names;
      for (size_t i : s.dsos) names.push_back(fs::path(dsos[i].path).filename().string());
      fmt::print("    {}\n", StrJoin(names, ", "));
    }
  }
  std::vector<std::string> parts;
  for (const auto& [st, n] : r.per_status) parts.push_back(StrCat(n, " ", st));
  std::vector<std::string> sparts;
  for (const auto& [sc, n] : r.per_scheme) sparts.push_back(StrCat(sc, " ", n));
  fmt::print("{} DSOs read{}{}{}; {} build-IDs shared on disk; {} unreadable\n", dsos.size(),
             parts.empty() ? "" : ": " + StrJoin(parts, ", "), sparts.empty() ? "" : " (" + StrJoin(sparts, ", ") + ")",
             r.no_index.empty() ? "" : " [" + r.no_index + "]", r.disk.shared.size(), r.disk.unreadable.size());
}

}  // namespace

int RunJitDsos(const GlobalOptions& g, const JitDsosOptions& o) {
  DsoReport r{.disk = jit::ReadJittedDsos(o.paths)};
  if (r.disk.dsos.empty() && r.disk.unreadable.empty()) {  // no file found (each found one is read or unreadable)
    if (g.json) {
      PrintJson({{"dsos", nlohmann::json::array()},
                 {"unreadable", nlohmann::json::array()},
                 {"shared_ids", nlohmann::json::array()}});
    } else {
      fmt::print(stderr, "symdex: no jitted-*.so files in {} (nor one directory down)\n", StrJoin(o.paths, ", "));
    }
    return kNotFound;
  }
  if (absl::Status s = MatchAgainstTheIndex(g, r); !s.ok()) return Fail(g, s);
  if (g.json) {
    PrintReportJson(r);
  } else {
    PrintReportText(r);
  }
  return r.disk.unreadable.empty() ? kFound : kEnvError;
}

}  // namespace symdex::cli
