// Talking to symdexd: opens symdex-remote.so (server/api/remote_plugin.h), the gRPC client the CLI
// does not link, on the first remote call of the process.
#pragma once

#include <memory>

#include "server/api/remote_query.h"
#include "server/common/status.h"
#include "server/query/api.h"

namespace symdex::cli {

absl::StatusOr<std::unique_ptr<query::QueryApi>> ConnectRemote(const api::ConnectOptions& opts);

}  // namespace symdex::cli
