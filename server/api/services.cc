#include "server/api/services.h"

#include <map>
#include <tuple>

#include "server/api/convert.h"
#include "server/api/methods.h"
#include "server/api/serve.h"
#include "server/api/verb_service.h"
#include "server/common/strings.h"
#include "server/query/caller_view.h"

namespace symdex::api {
namespace {

void TargetInfoTo(const TargetInfo& t, pb::Target* out) { ToProto(query::TargetSummary{t, {}}, out); }

// A server stream of one computed answer (ListDuplicates, ListSymbols): computed on the pool
// (the heavy part: its heavy slot is given back once the answer is built), then written one
// message at a time — the next only after the client has taken the previous one, so an unread
// stream holds one message and its share of the answer. `compute` returns the function filling
// message i (false past the last one).
template <typename Msg>
class ListWriter : public grpc::ServerWriteReactor<Msg> {
 public:
  using Fill = std::function<bool(size_t, Msg*)>;
  using Compute = std::function<absl::StatusOr<Fill>(query::CallerView&)>;
  ListWriter(SymbolServiceImpl* svc, grpc::CallbackServerContext* ctx, const char* method,
             std::initializer_list<Limiter::Kind> kinds, const std::string& target, Compute compute)
      : call_(svc->stats().Begin(method)) {
    ctx->AddTrailingMetadata(kAnsweredHeader, "1");
    const CallControl& cc = svc->control();
    Peer peer = cc.registry->Of(*ctx, *cc.policy);
    for (auto kind : kinds) {
      auto h = cc.limiter->Take(peer, kind);
      if (!h.ok()) {
        Finish(ToGrpc(h.status()));
        return;
      }
      holds_.push_back(std::move(*h));
    }
    std::function<void()> run = [this, svc, ctx, peer, target, compute = std::move(compute)] {
      if (ctx->IsCancelled()) {
        Finish(Cancelled(*ctx));
        return;
      }
      auto q = svc->router().For(target, {}, ctx->deadline());
      if (!q.ok()) {
        Finish(ToGrpc(q.status()));
        return;
      }
      query::CallerView view(**q, AccessOf(peer));
      auto fill = compute(view);
      holds_.pop_back();  // the heavy part is over; the stream stays counted
      if (!fill.ok()) {
        Finish(ToGrpc(fill.status()));
        return;
      }
      fill_ = std::move(*fill);
      Next();
    };
    SubmitHeavy(cc, peer.key, svc->WaitFirst(target, {}, ctx->deadline()), std::move(run));
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
    grpc::ServerWriteReactor<Msg>::Finish(s);
  }
  void Next() {
    msg_.Clear();
    if (!fill_(i_++, &msg_)) {
      Finish(grpc::Status::OK);
      return;
    }
    this->StartWrite(&msg_);
  }
  RpcStats::Call call_;
  std::vector<Limiter::Hold> holds_;  // the last one (heavy) is released once computed
  grpc::Status status_;
  Fill fill_;
  size_t i_ = 0;
  Msg msg_;
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
  static const char* kCodes[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
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
    Series s2{
        &stats->registry_->GetCounter("symdex_rpc_requests_total", "gRPC calls finished, by method and status code",
                                      {{"method", method}, {"code", kCodes[code]}}),
        &stats->registry_->GetHistogram("symdex_rpc_duration_seconds", "gRPC call latency (server side)",
                                        {{"method", method}})};
    it = series.emplace(key, s2).first;
  }
  it->second.requests->Inc();
  it->second.latency->Observe(secs);
}

std::function<void()> SymbolServiceImpl::WaitFirst(const std::string& target,
                                                   const std::vector<query::FrameModule>& modules,
                                                   std::chrono::system_clock::time_point deadline) {
  if (control_.wait_pool == nullptr || !router_.WouldWait(target, modules)) return nullptr;
  // The run (or the wait for another call's) happens here; the call itself then finds the kernel
  // ready, or the failure remembered, or its deadline passed — each answered at once.
  return [this, target, modules, deadline] { (void)router_.For(target, modules, deadline); };
}

MethodName MethodOf(std::string_view service, std::string_view method) {
  const google::protobuf::ServiceDescriptor* s =
      pb::ResolveRequest::descriptor()->file()->FindServiceByName(std::string(service));
  const google::protobuf::MethodDescriptor* m = s == nullptr ? nullptr : s->FindMethodByName(std::string(method));
  if (m == nullptr) {  // a name below that is not the proto's
    std::fprintf(stderr, "symdexd: no method %.*s.%.*s in symdex.proto\n", static_cast<int>(service.size()),
                 service.data(), static_cast<int>(method.size()), method.data());
    std::abort();
  }
  return {m->index(), StrCat("/", s->full_name(), "/", m->name())};
}

SymbolServiceImpl::SymbolServiceImpl(QueryRouter& router, RpcStats& stats, CallControl control,
                                     std::function<void(pb::StatusResponse*)> status)
    : q_(router.own()), router_(router), stats_(stats), control_(control), status_(std::move(status)) {
  auto decoded_here = [this](const Method& rpc, auto method) {
    MethodName m = MethodOf(rpc.service, rpc.rpc);
    MarkMethodRawCallback(m.index, DecodedHere(this, method, std::move(m.path)));
  };
  decoded_here(rpc::kSymbolize, &SymbolServiceImpl::Symbolize);
  decoded_here(rpc::kStatus, &SymbolServiceImpl::Status);
  decoded_here(rpc::kSymbolizeFrames, &SymbolServiceImpl::SymbolizeFrames);
  decoded_here(rpc::kDecode, &SymbolServiceImpl::Decode);
  decoded_here(rpc::kSymbolizePprof, &SymbolServiceImpl::SymbolizePprof);
  ForEachVerbHandler(*this, "SymbolService",
                     [this](int index, auto* handler) { MarkMethodRawCallback(index, handler); });
}

grpc::Status SymbolServiceImpl::DoSymbolize(const Peer& peer, const grpc::CallbackServerContext& ctx,
                                            const pb::SymbolizeRequest& req, pb::SymbolizeResponse* resp) {
  if (static_cast<size_t>(req.addresses_size()) > query::kMaxAddressesPerRequest) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        StrCat(req.addresses_size(), " addresses in one request; the limit is ", query::kMaxAddressesPerRequest));
  }
  constexpr int kSlice = 4096;
  auto q = router_.For(req.target(), {}, ctx.deadline());
  if (!q.ok()) return ToGrpc(q.status());
  query::CallerView view(**q, AccessOf(peer));
  for (int attempt = 0;; ++attempt) {
    resp->Clear();
    std::optional<int64_t> generation;
    bool restart = false;
    for (int from = 0; from < req.addresses_size() || (from == 0 && !generation); from += kSlice) {
      if (from > 0 && ctx.IsCancelled()) return Cancelled(ctx);
      const int to = std::min(req.addresses_size(), from + kSlice);
      std::vector<uint64_t> addrs(req.addresses().begin() + from, req.addresses().begin() + to);
      auto r = view.Symbolize(req.target(), addrs);
      if (!r.ok()) return ToGrpc(r.status());
      if (!generation) {
        generation = r->target.generation;
        resp->set_target(r->target.name);
        TargetInfoTo(r->target, resp->mutable_target_info());
      } else if (*generation != r->target.generation) {
        restart = true;  // re-indexed between slices: the whole answer from one generation
        break;
      }
      for (size_t i = 0; i < r->results.size(); ++i) ToProto(r->addresses[i], *r->results[i], resp->add_results());
      if (to == req.addresses_size()) break;
    }
    if (!restart || attempt == 3) return grpc::Status::OK;
  }
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Symbolize(grpc::CallbackServerContext* ctx,
                                                       const pb::SymbolizeRequest* req, pb::SymbolizeResponse* resp) {
  return Serve(
      ctx, control_, stats_, rpc::kSymbolize.label, rpc::kSymbolize.heavy,
      [=, this](const Peer& peer, std::vector<Limiter::Hold>& holds) {
        auto unread =
            control_.limiter->Take(peer, Limiter::Kind::kAddresses, static_cast<size_t>(req->addresses_size()));
        if (!unread.ok()) return ToGrpc(unread.status());
        holds.push_back(std::move(*unread));
        return DoSymbolize(peer, *ctx, *req, resp);
      },
      WaitFirst(req->target(), {}, ctx->deadline()));
}

grpc::ServerBidiReactor<pb::SymbolizeRequest, pb::SymbolizeResponse>* SymbolServiceImpl::SymbolizeStream(
    grpc::CallbackServerContext* ctx) {
  return new BatchStreamReactor<pb::SymbolizeRequest, pb::SymbolizeResponse>(
      control_, stats_, ctx, rpc::kSymbolizeStream.label,
      [](const pb::SymbolizeRequest& r) { return r.addresses_size(); },
      [this](const Peer& peer, const grpc::CallbackServerContext& c, const pb::SymbolizeRequest& r,
             pb::SymbolizeResponse* out) { return DoSymbolize(peer, c, r, out); },
      [this, ctx](const pb::SymbolizeRequest& r) { return WaitFirst(r.target(), {}, ctx->deadline()); });
}

grpc::ServerWriteReactor<pb::DuplicateGroup>* SymbolServiceImpl::ListDuplicates(grpc::CallbackServerContext* ctx,
                                                                                const pb::ListDuplicatesRequest* req) {
  query::DupsOptions o;
  o.module = req->module();
  o.all_types = req->all_types();
  o.with_init = req->with_init();
  o.traceable = req->traceable();
  std::string target = req->target();
  using Writer = ListWriter<pb::DuplicateGroup>;
  return new Writer(this, ctx, rpc::kListDuplicates.label,
                    {Limiter::Kind::kCall, Limiter::Kind::kStream, Limiter::Kind::kHeavy}, target,
                    [o, target](query::CallerView& view) -> absl::StatusOr<Writer::Fill> {
                      ASSIGN_OR_RETURN(auto r, view.Dups(target, o));
                      auto result = std::make_shared<const query::DupsResult>(std::move(r));
                      return [result](size_t i, pb::DuplicateGroup* m) {
                        const auto& groups = *result->groups;
                        // No duplicates: one message carrying only the target.
                        if (i >= std::max<size_t>(groups.size(), 1)) return false;
                        if (i == 0) TargetInfoTo(result->target, m->mutable_target_info());
                        if (groups.empty()) return true;
                        m->set_name(groups[i].name);
                        for (const auto& in : groups[i].instances) ToProto(in, m->add_instances());
                        return true;
                      };
                    });
}

grpc::ServerWriteReactor<pb::SymbolsChunk>* SymbolServiceImpl::ListSymbols(grpc::CallbackServerContext* ctx,
                                                                           const pb::ListSymbolsRequest* req) {
  query::SymbolsOptions o;
  o.module = req->module();
  o.all_types = req->all_types();
  o.canonical = req->canonical();
  o.aliases = req->kas_aliases();
  std::string target = req->target();
  using Writer = ListWriter<pb::SymbolsChunk>;
  return new Writer(this, ctx, rpc::kListSymbols.label,
                    {Limiter::Kind::kCall, Limiter::Kind::kStream, Limiter::Kind::kListing, Limiter::Kind::kHeavy},
                    target, [o, target](query::CallerView& view) -> absl::StatusOr<Writer::Fill> {
                      ASSIGN_OR_RETURN(auto r, view.Symbols(target, o));
                      auto result = std::make_shared<const query::SymbolsResult>(std::move(r));
                      return [result](size_t i, pb::SymbolsChunk* m) {
                        constexpr size_t kChunk = 1024;
                        const size_t n = result->instances.size();
                        const size_t begin = i * kChunk;
                        if (begin >= std::max<size_t>(n, 1)) return false;
                        if (i == 0) TargetInfoTo(result->target, m->mutable_target_info());
                        for (size_t k = begin; k < std::min(n, begin + kChunk); ++k) {
                          ToProto(result->instances[k], m->add_instances());
                          if (!result->canonical.empty()) m->add_canonical(result->canonical[k]);
                          if (!result->alias.empty()) m->add_alias(result->alias[k]);
                        }
                        return true;
                      };
                    });
}

grpc::ServerUnaryReactor* SymbolServiceImpl::Status(grpc::CallbackServerContext* ctx, const pb::StatusRequest* req,
                                                    pb::StatusResponse* resp) {
  return Serve(ctx, control_, stats_, rpc::kStatus.label, rpc::kStatus.heavy, [=, this](const Peer& peer, auto&) {
    query::CallerView view(q_, AccessOf(peer));
    auto t = view.Ask<query::Targets>({});
    if (!t.ok()) return ToGrpc(t.status());
    for (const auto& s : t->targets) ToProto(s, resp->add_targets());
    if (req->index()) {
      auto index = view.Index({.check_integrity = req->check_integrity(), .details = !req->addr_maps_only()});
      if (!index.ok()) return ToGrpc(index.status());
      ToProto(*index, resp->mutable_index());
    }
    resp->set_database(q_.path());
    resp->set_debug_files(q_.DebugFileCount());
    resp->set_requests_served(stats_.served());
    if (status_) status_(resp);
    return grpc::Status::OK;
  });
}

// ---------------------------------------------------------------------------------------------

}  // namespace symdex::api
