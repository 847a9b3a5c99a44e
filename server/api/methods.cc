#include "server/api/methods.h"

#include <algorithm>
#include <string_view>

#include "server/query/verbs.h"

namespace symdex::api {

const std::vector<Method>& AllMethods() {
  static const std::vector<Method> all = [] {
    std::vector<Method> v;
    query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
      v.push_back(Method{query::ServiceOf<V>(), V::kMethod, query::LabelOf<V>(), V::kHeavy, true});
    });
    for (const Method& m :
         {rpc::kSymbolize, rpc::kSymbolizeStream, rpc::kListDuplicates, rpc::kStatus, rpc::kListSymbols,
          rpc::kSymbolizeFrames, rpc::kSymbolizeFramesStream, rpc::kDecode, rpc::kSymbolizePprof, rpc::kJitIngest}) {
      v.push_back(m);
    }
    // SymbolService's first, then each other service's (the order the texts list them in).
    std::stable_partition(v.begin(), v.end(),
                          [](const Method& m) { return std::string_view(m.service) == "SymbolService"; });
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
