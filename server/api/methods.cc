#include "server/api/methods.h"

#include <string_view>

#include "server/query/verbs.h"

namespace symdex::api {

const std::vector<Method>& AllMethods() {
  static const std::vector<Method> all = [] {
    std::vector<Method> v;
    query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
      v.push_back(Method{"SymbolService", V::kMethod, V::kMethod, V::kHeavy, true});
    });
    for (const Method& m :
         {rpc::kSymbolize, rpc::kSymbolizeStream, rpc::kListDuplicates, rpc::kStatus, rpc::kListSymbols,
          rpc::kSymbolizeFrames, rpc::kSymbolizeFramesStream, rpc::kDecode, rpc::kSymbolizePprof, rpc::kJitAddr,
          rpc::kJitMatchDsos, rpc::kJitCollisions, rpc::kJitIngest}) {
      v.push_back(m);
    }
    return v;
  }();
  return all;
}

std::string NameOf(const Method& m) {
  return std::string_view(m.service) == "SymbolService" ? m.rpc : std::string(m.service) + "." + m.rpc;
}

std::string HeavyMethodNames() {
  std::string out;
  for (const Method& m : AllMethods()) {
    if (!m.heavy) continue;
    if (!out.empty()) out += ", ";
    out += NameOf(m);
  }
  return out;
}

}  // namespace symdex::api
