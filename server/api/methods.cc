#include "server/api/methods.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "server/query/verbs.h"
#include "symdex/v1/symdex.pb.h"

namespace symdex::api {

const std::vector<Method>& AllMethods() {
  static const std::vector<Method> all = [] {
    std::vector<Method> v;
    query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
      v.push_back(Method{query::ServiceOf<V>(), V::kMethod, query::LabelOf<V>(), V::kHeavy, true});
      if constexpr (requires { V::kStreamMethod; }) {
        v.push_back(Method{query::ServiceOf<V>(), V::kStreamMethod, V::kStreamMethod, V::kHeavy, true});
      }
    });
    for (const Method& m : {rpc::kJitIngest}) {
      v.push_back(m);
    }
    // In the proto's order: its services', each one's RPCs' (the order the texts list them in).
    const google::protobuf::FileDescriptor* file = ::symdex::v1::ResolveRequest::descriptor()->file();
    auto place = [file](const Method& m) {
      const google::protobuf::ServiceDescriptor* s = file->FindServiceByName(m.service);
      const google::protobuf::MethodDescriptor* d = s == nullptr ? nullptr : s->FindMethodByName(m.rpc);
      return std::make_pair(s == nullptr ? file->service_count() : s->index(), d == nullptr ? 0 : d->index());
    };
    std::stable_sort(v.begin(), v.end(), [&](const Method& a, const Method& b) { return place(a) < place(b); });
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
