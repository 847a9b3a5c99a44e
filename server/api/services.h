// The gRPC services symdexd serves: every read RPC is a verb of server/query/verbs.h, served by
// one template (verb_service.h) through the caller's view of the query layer, as the CLI asks it;
// the one handler written here is JitService.Ingest, a write. No query logic lives here.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "server/api/limits.h"
#include "server/api/peers.h"
#include "server/api/router.h"
#include "server/jit/ingest.h"
#include "server/metrics/metrics.h"
#include "server/query/local_query.h"
#include "symdex/v1/symdex.grpc.pb.h"

namespace symdex::api {

// Per-RPC accounting shared by the services: request counts by method and code, latency
// histograms, and a count of calls in flight (for the SIGTERM drain log line).
class RpcStats {
 public:
  explicit RpcStats(metrics::Registry* registry) : registry_(registry) {}
  // Returns a token; Done() records the outcome.
  struct Call {
    RpcStats* stats;
    const char* method;
    std::chrono::steady_clock::time_point start;
    void Done(const grpc::Status& s);
  };
  Call Begin(const char* method);
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t served() const { return served_.load(); }

 private:
  metrics::Registry* registry_;
  std::atomic<int64_t> in_flight_{0}, served_{0};
};

// What every call goes through before its handler: who the peer is and what it may see
// (peers.h), its slots (limits.h), and the pool heavy calls run on.
struct CallControl {
  const AccessPolicy* policy = nullptr;
  PeerRegistry* registry = nullptr;
  Limiter* limiter = nullptr;
  FairPool* pool = nullptr;
  // Calls for a fleet kernel not indexed yet wait here (the fetch and index run, or another
  // call's run) and then go to `pool` like any heavy call: a slow debuginfod holds none of the
  // threads that answer other calls. Null without --fleet-cache.
  FairPool* wait_pool = nullptr;
};

// Where one call of a verb goes, worked out once when the request is read: the verb's route (its
// target, the modules it names, or why they cannot be read) and the router's decision for it.
struct CallRoute {
  query::VerbRoute verb;
  Routed routed;
};

class SymbolServiceImpl final : public ::symdex::v1::SymbolService::CallbackService {
 public:
  // `status` fills what a Status answer says of the daemon (version, start, live tracking, fleet).
  // `router` picks the index of each call (router.h: the own one, or a fleet kernel's).
  SymbolServiceImpl(QueryRouter& router, RpcStats& stats, CallControl control,
                    std::function<void(query::ServerState&)> status);

  // A verb of query/verbs.h (verb_service.h): its request read by field name, asked of the
  // caller's view of the call's index inside Serve, its answer written back.
  // One call of such a verb for `peer`, routed once (verb_service.h CallRoute): its answer
  // written to `out` (a message of the verb's RPC), or the status to end the call with.
  template <class V>
  grpc::Status AnswerVerb(const Peer& peer, const grpc::CallbackServerContext& ctx, const typename V::Request& req,
                          const CallRoute& route, google::protobuf::Message* out);
  template <class V>
  grpc::ServerUnaryReactor* ServeVerb(grpc::CallbackServerContext* ctx, const google::protobuf::Message& in,
                                      google::protobuf::Message* out);
  const CallControl& control() const { return control_; }
  RpcStats& stats() { return stats_; }
  query::LocalQuery& query() { return q_; }
  QueryRouter& router() { return router_; }
  // For Serve (serve.h): empty when the call's index is ready; else what to wait for first, off the pool.
  std::function<void()> WaitFirst(const Routed& routed, std::chrono::system_clock::time_point deadline);

 private:
  query::LocalQuery& q_;
  QueryRouter& router_;
  RpcStats& stats_;
  CallControl control_;
  std::function<void(query::ServerState&)> status_;
};

// JitService: the JIT verbs of query/verbs.h (served by `symbols`, as every verb is) and Ingest,
// which reads files with the daemon's rights (privileged peers only) into the index through
// `ingester`, the daemon's single writer.
class JitServiceImpl final : public ::symdex::v1::JitService::CallbackService {
 public:
  JitServiceImpl(SymbolServiceImpl& symbols, jit::Ingester& ingester);

  grpc::ServerUnaryReactor* Ingest(grpc::CallbackServerContext* ctx, const ::symdex::v1::JitIngestRequest* req,
                                   ::symdex::v1::JitIngestResponse* resp) override;

 private:
  jit::Ingester& ingester_;
  RpcStats& stats_;
  CallControl control_;
};

}  // namespace symdex::api
