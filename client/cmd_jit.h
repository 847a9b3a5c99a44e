// What the `symdex jit` verbs (cmd_jit.cc, cmd_jit_dsos.cc) share.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "client/cli_common.h"

namespace symdex::cli {

// A process instance in --json output.
nlohmann::json InstanceJson(const query::JitInstanceInfo& i);

struct JitDsosOptions {
  std::vector<std::string> paths;
};
int RunJitDsos(const GlobalOptions& g, const JitDsosOptions& o);

}  // namespace symdex::cli
