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

// Where a call of V goes: its RouteOf, else its target; and the router's decision for it, made
// here once for the whole call.
template <class V>
CallRoute RouteFor(const QueryRouter& router, const typename V::Request& req) {
  CallRoute out;
  if constexpr (requires { V::RouteOf(req); }) {
    out.verb = V::RouteOf(req);
  } else if constexpr (requires { req.target; }) {
    out.verb.target = req.target;
  }
  out.routed =
      router.Route(out.verb.target, out.verb.modules.ok() ? *out.verb.modules : std::vector<query::FrameModule>{});
  return out;
}

// What a call of V waits for first, off the pool (SymbolServiceImpl::WaitFirst): nothing when it
// goes to the own index, or when its verb refuses the request anyway (before anything is fetched
// for it).
template <class V>
std::function<void()> WaitFirstFor(SymbolServiceImpl& server, const typename V::Request& req, const CallRoute& route,
                                   std::chrono::system_clock::time_point deadline) {
  if (!route.routed.fleet() || !route.verb.modules.ok()) return nullptr;
  if constexpr (requires { V::RouteOf(req); }) {
    if (!V::Check(req).ok()) return nullptr;
  }
  return server.WaitFirst(route.routed, deadline);
}

// V's request in slices of V::kSlice (between two, a cancelled call stops), merged; all from one
// generation of the target: asked again from the start (three times at most) when the target is
// re-indexed between two slices.
template <class V>
absl::StatusOr<typename V::Answer> AskInSlices(query::QueryApi& view, const grpc::CallbackServerContext& ctx,
                                               const typename V::Request& req) {
  if ((req.*V::kParts).size() <= V::kSlice) return view.template AskWhole<V>(req);  // one slice: one generation
  for (int attempt = 0; attempt < 4; ++attempt) {
    typename V::Answer whole;
    std::optional<int64_t> generation;
    bool changed = false;
    auto slice = [&](const typename V::Request& part, size_t first) -> absl::StatusOr<bool> {
      if (first > 0 && ctx.IsCancelled()) return absl::CancelledError(std::string(Cancelled(ctx).error_message()));
      ASSIGN_OR_RETURN(typename V::Answer a, view.template AskWhole<V>(part));
      if (generation && *generation != a.target.generation) {
        changed = true;
        return false;
      }
      generation = a.target.generation;
      V::Merge(whole, std::move(a));
      return true;
    };
    RETURN_IF_ERROR(query::ForEachPart<V>(req, V::kSlice, slice));
    if (!changed) return whole;
  }
  return absl::AbortedError("the target was re-indexed during the call, four times: ask again");
}

template <class V>
grpc::Status SymbolServiceImpl::AnswerVerb(const Peer& peer, const grpc::CallbackServerContext& ctx,
                                           const typename V::Request& req, const CallRoute& route,
                                           google::protobuf::Message* out) {
  if constexpr (
      requires { V::RouteOf(req); } || requires { V::Weight(req); }) {
    // Refused before anything is fetched or read for it.
    if (absl::Status s = V::Check(req); !s.ok()) return ToGrpc(s);
    if (!route.verb.modules.ok()) return ToGrpc(route.verb.modules.status());
  }
  auto q = router_.Open(route.routed, ctx.deadline());
  if (!q.ok()) return ToGrpc(q.status());
  query::CallerView view(**q, AccessOf(peer));
  absl::StatusOr<typename V::Answer> a;
  if constexpr (requires { V::kSlice; }) {
    a = AskInSlices<V>(view, ctx, req);
  } else {
    a = view.template AskWhole<V>(req);
  }
  if (!a.ok()) return ToGrpc(a.status());
  if constexpr (requires { V::Resolved(*a); }) {
    // The wire's answer names one copy; none or several go as the status (convert.h).
    if (const query::ResolveResult& r = V::Resolved(*a); r.matches.size() != 1) return ResolveError(req.spec, r);
  }
  if constexpr (requires { V::ServerPart(*a); }) {  // what the daemon says of itself
    query::ServerState& server = V::ServerPart(*a);
    server.requests_served = stats_.served();
    if (status_) status_(server);
  }
  if constexpr (requires { V::NotFoundMessage(*a); }) {
    if (std::string m = V::NotFoundMessage(*a); !m.empty()) return grpc::Status(grpc::StatusCode::NOT_FOUND, m);
  }
  ToWire(*a, out);
  return grpc::Status::OK;
}

template <class V>
grpc::ServerUnaryReactor* SymbolServiceImpl::ServeVerb(grpc::CallbackServerContext* ctx,
                                                       const google::protobuf::Message& in,
                                                       google::protobuf::Message* out) {
  auto req = std::make_shared<typename V::Request>();
  FromWire(in, req.get());
  auto route = std::make_shared<const CallRoute>(RouteFor<V>(router_, *req));
  return Serve(
      ctx, control_, stats_, query::LabelOf<V>(), V::kHeavy || route->routed.fleet(),
      [=, this](const Peer& peer, std::vector<Limiter::Hold>& holds) {
        if constexpr (requires { V::Weight(*req); }) {  // counted until the answer is read
          auto unread = control_.limiter->Take(peer, Limiter::Kind::kAddresses, V::Weight(*req));
          if (!unread.ok()) return ToGrpc(unread.status());
          holds.push_back(std::move(*unread));
        }
        return AnswerVerb<V>(peer, *ctx, *req, *route, out);
      },
      WaitFirstFor<V>(*this, *req, *route, ctx->deadline()));
}

// A verb's bidi stream (kStreamMethod): each request read is answered as one call of the verb,
// the next read once the answer is written (serve.h BatchStreamReactor).
template <class V>
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ServeVerbStream(SymbolServiceImpl& server,
                                                                             grpc::CallbackServerContext* ctx,
                                                                             const VerbWire& w, std::string path) {
  // The request being answered: one at a time per stream.
  struct Current {
    google::protobuf::Arena arena;
    google::protobuf::Message* msg = nullptr;
    typename V::Request req;
    CallRoute route;
  };
  auto now = std::make_shared<Current>();
  now->msg = w.request->New(&now->arena);
  using Reactor = BatchStreamReactor<grpc::ByteBuffer, grpc::ByteBuffer>;
  return new Reactor(
      server.control(), server.stats(), ctx, V::kStreamMethod,
      [now, &server, path = std::move(path)](const grpc::ByteBuffer& in) -> absl::StatusOr<size_t> {
        grpc::ByteBuffer bytes(in);
        now->msg->Clear();
        if (!grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&bytes, now->msg).ok()) {
          return absl::InvalidArgumentError(std::string(UndecodableRequest(path).error_message()));
        }
        now->req = typename V::Request{};
        FromWire(*now->msg, &now->req);
        now->route = RouteFor<V>(server.router(), now->req);
        return V::Weight(now->req);
      },
      [now, &server, &w](const Peer& peer, const grpc::CallbackServerContext& c, const grpc::ByteBuffer&,
                         grpc::ByteBuffer* out) {
        google::protobuf::Arena arena;
        google::protobuf::Message* resp = w.response->New(&arena);
        if (grpc::Status s = server.AnswerVerb<V>(peer, c, now->req, now->route, resp); !s.ok()) return s;
        bool own = false;
        return grpc::SerializationTraits<google::protobuf::Message>::Serialize(*resp, out, &own);
      },
      [now, &server, ctx](const grpc::ByteBuffer&) {
        return WaitFirstFor<V>(server, now->req, now->route, ctx->deadline());
      });
}

// A verb whose answer is a stream of parts (V::Part): the answer computed on the pool (the heavy
// part: its heavy slot is given back once the answer is built), then written one part at a time —
// the next only after the client has taken the previous one, so an unread stream holds one message
// and its share of the answer. Its call and stream slots (and a listing slot for kListing) are held
// until the stream ends.
template <class V>
class VerbStream final : public CountedStream<grpc::ServerWriteReactor<grpc::ByteBuffer>> {
 public:
  // `req` null: the request could not be decoded (`refused` says so).
  VerbStream(SymbolServiceImpl& svc, grpc::CallbackServerContext* ctx, std::shared_ptr<typename V::Request> req,
             const google::protobuf::Message* part_type, grpc::Status refused)
      : CountedStream<grpc::ServerWriteReactor<grpc::ByteBuffer>>(svc.stats().Begin(query::LabelOf<V>())),
        msg_(part_type->New(&arena_)) {
    ctx->AddTrailingMetadata(kAnsweredHeader, "1");
    if (req == nullptr) {
      End(refused);
      return;
    }
    const CallControl& cc = svc.control();
    Peer peer = cc.registry->Of(*ctx, *cc.policy);
    std::vector<Limiter::Kind> kinds = {Limiter::Kind::kCall, Limiter::Kind::kStream};
    if constexpr (requires { V::kListing; }) kinds.push_back(Limiter::Kind::kListing);
    kinds.push_back(Limiter::Kind::kHeavy);
    if (absl::Status s = cc.limiter->TakeEach(peer, kinds, holds_); !s.ok()) {
      End(ToGrpc(s));
      return;
    }
    CallRoute route = RouteFor<V>(svc.router(), *req);
    std::function<void()> wait = WaitFirstFor<V>(svc, *req, route, ctx->deadline());
    std::function<void()> run = [this, &svc, ctx, peer, routed = std::move(route.routed), req] {
      if (ctx->IsCancelled()) {
        End(Cancelled(*ctx));
        return;
      }
      auto q = svc.router().Open(routed, ctx->deadline());
      if (!q.ok()) {
        End(ToGrpc(q.status()));
        return;
      }
      auto a = query::CallerView(**q, AccessOf(peer)).template AskWhole<V>(*req);
      holds_.pop_back();  // the heavy part is over; the stream stays counted
      if (!a.ok()) {
        End(ToGrpc(a.status()));
        return;
      }
      answer_ = std::move(*a);
      Next();
    };
    SubmitHeavy(cc, peer.key, std::move(wait), std::move(run));
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      End(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Next();
  }

 private:
  void Next() {
    typename V::Part part;
    if (!V::PartOf(answer_, i_++, part)) {
      End(grpc::Status::OK);
      return;
    }
    msg_->Clear();
    ToWire(part, msg_);
    bool own = false;
    bytes_.Clear();
    if (grpc::Status s = grpc::SerializationTraits<google::protobuf::Message>::Serialize(*msg_, &bytes_, &own);
        !s.ok()) {
      End(s);
      return;
    }
    StartWrite(&bytes_);
  }
  google::protobuf::Arena arena_;
  google::protobuf::Message* msg_;
  grpc::ByteBuffer bytes_;
  std::vector<Limiter::Hold> holds_;  // the last one (heavy) is released once computed
  typename V::Answer answer_;
  size_t i_ = 0;
};

// f(index, handler) for every verb whose RPC is in `service` ("SymbolService", "JitService"): the
// handlers that service's constructor registers (MarkMethodRawCallback is the service's own), each
// served by `server`.
template <class F>
void ForEachVerbHandler(SymbolServiceImpl& server, std::string_view service, F&& f) {
  query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
    if (std::string_view(query::ServiceOf<V>()) != service) return;
    const VerbWire& w = WireOf<V>();
    if constexpr (requires { typename V::Part; }) {
      using Handler = grpc::internal::CallbackServerStreamingHandler<grpc::ByteBuffer, grpc::ByteBuffer>;
      f(w.index, new Handler([&server, &w](grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* in) -> grpc::ServerWriteReactor<grpc::ByteBuffer>* {
          google::protobuf::Arena arena;
          google::protobuf::Message* m = w.request->New(&arena);
          grpc::ByteBuffer bytes(*in);  // (shares the slices; the reader consumes the buffer it reads)
          if (!grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&bytes, m).ok()) {
            return new VerbStream<V>(server, ctx, nullptr, w.response, UndecodableRequest(w.path));
          }
          auto req = std::make_shared<typename V::Request>();
          FromWire(*m, req.get());
          return new VerbStream<V>(server, ctx, std::move(req), w.response, grpc::Status::OK);
        }));
    } else {
      if constexpr (requires { V::kStreamMethod; }) {
        MethodName m = MethodOf(query::ServiceOf<V>(), V::kStreamMethod);
        f(m.index, new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                       [&server, &w, path = m.path](grpc::CallbackServerContext* ctx) {
                         return ServeVerbStream<V>(server, ctx, w, path);
                       }));
      }
      f(w.index,
        DecodedHereAs(w.request, w.response, w.path,
                      [&server](grpc::CallbackServerContext* ctx, const google::protobuf::Message* req,
                                google::protobuf::Message* resp) { return server.ServeVerb<V>(ctx, *req, resp); }));
    }
  });
}

}  // namespace symdex::api
