// JitService: JIT-ed code lookups through the query layer (query::CallerView keeps them for
// privileged peers), and ingest of files on the daemon's host (jit::Ingester).
#include "server/api/methods.h"
#include "server/api/serve.h"
#include "server/jit/ingest.h"

namespace symdex::api {

JitServiceImpl::JitServiceImpl(query::LocalQuery& q, jit::Ingester& ingester, RpcStats& stats, CallControl control)
    : q_(q), ingester_(ingester), stats_(stats), control_(control) {
  auto decoded_here = [this](const Method& rpc, auto method) {
    MethodName m = MethodOf(rpc.service, rpc.rpc);
    MarkMethodRawCallback(m.index, DecodedHere(this, method, std::move(m.path)));
  };
  decoded_here(rpc::kJitAddr, &JitServiceImpl::Addr);
  decoded_here(rpc::kJitMatchDsos, &JitServiceImpl::MatchDsos);
  decoded_here(rpc::kJitCollisions, &JitServiceImpl::Collisions);
  decoded_here(rpc::kJitIngest, &JitServiceImpl::Ingest);
}

grpc::ServerUnaryReactor* JitServiceImpl::Addr(grpc::CallbackServerContext* ctx, const pb::JitAddrRequest* req,
                                               pb::JitAddrResponse* resp) {
  return Serve(ctx, control_, stats_, rpc::kJitAddr.label, rpc::kJitAddr.heavy, [=, this](const Peer& peer, auto&) {
    query::JitAddrRequest q{.pid = req->pid(), .addresses = {req->addresses().begin(), req->addresses().end()}};
    if (req->has_time()) q.time = req->time();
    if (req->has_instance()) q.instance = req->instance();
    auto answer = query::CallerView(q_, AccessOf(peer)).JitAddr(q);
    if (!answer.ok()) return ToGrpc(answer.status());
    ToProto(*answer, resp);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* JitServiceImpl::MatchDsos(grpc::CallbackServerContext* ctx, const pb::MatchDsosRequest* req,
                                                    pb::MatchDsosResponse* resp) {
  return Serve(ctx, control_, stats_, rpc::kJitMatchDsos.label, rpc::kJitMatchDsos.heavy,
               [=, this](const Peer& peer, auto&) {
                 std::vector<query::JittedDsoKey> keys;
                 keys.reserve(req->dsos_size());
                 for (const auto& k : req->dsos()) keys.push_back(FromProto(k));
                 auto answer = query::CallerView(q_, AccessOf(peer)).MatchJittedDsos(keys);
                 if (!answer.ok()) return ToGrpc(answer.status());
                 for (const auto& m : *answer) ToProto(m, resp->add_matches());
                 return grpc::Status::OK;
               });
}

grpc::ServerUnaryReactor* JitServiceImpl::Collisions(grpc::CallbackServerContext* ctx,
                                                     const pb::JitCollisionsRequest* req,
                                                     pb::JitCollisionsResponse* resp) {
  return Serve(ctx, control_, stats_, rpc::kJitCollisions.label, rpc::kJitCollisions.heavy,
               [=, this](const Peer& peer, auto&) {
                 std::optional<std::string> scheme;
                 if (!req->scheme().empty()) scheme = req->scheme();
                 auto answer = query::CallerView(q_, AccessOf(peer)).JitCollisions(scheme);
                 if (!answer.ok()) return ToGrpc(answer.status());
                 ToProto(*answer, resp);
                 return grpc::Status::OK;
               });
}

grpc::ServerUnaryReactor* JitServiceImpl::Ingest(grpc::CallbackServerContext* ctx, const pb::JitIngestRequest* req,
                                                 pb::JitIngestResponse* resp) {
  return Serve(ctx, control_, stats_, rpc::kJitIngest.label, rpc::kJitIngest.heavy, [=, this](const Peer& peer, auto&) {
    // Ingest reads files with the daemon's rights: privileged peers only.
    if (auto s = PrivilegedOnly(peer, "JitService.Ingest"); !s.ok()) return s;
    constexpr int kMaxPaths = 1024;
    if (req->paths_size() > kMaxPaths) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          StrCat(req->paths_size(), " paths; the limit is ", kMaxPaths));
    }
    for (const auto& p : req->paths()) {
      if (auto s = query::CheckFieldSize("path", p, query::kMaxPathLength); !s.ok()) return ToGrpc(s);
    }
    auto reports = ingester_.Ingest({req->paths().begin(), req->paths().end()});
    if (!reports.ok()) return ToGrpc(reports.status());
    for (const jit::IngestReport& rep : *reports) {
      pb::JitIngestResponse::File* o = resp->add_files();
      o->set_path(rep.path);
      o->set_kind(rep.kind);
      o->set_status(rep.status);
      o->set_message(rep.message);
      o->set_loads(rep.loads);
    }
    return grpc::Status::OK;
  });
}

}  // namespace symdex::api
