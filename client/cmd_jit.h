// What the `symdex jit` verbs (cmd_jit.cc, cmd_jit_dsos.cc) and `symdex buildid` share.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "client/cli_common.h"

namespace symdex::cli {

// A process instance in --json output.
nlohmann::json InstanceJson(const query::JitInstanceInfo& i);
// A jitted function's load in --json output (jit addr, buildid).
nlohmann::json LoadJson(const query::JitFunction& l);

struct JitDsosOptions {
  std::vector<std::string> paths;
};
int RunJitDsos(const GlobalOptions& g, const JitDsosOptions& o);

}  // namespace symdex::cli
