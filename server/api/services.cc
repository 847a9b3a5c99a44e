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

std::function<void()> SymbolServiceImpl::WaitFirst(const Routed& routed,
                                                   std::chrono::system_clock::time_point deadline) {
  if (control_.wait_pool == nullptr || !router_.WouldWait(routed)) return nullptr;
  // The run (or the wait for another call's) happens here; the call itself then finds the kernel
  // ready, or the failure remembered, or its deadline passed — each answered at once.
  return [this, routed, deadline] { (void)router_.Open(routed, deadline); };
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
                                     std::function<void(query::ServerState&)> status)
    : q_(router.own()), router_(router), stats_(stats), control_(control), status_(std::move(status)) {
  ForEachVerbHandler(*this, "SymbolService",
                     [this](int index, auto* handler) { MarkMethodRawCallback(index, handler); });
}

}  // namespace symdex::api
