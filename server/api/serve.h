// How the gRPC handlers (services.cc: SymbolService, jit_services.cc: JitService) run a call:
// the peer's limiter slots, heavy calls on the fair pool, the status recorded. Internal to
// server/api.
#pragma once

#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/api/convert.h"
#include "server/api/remote_query.h"
#include "server/api/router.h"
#include "server/api/services.h"
#include "server/common/strings.h"
#include "server/query/caller_view.h"

namespace symdex::api {

// The request and response of a unary call whose request symdex decodes itself (DecodedHere),
// on one arena: a Symbolize answer is thousands of small messages and strings, which the arena
// allocates by bumping a pointer and frees at once.
class DecodedMessages {
 public:
  virtual ~DecodedMessages() = default;
  // The response into the bytes gRPC sends as they are: before the call is finished.
  virtual grpc::Status Encode() = 0;
};

namespace serve_internal {
// DecodedHere's handler hands the call's messages to the UnaryCall that Serve makes for the same
// call: on the same thread, within the handler it calls (every unary handler goes through Serve).
inline thread_local DecodedMessages* t_decoded = nullptr;
}  // namespace serve_internal

// A unary call. Its call slot is given back when its answer is ready (Done); `holds` (the
// addresses of a Symbolize answer) only once gRPC is done with the call (OnDone: the answer
// sent, or the client gone), so an answer the client does not read keeps counting against its
// peer. (Counting the call slot until OnDone too made honest peers hit their limit under load:
// OnDone waits for the client's end of the stream to be processed.)
class UnaryCall : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(RpcStats& stats, const char* method)
      : call_(stats.Begin(method)), messages_(std::exchange(serve_internal::t_decoded, nullptr)) {}
  void Done(const grpc::Status& s) {
    status_ = s;
    if (status_.ok() && messages_ != nullptr) status_ = messages_->Encode();
    slot.Release();
    Finish(status_);
  }
  void OnDone() override {
    call_.Done(status_);
    delete this;
  }
  // OnDone is trivial (a counter, a histogram, the holds given back: short mutexes, no I/O), so
  // gRPC may run it where the call completes. Without this it hands every finished call to its
  // executor: a thread switch per call, measured at ~40% of a warm Resolve's daemon CPU.
  // (grpc::ServerReactor calls this "not API"; its 1.51 callback handlers honour it.)
  bool InternalInlineable() override { return true; }
  Limiter::Hold slot;
  std::vector<Limiter::Hold> holds;

 private:
  RpcStats::Call call_;
  grpc::Status status_;
  std::unique_ptr<DecodedMessages> messages_;  // the request the handler reads, until OnDone
};

// A method of a service: its index among the service's methods and its gRPC path
// ("/symdex.v1.SymbolService/Resolve").
struct MethodName {
  int index;
  std::string path;
};
MethodName MethodOf(std::string_view service, std::string_view method);

// The handler of a unary method at `path` that decodes the request itself instead of gRPC: a
// request that is no protobuf of the method's type (`request_type`'s), or has a string field that
// is not UTF-8, is answered INVALID_ARGUMENT saying so (UndecodableRequest), not with gRPC's bare
// UNIMPLEMENTED — without a server interceptor, whose machinery gRPC then runs for every call
// (measured at ~6 us of a warm Resolve's ~40 us of daemon CPU). `handler(ctx, request, response)`
// must answer through Serve.
template <typename Handler>
grpc::internal::MethodHandler* DecodedHereAs(const google::protobuf::Message* request_type,
                                             const google::protobuf::Message* response_type, std::string path,
                                             Handler handler) {
  // (A local class: nothing else makes one. Its members in the order they are made: the arena
  // before the messages on it.)
  struct Messages final : DecodedMessages {
    Messages(grpc::ByteBuffer* encoded, const google::protobuf::Message* req_type,
             const google::protobuf::Message* resp_type)
        : req(req_type->New(&arena)), resp(resp_type->New(&arena)), encoded(encoded) {}
    bool Decode(const grpc::ByteBuffer& in) {
      grpc::ByteBuffer bytes(in);  // (shares the slices; gRPC's reader consumes the buffer it reads)
      return grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&bytes, req).ok();
    }
    grpc::Status Encode() override {
      bool own = false;
      return grpc::SerializationTraits<google::protobuf::Message>::Serialize(*resp, encoded, &own);
    }
    google::protobuf::Arena arena;
    google::protobuf::Message* const req;
    google::protobuf::Message* const resp;
    grpc::ByteBuffer* const encoded;  // what gRPC sends
  };
  return new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
      [request_type, response_type, handler = std::move(handler), path = std::move(path)](
          grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
          grpc::ByteBuffer* out) -> grpc::ServerUnaryReactor* {
        auto m = std::make_unique<Messages>(out, request_type, response_type);
        if (!m->Decode(*in)) {
          grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
          r->Finish(UndecodableRequest(path));
          return r;
        }
        const google::protobuf::Message* req = m->req;
        google::protobuf::Message* resp = m->resp;
        serve_internal::t_decoded = m.release();
        grpc::ServerUnaryReactor* r = handler(ctx, req, resp);
        if (serve_internal::t_decoded != nullptr) {  // a handler that did not go through Serve
          std::fprintf(stderr, "symdexd: %s answered without Serve: its response would never be encoded\n",
                       path.c_str());
          std::abort();
        }
        return r;
      });
}

// DecodedHereAs for `method` of `svc`, a method of the generated service with its own types.
template <typename Svc, typename Req, typename Resp>
grpc::internal::MethodHandler* DecodedHere(Svc* svc,
                                           grpc::ServerUnaryReactor* (Svc::*method)(grpc::CallbackServerContext*,
                                                                                    const Req*, Resp*),
                                           std::string path) {
  return DecodedHereAs(&Req::default_instance(), &Resp::default_instance(), std::move(path),
                       [svc, method](grpc::CallbackServerContext* ctx, const google::protobuf::Message* req,
                                     google::protobuf::Message* resp) {
                         return (svc->*method)(ctx, static_cast<const Req*>(req), static_cast<Resp*>(resp));
                       });
}

inline grpc::Status Cancelled(const grpc::CallbackServerContext& ctx) {
  return grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled or its deadline passed before it ran");
}

// Queues a heavy call's `run` on the pool — after `wait` on the wait pool when there is one (a
// fleet kernel not indexed yet: SymbolServiceImpl::WaitFirst), so that the wait holds none of the
// pool's threads. The call's own look at the kernel afterwards is not counted again.
inline void SubmitHeavy(const CallControl& cc, const std::string& queue, std::function<void()> wait,
                        std::function<void()> run) {
  if (!wait || cc.wait_pool == nullptr) {
    cc.pool->Submit(queue, std::move(run));
    return;
  }
  cc.wait_pool->Submit(queue, [pool = cc.pool, queue, wait = std::move(wait), run = std::move(run)] {
    wait();
    pool->Submit(queue, [run] {
      QueryRouter::CountedElsewhere counted;
      run();
    });
  });
}

// Runs `fn(peer, holds)` for one unary call: the peer's slots first (RESOURCE_EXHAUSTED past a
// limit), heavy calls on the pool, the status recorded. `fn` never takes the daemon down.
// `wait_first` (a fleet kernel not indexed yet: SymbolServiceImpl::WaitFirst) runs on the wait
// pool before `fn` is queued on the heavy pool.
template <typename Fn>
grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* ctx, const CallControl& cc, RpcStats& stats,
                                const char* method, bool heavy, Fn&& fn, std::function<void()> wait_first = {}) {
  auto* r = new UnaryCall(stats, method);
  ctx->AddTrailingMetadata(kAnsweredHeader, "1");
  Peer peer = cc.registry->Of(*ctx, *cc.policy);
  auto call = cc.limiter->Take(peer, Limiter::Kind::kCall);
  if (!call.ok()) {
    r->Done(ToGrpc(call.status()));
    return r;
  }
  r->slot = std::move(*call);
  Limiter::Hold work;  // heavy: while queued or running (the answer's memory is held apart)
  if (heavy) {
    auto h = cc.limiter->Take(peer, Limiter::Kind::kHeavy);
    if (!h.ok()) {
      r->Done(ToGrpc(h.status()));
      return r;
    }
    work = std::move(*h);
  }
  const std::string queue = peer.key;  // the fair pool's per-peer queue
  auto run = [r, ctx, method, peer = std::move(peer), work = std::make_shared<Limiter::Hold>(std::move(work)),
              fn = std::forward<Fn>(fn)]() mutable {
    if (ctx->IsCancelled()) {
      work->Release();
      r->Done(Cancelled(*ctx));
      return;
    }
    grpc::Status s;
    try {
      s = fn(peer, r->holds);
    } catch (const std::exception& e) {
      s = grpc::Status(grpc::StatusCode::INTERNAL, StrCat(method, ": ", e.what()));
    }
    work->Release();
    r->Done(s);
  };
  if (heavy) {
    SubmitHeavy(cc, queue, std::move(wait_first), std::move(run));
  } else {
    run();
  }
  return r;
}

// A streaming reactor's end: the status it finishes with (End), counted in the RPC stats when
// gRPC is done with the call (OnDone), which then deletes it.
template <class Reactor>
class CountedStream : public Reactor {
 public:
  void OnDone() override {
    call_.Done(status_);
    delete this;
  }

 protected:
  explicit CountedStream(RpcStats::Call call) : call_(std::move(call)) {}
  void End(const grpc::Status& s) {
    status_ = s;
    this->Finish(s);
  }

 private:
  RpcStats::Call call_;
  grpc::Status status_;
};

// A bidi stream of batches (SymbolizeStream, SymbolizeFramesStream): one request read at a time,
// its answer built on the pool by `work` and written, and the next request read only once the
// client has taken the answer. The `count(request)` addresses or frames of an answer not yet read
// count against the peer's address budget.
template <typename Req, typename Resp>
class BatchStreamReactor : public CountedStream<grpc::ServerBidiReactor<Req, Resp>> {
 public:
  // How many addresses a request counts as until its answer is written (or why it is refused).
  using Count = std::function<absl::StatusOr<size_t>(const Req&)>;
  using Work = std::function<grpc::Status(const Peer&, const grpc::CallbackServerContext&, const Req&, Resp*)>;
  // What a batch waits for first, off the pool (as Serve's `wait_first`); may be null.
  using WaitFirst = std::function<std::function<void()>(const Req&)>;
  BatchStreamReactor(const CallControl& cc, RpcStats& stats, grpc::CallbackServerContext* ctx, const char* method,
                     Count count, Work work, WaitFirst wait_first = {})
      : CountedStream<grpc::ServerBidiReactor<Req, Resp>>(stats.Begin(method)),
        cc_(cc),
        ctx_(ctx),
        count_(std::move(count)),
        work_(std::move(work)),
        wait_first_(std::move(wait_first)) {
    ctx->AddTrailingMetadata(kAnsweredHeader, "1");
    peer_ = cc.registry->Of(*ctx, *cc.policy);
    if (absl::Status s = cc.limiter->TakeEach(peer_, {Limiter::Kind::kCall, Limiter::Kind::kStream}, stream_holds_);
        !s.ok()) {
      this->End(ToGrpc(s));
      return;
    }
    this->StartRead(&req_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed: all answered
      this->End(grpc::Status::OK);
      return;
    }
    absl::StatusOr<size_t> count = count_(req_);
    if (!count.ok()) {
      this->End(ToGrpc(count.status()));
      return;
    }
    auto items = cc_.limiter->Take(peer_, Limiter::Kind::kAddresses, *count);
    if (!items.ok()) {
      this->End(ToGrpc(items.status()));
      return;
    }
    unread_ = std::move(*items);
    auto heavy = cc_.limiter->Take(peer_, Limiter::Kind::kHeavy);
    if (!heavy.ok()) {
      this->End(ToGrpc(heavy.status()));
      return;
    }
    heavy_ = std::move(*heavy);
    auto run = [this] {
      resp_.Clear();
      grpc::Status s = ctx_->IsCancelled() ? Cancelled(*ctx_) : work_(peer_, *ctx_, req_, &resp_);
      heavy_.Release();
      if (!s.ok()) {
        this->End(s);
        return;
      }
      this->StartWrite(&resp_);
    };
    SubmitHeavy(cc_, peer_.key, wait_first_ && cc_.wait_pool ? wait_first_(req_) : nullptr, run);
  }
  void OnWriteDone(bool ok) override {
    unread_.Release();
    if (!ok) {
      this->End(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    this->StartRead(&req_);
  }

 private:
  const CallControl& cc_;
  grpc::CallbackServerContext* ctx_;
  Count count_;
  Work work_;
  WaitFirst wait_first_;
  Peer peer_;
  std::vector<Limiter::Hold> stream_holds_;
  Limiter::Hold heavy_, unread_;
  Req req_;
  Resp resp_;
};

inline query::AddressAccess AccessOf(const Peer& p) {
  return p.privileged ? query::AddressAccess::kAbsolute : query::AddressAccess::kKaslrFree;
}

inline grpc::Status PrivilegedOnly(const Peer& p, const char* what) {
  if (p.privileged) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      StrCat(what,
                             " is for privileged callers (root, CAP_SYSLOG, or a group/certificate the daemon "
                             "trusts): JIT records hold other users' process addresses and paths"));
}

}  // namespace symdex::api
