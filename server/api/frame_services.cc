// SymbolizeFrames and its stream: frames from another host (query/answers.h: which forms are exact), answered by the
// index the router picks — for a kernel named by build-ID on a --fleet-cache daemon, that
// kernel's, fetched and indexed on first use with the modules the request names.
#include "server/api/convert.h"
#include "server/api/methods.h"
#include "server/api/serve.h"
#include "server/api/services.h"
#include "server/common/strings.h"
#include "server/query/caller_view.h"

namespace symdex::api {

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

namespace {
// What a frames request waits for first (serve.h): its kernel and modules, when not indexed yet.
std::function<void()> FramesWaitFirst(SymbolServiceImpl& svc, const pb::SymbolizeFramesRequest& req,
                                      std::chrono::system_clock::time_point deadline) {
  std::string target;
  query::FramesContext fc;
  FromProto(req, &target, &fc, nullptr);
  if (!query::CheckFramesRequest(fc, static_cast<size_t>(req.frames_size())).ok()) return nullptr;
  return svc.WaitFirst(query::FramesTarget(target, fc), fc.modules, deadline);
}
}  // namespace

grpc::ServerUnaryReactor* SymbolServiceImpl::SymbolizeFrames(grpc::CallbackServerContext* ctx,
                                                             const pb::SymbolizeFramesRequest* req,
                                                             pb::SymbolizeFramesResponse* resp) {
  return Serve(
      ctx, control(), stats(), rpc::kSymbolizeFrames.label, rpc::kSymbolizeFrames.heavy,
      [=, this](const Peer& peer, std::vector<Limiter::Hold>& holds) {
        auto unread = control().limiter->Take(peer, Limiter::Kind::kAddresses, static_cast<size_t>(req->frames_size()));
        if (!unread.ok()) return ToGrpc(unread.status());
        holds.push_back(std::move(*unread));
        return DoFrames(peer, *ctx, *req, resp);
      },
      FramesWaitFirst(*this, *req, ctx->deadline()));
}

grpc::ServerBidiReactor<pb::SymbolizeFramesRequest, pb::SymbolizeFramesResponse>*
SymbolServiceImpl::SymbolizeFramesStream(grpc::CallbackServerContext* ctx) {
  return new BatchStreamReactor<pb::SymbolizeFramesRequest, pb::SymbolizeFramesResponse>(
      control(), stats(), ctx, rpc::kSymbolizeFramesStream.label,
      [](const pb::SymbolizeFramesRequest& r) { return static_cast<size_t>(r.frames_size()); },
      [this](const Peer& peer, const grpc::CallbackServerContext& c, const pb::SymbolizeFramesRequest& r,
             pb::SymbolizeFramesResponse* out) { return DoFrames(peer, c, r, out); },
      [this, ctx](const pb::SymbolizeFramesRequest& r) { return FramesWaitFirst(*this, r, ctx->deadline()); });
}

}  // namespace symdex::api
