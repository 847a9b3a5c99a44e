// SymbolizeFrames and its stream: frames from another host (query/frames.h), answered by the
// index the router picks — for a kernel named by build-ID on a --fleet-cache daemon, that
// kernel's, fetched and indexed on first use with the modules the request names.
#include "server/api/convert.h"
#include "server/api/serve.h"
#include "server/api/services.h"
#include "server/common/strings.h"
#include "server/query/caller_view.h"

namespace symdex::api {
namespace {

// One request read at a time; its answer built on the pool and written; the next read only once
// the client has taken it. The frames of an answer not yet read count against the peer's
// address budget, as SymbolizeStream's addresses do.
class FramesStreamReactor : public grpc::ServerBidiReactor<pb::SymbolizeFramesRequest, pb::SymbolizeFramesResponse> {
 public:
  FramesStreamReactor(SymbolServiceImpl* svc, grpc::CallbackServerContext* ctx)
      : svc_(svc), ctx_(ctx), call_(svc->stats().Begin("SymbolizeFramesStream")) {
    ctx->AddTrailingMetadata(kAnsweredHeader, "1");
    const CallControl& cc = svc->control();
    peer_ = cc.registry->Of(*ctx, *cc.policy);
    for (auto kind : {Limiter::Kind::kCall, Limiter::Kind::kStream}) {
      auto h = cc.limiter->Take(peer_, kind);
      if (!h.ok()) {
        Done(ToGrpc(h.status()));
        return;
      }
      stream_holds_.push_back(std::move(*h));
    }
    StartRead(&req_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Done(grpc::Status::OK);
      return;
    }
    const CallControl& cc = svc_->control();
    auto frames = cc.limiter->Take(peer_, Limiter::Kind::kAddresses, static_cast<size_t>(req_.frames_size()));
    if (!frames.ok()) {
      Done(ToGrpc(frames.status()));
      return;
    }
    unread_ = std::move(*frames);
    auto heavy = cc.limiter->Take(peer_, Limiter::Kind::kHeavy);
    if (!heavy.ok()) {
      Done(ToGrpc(heavy.status()));
      return;
    }
    heavy_ = std::move(*heavy);
    cc.pool->Submit(peer_.key, [this] {
      resp_.Clear();
      grpc::Status s = ctx_->IsCancelled() ? Cancelled(*ctx_) : svc_->DoFrames(peer_, *ctx_, req_, &resp_);
      heavy_.Release();
      if (!s.ok()) {
        Done(s);
        return;
      }
      StartWrite(&resp_);
    });
  }
  void OnWriteDone(bool ok) override {
    unread_.Release();
    if (!ok) {
      Done(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    StartRead(&req_);
  }
  void OnDone() override {
    call_.Done(status_);
    delete this;
  }

 private:
  void Done(const grpc::Status& s) {
    status_ = s;
    Finish(s);
  }
  SymbolServiceImpl* svc_;
  grpc::CallbackServerContext* ctx_;
  RpcStats::Call call_;
  Peer peer_;
  std::vector<Limiter::Hold> stream_holds_;
  Limiter::Hold heavy_, unread_;
  grpc::Status status_;
  pb::SymbolizeFramesRequest req_;
  pb::SymbolizeFramesResponse resp_;
};

}  // namespace

grpc::Status SymbolServiceImpl::DoFrames(const Peer& peer, const grpc::CallbackServerContext& ctx,
                                         const pb::SymbolizeFramesRequest& req, pb::SymbolizeFramesResponse* resp) {
  if (static_cast<size_t>(req.frames_size()) > query::kMaxAddressesPerRequest) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        StrCat(req.frames_size(), " frames in one request; the limit is ", query::kMaxAddressesPerRequest));
  }
  std::string target;
  query::FramesContext fc;
  std::vector<query::FrameIn> frames;
  FromProto(req, &target, &fc, &frames);
  // A malformed request is refused before anything is fetched for it.
  if (absl::Status s = query::CheckFramesRequest(fc, frames.size()); !s.ok()) return ToGrpc(s);
  auto q = router().For(query::FramesTarget(target, fc), fc.modules, ctx.deadline());
  if (!q.ok()) return ToGrpc(q.status());
  auto r = query::CallerView(**q, AccessOf(peer)).Frames(target, fc, frames);
  if (!r.ok()) return ToGrpc(r.status());
  ToProto(*r, resp);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* SymbolServiceImpl::SymbolizeFrames(grpc::CallbackServerContext* ctx,
                                                             const pb::SymbolizeFramesRequest* req,
                                                             pb::SymbolizeFramesResponse* resp) {
  return Serve(
      ctx, control(), stats(), "SymbolizeFrames", true, [=, this](const Peer& peer, std::vector<Limiter::Hold>& holds) {
        auto unread = control().limiter->Take(peer, Limiter::Kind::kAddresses, static_cast<size_t>(req->frames_size()));
        if (!unread.ok()) return ToGrpc(unread.status());
        holds.push_back(std::move(*unread));
        return DoFrames(peer, *ctx, *req, resp);
      });
}

grpc::ServerBidiReactor<pb::SymbolizeFramesRequest, pb::SymbolizeFramesResponse>*
SymbolServiceImpl::SymbolizeFramesStream(grpc::CallbackServerContext* ctx) {
  return new FramesStreamReactor(this, ctx);
}

}  // namespace symdex::api
