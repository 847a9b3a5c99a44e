// JitService: its lookups are verbs of query/verbs.h (JitAddr, MatchJittedDsos, JitCollisions),
// served as every verb is (verb_service.h); Ingest reads files on the daemon's host (jit::Ingester).
#include "server/api/methods.h"
#include "server/api/serve.h"
#include "server/api/verb_service.h"
#include "server/jit/ingest.h"

namespace symdex::api {

JitServiceImpl::JitServiceImpl(SymbolServiceImpl& symbols, jit::Ingester& ingester)
    : ingester_(ingester), stats_(symbols.stats()), control_(symbols.control()) {
  ForEachVerbHandler(symbols, "JitService",
                     [this](int index, auto* handler) { MarkMethodRawCallback(index, handler); });
  MethodName m = MethodOf(rpc::kJitIngest.service, rpc::kJitIngest.rpc);
  MarkMethodRawCallback(m.index, DecodedHere(this, &JitServiceImpl::Ingest, std::move(m.path)));
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
