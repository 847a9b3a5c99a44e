// symdex-remote.so: the CLI's gRPC client (RemoteQuery) as a module the CLI opens only when it
// talks to symdexd. Linked into the CLI, gRPC, protobuf, c-ares, re2, upb and ~30 abseil
// libraries would be loaded and relocated by every `symdex` process — most of the start-up of an
// embedded call such as `symdex kprobe NAME@FILE` or `symdex addr`, which never use them.
// This header is the module's whole interface; it names no gRPC type.
#pragma once

#include <memory>

#include "server/api/remote_query.h"

namespace symdex::api {

// The module's file name: next to the CLI (the build tree, `make install` into one bin/ dir) or
// in ../lib/symdex/ from it (FHS packages); SYMDEX_REMOTE_MODULE names another.
inline constexpr const char* kRemoteModuleFile = "symdex-remote.so";
// Exported with C linkage: the version the module was built as (the CLI loads only its own).
inline constexpr const char* kRemoteVersionSymbol = "symdex_remote_version";
using RemoteVersionFn = const char* (*)();
// Exported with C linkage: RemoteQuery::Connect.
inline constexpr const char* kRemoteConnectSymbol = "symdex_remote_connect";
using RemoteConnectFn = void (*)(const ConnectOptions& opts, absl::StatusOr<std::unique_ptr<query::QueryApi>>& out);

}  // namespace symdex::api
