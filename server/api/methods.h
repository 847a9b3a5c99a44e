// Every RPC symdexd serves, with the traits its handler runs by: a verb declared in
// query/verbs.h brings its own (kMethod, kHeavy); each other RPC has its entry below, which its
// handler names. The texts that list the heavy calls (the limiter's refusal, symdexd --help) are
// made from this list, and MethodsTest checks it against the proto: every RPC of symdex.v1's
// services is here exactly once.
#pragma once

#include <string>
#include <vector>

namespace symdex::api {

struct Method {
  const char* service;  // "SymbolService" | "JitService"
  const char* rpc;      // as the proto names it
  const char* label;    // the method label of its metrics and log lines
  // Queued on the heavy pool (serve.h); otherwise answered on the gRPC thread, except a call
  // for a fleet kernel by build-ID, which may wait for an index run and so always queues.
  bool heavy = false;
  bool declared = false;  // a verb of query/verbs.h (its handler: verb_service.h)
};

// The RPCs whose handlers are written by hand.
namespace rpc {
inline constexpr Method kJitIngest{"JitService", "Ingest", "JitIngest", true};
}  // namespace rpc

// Every RPC, in the proto's order.
const std::vector<Method>& AllMethods();
// How texts name a method: "Symbolize" (SymbolService's), "JitService.Addr" (another service's).
std::string NameOf(const Method& m);
// The heavy RPCs, "Symbolize, SymbolizeStream, ..., JitService.Addr, ...": what the texts about
// the heavy pool name.
std::string HeavyMethodNames();

}  // namespace symdex::api
