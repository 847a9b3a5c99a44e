// The daemon's handler of every verb declared in server/query/verbs.h: registered for its RPC
// by its service's constructor (ForEachVerbHandler), it reads the request by field name (wire_fields.h), asks
// the caller's view of the call's index (the fleet's kernel by build-ID, or the own one) inside
// Serve — the peer's call slot, the pool when the verb is heavy or waits for a fleet kernel —
// and writes the answer back. Internal to server/api.
#pragma once

#include "server/api/serve.h"
#include "server/api/services.h"
#include "server/api/wire_fields.h"
#include "server/query/caller_view.h"

namespace symdex::api {

template <class V>
grpc::ServerUnaryReactor* SymbolServiceImpl::ServeVerb(grpc::CallbackServerContext* ctx,
                                                       const google::protobuf::Message& in,
                                                       google::protobuf::Message* out) {
  auto req = std::make_shared<typename V::Request>();
  FromWire(in, req.get());
  std::string target;
  if constexpr (requires { req->target; }) target = req->target;
  return Serve(
      ctx, control_, stats_, query::LabelOf<V>(), V::kHeavy || Fleet(target),
      [=, this](const Peer& peer, auto&) {
        auto q = router_.For(target, {}, ctx->deadline());
        if (!q.ok()) return ToGrpc(q.status());
        auto a = query::CallerView(**q, AccessOf(peer)).template AskWhole<V>(*req);
        if (!a.ok()) return ToGrpc(a.status());
        if constexpr (requires { V::Resolved(*a); }) {
          // The wire's answer names one copy; none or several go as the status (convert.h).
          if (const query::ResolveResult& r = V::Resolved(*a); r.matches.size() != 1) return ResolveError(req->spec, r);
        }
        if constexpr (requires { V::NotFoundMessage(*a); }) {
          if (std::string m = V::NotFoundMessage(*a); !m.empty()) return grpc::Status(grpc::StatusCode::NOT_FOUND, m);
        }
        ToWire(*a, out);
        return grpc::Status::OK;
      },
      WaitFirst(target, {}, ctx->deadline()));
}

// f(index, handler) for every verb whose RPC is in `service` ("SymbolService", "JitService"): the
// handlers that service's constructor registers (MarkMethodRawCallback is the service's own), each
// served by `server`.
template <class F>
void ForEachVerbHandler(SymbolServiceImpl& server, std::string_view service, F&& f) {
  query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
    if (std::string_view(query::ServiceOf<V>()) != service) return;
    const VerbWire& w = WireOf<V>();
    f(w.index,
      DecodedHereAs(w.request, w.response, w.path,
                    [&server](grpc::CallbackServerContext* ctx, const google::protobuf::Message* req,
                              google::protobuf::Message* resp) { return server.ServeVerb<V>(ctx, *req, resp); }));
  });
}

}  // namespace symdex::api
