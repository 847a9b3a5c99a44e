// The entry points of symdex-remote.so (server/api/remote_plugin.h).
#include "server/api/remote_plugin.h"

#include <string_view>
#include <type_traits>

#define SYMDEX_EXPORT extern "C" __attribute__((visibility("default")))

SYMDEX_EXPORT const char* symdex_remote_version() { return SYMDEX_VERSION; }

SYMDEX_EXPORT void symdex_remote_connect(const symdex::api::ConnectOptions& opts,
                                         absl::StatusOr<std::unique_ptr<symdex::query::QueryApi>>& out) {
  auto r = symdex::api::RemoteQuery::Connect(opts);
  if (!r.ok()) {
    out = r.status();
    return;
  }
  out = std::unique_ptr<symdex::query::QueryApi>(std::move(*r));
}

// The names the CLI looks up must be the ones defined here.
static_assert(std::string_view(symdex::api::kRemoteVersionSymbol) == "symdex_remote_version");
static_assert(std::string_view(symdex::api::kRemoteConnectSymbol) == "symdex_remote_connect");
static_assert(std::is_same_v<symdex::api::RemoteVersionFn, decltype(&symdex_remote_version)>);
static_assert(std::is_same_v<symdex::api::RemoteConnectFn, decltype(&symdex_remote_connect)>);
