// symdex buildid HEX: what has that build-ID: jitted DSOs under any scheme, kernels, modules and
// debug files.
#include <fmt/core.h>

#include "client/cli_common.h"
#include "client/cmd_jit.h"
#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::cli {
namespace {

int RunBuildId(const GlobalOptions& g, const std::string& hex_in) {
  // A malformed argument is told before a missing index.
  auto hex = query::CanonicalBuildId(hex_in);
  if (!hex.ok()) return Fail(g, hex.status());
  auto api = OpenQuery(g);
  if (!api.ok()) return Fail(g, api.status());
  auto answer = (*api)->Ask<query::LookupBuildId>({.build_id = *hex});
  if (!answer.ok()) return Fail(g, answer.status());
  const auto& jitted = answer->jitted;
  const auto& kernel = answer->kernel;
  if (g.json) {
    nlohmann::json j = nlohmann::json::array(), k = nlohmann::json::array();
    for (const auto& m : jitted) {
      nlohmann::json l = LoadJson(m.load);
      l["scheme"] = m.scheme;
      j.push_back(l);
    }
    for (const auto& h : kernel) k.push_back({{"kind", h.kind}, {"name", h.name}, {"target", h.target}});
    PrintJson({{"build_id", *hex}, {"jitted", j}, {"kernel", k}});
  } else {
    for (const auto& m : jitted) {
      fmt::print("jitted  {} ({} scheme) {} code_index {} pid {} at 0x{} size {} (jitdump {})\n", m.load.DsoName(),
                 m.scheme, m.load.name, m.load.code_index, m.load.pid, Hex(m.load.code_addr), m.load.code_size,
                 m.load.instance.path);
    }
    for (const auto& h : kernel) {
      fmt::print("{:<7} {}{}\n", h.kind, h.name, h.target.empty() ? "" : " (target " + h.target + ")");
    }
    if (answer->empty()) fmt::print(stderr, "symdex: nothing indexed has build-ID {}\n", *hex);
  }
  return answer->empty() ? kNotFound : kFound;
}

}  // namespace

void AddBuildIdCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto hex = std::make_shared<std::string>();
  CLI::App* cb = app.add_subcommand(
      "buildid",
      "What has build-ID HEX: jitted DSOs (under any scheme: symdex, sha1-symtab, sha1-code, md5-addr), kernels, "
      "modules and debug files.");
  cb->footer("Exit: 0 something has it, 1 nothing, 2 not a hex build-ID, 3 no index.");
  cb->add_option("hex", *hex, "Build-ID in hex")->required();
  cb->add_flag("--json", g.json, "JSON output");
  cb->callback([&g, &exit_code, hex] { exit_code = RunBuildId(g, *hex); });
}

}  // namespace symdex::cli
