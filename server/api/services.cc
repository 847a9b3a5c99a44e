#include "server/api/services.h"

#include <grpcpp/support/message_allocator.h>

#include <map>
#include <tuple>

#include "server/api/convert.h"
#include "server/common/build_id.h"
#include "server/common/strings.h"
#include "server/jit/jit_store.h"
#include "server/store/migrations.h"

namespace symdex::api {
namespace {

// Runs `fn` and finishes the call with its status, recording it.
template <typename Fn>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, RpcStats& stats, const char* method, Fn&& fn) {
  auto call = stats.Begin(method);
  grpc::Status s;
  try {
    s = fn();
  } catch (const std::exception& e) {  // never take the daemon down for one request
    s = grpc::Status(grpc::StatusCode::INTERNAL, StrCat(method, ": ", e.what()));
  }
  call.Done(s);
  auto* r = ctx->DefaultReactor();
  r->Finish(s);
  return r;
}

void TargetInfoTo(const store::TargetInfo& t, pb::Target* out) { ToProto(query::TargetSummary{t, {}}, out); }

void JitLoadTo(const jit::JitLoadInfo& l, pb::JitLoad* out) {
  out->set_pid(l.pid);
  out->set_code_index(l.code_index);
  out->set_name(l.name);
  out->set_code_address(l.code_addr);
  out->set_code_size(l.code_size);
  out->set_address(l.addr);
  out->set_dso(l.DsoName());
  for (const auto& [scheme, hex] : l.build_ids) (*out->mutable_build_ids())[scheme] = hex;
  if (l.line) {
    out->set_source_file(l.line->file);
    out->set_source_line(l.line->line);
    out->set_source_column(l.line->column);
  }
  out->set_dump_timestamp(l.instance.dump_timestamp);
  out->set_dump_path(l.instance.path);
}

// A read connection for the JIT and build-ID calls (rare next to symbol queries).
absl::StatusOr<store::Db> OpenRead(const std::string& path) { return store::OpenIndex(path, store::Db::Mode::kReadOnly); }

// Request and response of a unary call on one protobuf arena: a Symbolize answer is thousands
// of small messages and strings, which the arena allocates by bumping a pointer and frees at once.
template <typename Req, typename Resp>
class ArenaAllocator : public grpc::MessageAllocator<Req, Resp> {
  class Holder : public grpc::MessageHolder<Req, Resp> {
   public:
    Holder() {
      this->set_request(google::protobuf::Arena::CreateMessage<Req>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Resp>(&arena_));
    }
    void Release() override { delete this; }

   private:
    google::protobuf::Arena arena_;
  };

 public:
  grpc::MessageHolder<Req, Resp>* AllocateMessages() override { return new Holder; }
};

class DupsWriter : public grpc::ServerWriteReactor<pb::DuplicateGroup> {
 public:
  DupsWriter(RpcStats& stats, absl::StatusOr<query::DupsResult> r) : call_(stats.Begin("ListDuplicates")) {
    if (!r.ok()) {
      Finish(ToGrpc(r.status()));
      return;
    }
    result_ = std::move(*r);
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Next();
  }
  void OnDone() override {
    call_.Done(status_);
    delete this;
  }

 private:
  void Finish(const grpc::Status& s) {
    status_ = s;
    ServerWriteReactor::Finish(s);
  }
  void Next() {
    msg_.Clear();
    if (i_ == 0) TargetInfoTo(result_.target, msg_.mutable_target_info());
    if (i_ >= result_.groups.size()) {
      if (i_ == 0) {  // no duplicates: one message carrying only the target
        ++i_;
        StartWrite(&msg_);
        return;
      }
      Finish(grpc::Status::OK);
      return;
    }
    const auto& g = result_.groups[i_++];
    msg_.set_name(g.name);
    for (const auto& in : g.instances) ToProto(in, msg_.add_instances());
    StartWrite(&msg_);
  }
  RpcStats::Call call_;
  grpc::Status status_;
  query::DupsResult result_;
  size_t i_ = 0;
  pb::DuplicateGroup msg_;
};

class SymbolizeStreamReactor : public grpc::ServerBidiReactor<pb::SymbolizeRequest, pb::SymbolizeResponse> {
 public:
  SymbolizeStreamReactor(SymbolServiceImpl* svc, RpcStats& stats) : svc_(svc), call_(stats.Begin("SymbolizeStream")) {
    StartRead(&req_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed: all answered
      Done(grpc::Status::OK);
      return;
    }
    resp_.Clear();
    grpc::Status s = svc_->DoSymbolize(req_, &resp_);
    if (!s.ok()) {
      Done(s);
      return;
    }
    StartWrite(&resp_);
  }
  void OnWriteDone(bool ok) override {
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
  RpcStats::Call call_;
  grpc::Status status_;
  pb::SymbolizeRequest req_;
  pb::SymbolizeResponse resp_;
};

}  // namespace

RpcStats::Call RpcStats::Begin(const char* method) {
  ++in_flight_;
  return Call{this, method, std::chrono::steady_clock::now()};
}

void RpcStats::Call::Done(const grpc::Status& s) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  --stats->in_flight_;
  ++stats->served_;
  if (stats->registry_ == nullptr) return;
  static const char* kCodes[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  int code = static_cast<int>(s.error_code());
  if (code < 0 || code > 16) code = 2;
  // The series of this (registry, method, code), looked up in the registry once per thread:
  // the hot path takes no lock.
  struct Series {
    metrics::Counter* requests;
    metrics::Histogram* latency;
  };
  thread_local std::map<std::tuple<const void*, const char*, int>, Series> series;
  auto key = std::make_tuple(static_cast<const void*>(stats->registry_), method, code);
  auto it = series.find(key);
  if (it == series.end()) {
    Series s2{&stats->registry_->GetCounter("symdex_rpc_requests_total",
                                            "gRPC calls finished, by method and status code",
                                            {{"method", method}, {"code", kCodes[code]}}),
              &stats->registry_->GetHistogram("symdex_rpc_duration_seconds", "gRPC call latency (server side)",
                                              {{"method", method}})};
    it = series.emplace(key, s2).first;
  }
  it->second.requests->Inc();
  it->second.latency->Observe(secs);
}

SymbolServiceImpl::SymbolServiceImpl(query::LocalQuery& q, RpcStats& stats,
                                     std::function<void(pb::StatusResponse*)> status)
    : q_(q), stats_(stats), status_(std::move(status)) {
  static ArenaAllocator<pb::SymbolizeRequest, pb::SymbolizeResponse> symbolize_alloc;
  static ArenaAllocator<pb::LinesRequest, pb::LinesResponse> lines_alloc;
  static ArenaAllocator<pb::WhichRequest, pb::WhichResponse> which_alloc;
  static ArenaAllocator<pb::ResolveRequest, pb::ResolveResponse> resolve_alloc;
  SetMessageAllocatorFor_Symbolize(&symbolize_alloc);
  SetMessageAllocatorFor_Lines(&lines_alloc);
  SetMessageAllocatorFor_Which(&which_alloc);
  SetMessageAllocatorFor_Resolve(&resolve_alloc);
}

grpc::ServerUnaryReactor* SymbolServiceImpl::ListTargets(grpc::CallbackServerContext* ctx,
                                                         const pb::ListTargetsRequest*, pb::ListTargetsResponse* resp) {
  return Unary(ctx, stats_, "ListTargets", [&] {
    auto t = q_.Targets();
    if (!t.ok()) return ToGrpc(t.status());
    for (const auto& s : *t) ToProto(s, resp->add_targets());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Which(grpc::CallbackServerContext* ctx, const pb::WhichRequest* req,
                                                   pb::WhichResponse* resp) {
  return Unary(ctx, stats_, "Which", [&] {
    if (req->name().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name is empty");
    auto r = q_.Which(req->target(), req->name(), req->exact());
    if (!r.ok()) return ToGrpc(r.status());
    resp->set_target(r->target.name);
    TargetInfoTo(r->target, resp->mutable_target_info());
    for (const auto& in : r->instances) ToProto(in, resp->add_instances());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Resolve(grpc::CallbackServerContext* ctx, const pb::ResolveRequest* req,
                                                     pb::ResolveResponse* resp) {
  return Unary(ctx, stats_, "Resolve", [&] {
    auto r = q_.Resolve(req->target(), req->spec());
    if (!r.ok()) return ToGrpc(r.status());
    if (r->matches.size() != 1) return ResolveError(req->spec(), *r);
    resp->set_target(r->target.name);
    TargetInfoTo(r->target, resp->mutable_target_info());
    ToProto(r->matches[0], resp->mutable_match());
    return grpc::Status::OK;
  });
}

grpc::Status SymbolServiceImpl::DoSymbolize(const pb::SymbolizeRequest& req, pb::SymbolizeResponse* resp) {
  std::vector<uint64_t> addrs(req.addresses().begin(), req.addresses().end());
  auto r = q_.Symbolize(req.target(), addrs);
  if (!r.ok()) return ToGrpc(r.status());
  resp->set_target(r->target.name);
  TargetInfoTo(r->target, resp->mutable_target_info());
  for (size_t i = 0; i < r->results.size(); ++i) ToProto(r->addresses[i], *r->results[i], resp->add_results());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Symbolize(grpc::CallbackServerContext* ctx,
                                                       const pb::SymbolizeRequest* req, pb::SymbolizeResponse* resp) {
  return Unary(ctx, stats_, "Symbolize", [&] { return DoSymbolize(*req, resp); });
}

grpc::ServerBidiReactor<pb::SymbolizeRequest, pb::SymbolizeResponse>* SymbolServiceImpl::SymbolizeStream(
    grpc::CallbackServerContext*) {
  return new SymbolizeStreamReactor(this, stats_);
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Lines(grpc::CallbackServerContext* ctx, const pb::LinesRequest* req,
                                                   pb::LinesResponse* resp) {
  return Unary(ctx, stats_, "Lines", [&] {
    auto r = q_.Lines(req->target(), req->file(), req->line());
    if (!r.ok()) return ToGrpc(r.status());
    resp->set_target(r->target.name);
    TargetInfoTo(r->target, resp->mutable_target_info());
    for (size_t i = 0; i < r->results.size(); ++i) ToProto(r->addresses[i], *r->results[i], resp->add_addresses());
    return grpc::Status::OK;
  });
}

grpc::ServerWriteReactor<pb::DuplicateGroup>* SymbolServiceImpl::ListDuplicates(grpc::CallbackServerContext*,
                                                                               const pb::ListDuplicatesRequest* req) {
  query::DupsOptions o;
  o.module = req->module();
  o.all_types = req->all_types();
  o.with_init = req->with_init();
  return new DupsWriter(stats_, q_.Dups(req->target(), o));
}

grpc::ServerUnaryReactor* SymbolServiceImpl::ProbeDefinition(grpc::CallbackServerContext* ctx,
                                                             const pb::ProbeDefinitionRequest* req,
                                                             pb::ProbeDefinitionResponse* resp) {
  return Unary(ctx, stats_, "ProbeDefinition", [&] {
    query::KprobeOptions o;
    if (!req->group().empty()) o.group = req->group();
    o.event = req->event();
    o.ret = req->return_probe();
    o.fetchargs.assign(req->fetchargs().begin(), req->fetchargs().end());
    auto r = q_.Probe(req->target(), req->spec(), o);
    if (!r.ok()) return ToGrpc(r.status());
    if (r->resolved.matches.size() != 1) return ResolveError(req->spec(), r->resolved);
    resp->set_target(r->resolved.target.name);
    TargetInfoTo(r->resolved.target, resp->mutable_target_info());
    ToProto(r->resolved.matches[0], resp->mutable_match());
    resp->set_kprobe(r->kprobe);
    resp->set_ftrace_filter(r->ftrace_filter);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* SymbolServiceImpl::LookupBuildId(grpc::CallbackServerContext* ctx,
                                                           const pb::LookupBuildIdRequest* req,
                                                           pb::LookupBuildIdResponse* resp) {
  return Unary(ctx, stats_, "LookupBuildId", [&] {
    auto bid = BuildId::FromHex(req->build_id());
    if (!bid || bid->empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          StrCat("'", Excerpt(req->build_id(), 80), "' is not a hex build-ID"));
    }
    const std::string hex = bid->ToHex();
    auto db = OpenRead(q_.path());
    if (!db.ok()) return ToGrpc(db.status());
    auto snap = store::ReadSnapshot::Begin(*db);
    if (!snap.ok()) return ToGrpc(snap.status());
    auto kernel = query::KernelBuildIdHits(*db, hex);
    if (!kernel.ok()) return ToGrpc(kernel.status());
    auto jitted = jit::FindJitBuildId(*db, hex);
    if (!jitted.ok()) return ToGrpc(jitted.status());
    resp->set_build_id(hex);
    for (const auto& h : *kernel) {
      pb::BuildIdHit* o = resp->add_hits();
      o->set_kind(h.kind);
      o->set_name(h.name);
      o->set_target(h.target);
    }
    for (const auto& m : *jitted) {
      pb::BuildIdHit* o = resp->add_hits();
      o->set_kind("jitted");
      o->set_name(m.load.DsoName());
      o->set_scheme(m.scheme);
      JitLoadTo(m.load, o->mutable_load());
    }
    if (resp->hits_size() == 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, StrCat("nothing indexed has build-ID ", hex));
    }
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Status(grpc::CallbackServerContext* ctx, const pb::StatusRequest*,
                                                    pb::StatusResponse* resp) {
  return Unary(ctx, stats_, "Status", [&] {
    auto t = q_.Targets();
    if (!t.ok()) return ToGrpc(t.status());
    for (const auto& s : *t) ToProto(s, resp->add_targets());
    resp->set_database(q_.path());
    resp->set_debug_files(q_.DebugFileCount());
    resp->set_requests_served(stats_.served());
    if (status_) status_(resp);
    return grpc::Status::OK;
  });
}

// ---------------------------------------------------------------------------------------------

JitServiceImpl::JitServiceImpl(std::string db_path, store::Db& writer, std::mutex& writer_mu, RpcStats& stats)
    : db_path_(std::move(db_path)), writer_(writer), writer_mu_(writer_mu), stats_(stats) {}

grpc::ServerUnaryReactor* JitServiceImpl::Addr(grpc::CallbackServerContext* ctx, const pb::JitAddrRequest* req,
                                               pb::JitAddrResponse* resp) {
  return Unary(ctx, stats_, "JitAddr", [&] {
    if (static_cast<size_t>(req->addresses_size()) > query::kMaxAddressesPerRequest) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          StrCat(req->addresses_size(), " addresses; the limit is ", query::kMaxAddressesPerRequest));
    }
    auto db = OpenRead(db_path_);
    if (!db.ok()) return ToGrpc(db.status());
    auto snap = store::ReadSnapshot::Begin(*db);
    if (!snap.ok()) return ToGrpc(snap.status());
    std::optional<uint64_t> time, instance;
    if (req->has_time()) time = req->time();
    if (req->has_instance()) instance = req->instance();
    auto inst = jit::SelectInstance(*db, req->pid(), time, instance);
    if (!inst.ok()) return ToGrpc(inst.status());
    auto has_map = jit::HasPerfMap(*db, req->pid());
    if (!has_map.ok()) return ToGrpc(has_map.status());
    if (!*inst && !*has_map) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          StrCat("nothing ingested for pid ", req->pid(), " (no jit-", req->pid(), ".dump or perf-",
                                 req->pid(), ".map)"));
    }
    for (uint64_t a : req->addresses()) {
      pb::JitAddrResult* r = resp->add_results();
      r->set_address(a);
      if (*inst) {
        auto hit = jit::LookupJitAddr(*db, **inst, a, time);
        if (!hit.ok()) return ToGrpc(hit.status());
        if (*hit) {
          JitLoadTo(**hit, r->mutable_load());
          continue;
        }
      }
      if (*has_map) {
        auto m = jit::LookupPerfMap(*db, req->pid(), a);
        if (!m.ok()) return ToGrpc(m.status());
        if (*m) r->set_perf_map_symbol((*m)->entry.name);
      }
    }
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* JitServiceImpl::Collisions(grpc::CallbackServerContext* ctx,
                                                     const pb::JitCollisionsRequest* req,
                                                     pb::JitCollisionsResponse* resp) {
  return Unary(ctx, stats_, "JitCollisions", [&] {
    std::optional<jit::JitBuildIdScheme> scheme;
    if (!req->scheme().empty()) {
      auto s = jit::ParseJitBuildIdScheme(req->scheme());
      if (!s) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            StrCat("unknown scheme '", Excerpt(req->scheme(), 40),
                                   "' (md5-addr, sha1-code, sha1-symtab, symdex)"));
      }
      scheme = *s;
    }
    auto db = OpenRead(db_path_);
    if (!db.ok()) return ToGrpc(db.status());
    auto groups = jit::JitCollisions(*db, scheme);
    if (!groups.ok()) return ToGrpc(groups.status());
    for (const auto& g : *groups) {
      pb::JitCollision* c = resp->add_collisions();
      c->set_scheme(g.scheme);
      c->set_build_id(g.build_id);
      c->set_distinct_names(g.distinct_names);
      for (const auto& l : g.loads) JitLoadTo(l, c->add_loads());
    }
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* JitServiceImpl::Ingest(grpc::CallbackServerContext* ctx, const pb::JitIngestRequest* req,
                                                 pb::JitIngestResponse* resp) {
  return Unary(ctx, stats_, "JitIngest", [&] {
    std::vector<std::string> paths(req->paths().begin(), req->paths().end());
    auto files = jit::ExpandJitPaths(paths);
    if (!files.ok()) return ToGrpc(files.status());
    std::lock_guard<std::mutex> l(writer_mu_);
    for (const auto& f : *files) {
      jit::IngestReport rep = jit::IngestJitFile(writer_, f);
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
