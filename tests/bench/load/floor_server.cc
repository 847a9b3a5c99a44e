// floor_server: what gRPC alone makes of symdexd's Resolve and Which answers. A benchmark
// program, run by tests/bench/daemon_load.sh and tests/bench/performance.sh; not a test.
//
//   floor_server --listen unix:PATH --upstream unix:SYMDEXD_SOCKET --target T --inputs specs.txt
//                [--which-inputs names.txt] [--without TARGET_INFO|MATCH|TRAILER]...
//
// At start it asks a running symdexd (--upstream) to Resolve each spec of --inputs once, and Which
// each name of --which-inputs (not exact, as daemon_load asks), and keeps the answers. Then it
// serves, on --listen, gRPC's own health service (grpc.health.v1.Health/Check, as symdexd does) and
// symdex.v1.SymbolService/Resolve and /Which, which answer a spec or name with the message symdexd
// gave for it (copied into the response, as symdexd builds one per call) and the trailer symdexd
// sends with every answer. Nothing of symdex runs per call: no peer lookup, limiter, metric,
// query or interceptor. daemon_load against it measures the floor, on this machine with this client,
// of any daemon giving symdex's answers: what Resolve / Health it reaches is as high as symdexd's
// ratio can go without changing the answer.
// Server options as symdexd's (message sizes, concurrent streams); gRPC's own unix listener (symdexd
// accepts its connections itself, for the peer's credentials, then hands them to gRPC).
// --without: serve the answers without that part (ResolveResponse.target_info, .match, or the
// trailer), to see what each part of the answer costs the transport (not what symdexd sends).
// Exit: 0 after SIGTERM/SIGINT, 1 when symdexd answered none of the specs (or names), 2 usage.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_map>

#include "symdex/v1/symdex.grpc.pb.h"

namespace {

namespace pb = ::symdex::v1;

// As symdexd's server/api/remote_query.h kAnsweredHeader (a bench program does not link the daemon).
constexpr const char* kAnsweredHeader = "symdex-answered";

struct Options {
  std::string listen, upstream, target, inputs, which_inputs;
  bool target_info = true, match = true, trailer = true;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "floor_server: %s\n"
               "usage: floor_server --listen unix:PATH --upstream unix:SYMDEXD_SOCKET --target T --inputs SPECS\n"
               "                    [--which-inputs NAMES] [--without TARGET_INFO|MATCH|TRAILER]...\n",
               why);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
    std::string v = argv[++i];
    if (a == "--listen")
      o.listen = v;
    else if (a == "--upstream")
      o.upstream = v;
    else if (a == "--target")
      o.target = v;
    else if (a == "--inputs")
      o.inputs = v;
    else if (a == "--which-inputs")
      o.which_inputs = v;
    else if (a == "--without" && v == "TARGET_INFO")
      o.target_info = false;
    else if (a == "--without" && v == "MATCH")
      o.match = false;
    else if (a == "--without" && v == "TRAILER")
      o.trailer = false;
    else
      Usage(("unknown option " + a).c_str());
  }
  if (o.listen.empty() || o.upstream.empty() || o.inputs.empty())
    Usage("--listen, --upstream and --inputs are required");
  return o;
}

// The answers kept for one method, by the request's key (a spec, a name).
template <typename Resp>
using Answers = std::unordered_map<std::string, Resp>;

class FloorService final : public pb::SymbolService::CallbackService {
 public:
  FloorService(Answers<pb::ResolveResponse> resolve, Answers<pb::WhichResponse> which, bool trailer)
      : resolve_(std::move(resolve)), which_(std::move(which)), trailer_(trailer) {}
  grpc::ServerUnaryReactor* Resolve(grpc::CallbackServerContext* ctx, const pb::ResolveRequest* req,
                                    pb::ResolveResponse* resp) override {
    return Replay(ctx, resolve_, req->spec(), resp);
  }
  grpc::ServerUnaryReactor* Which(grpc::CallbackServerContext* ctx, const pb::WhichRequest* req,
                                  pb::WhichResponse* resp) override {
    return Replay(ctx, which_, req->name(), resp);
  }

 private:
  template <typename Resp>
  grpc::ServerUnaryReactor* Replay(grpc::CallbackServerContext* ctx, const Answers<Resp>& answers,
                                   const std::string& key, Resp* resp) {
    auto* r = ctx->DefaultReactor();
    if (trailer_) ctx->AddTrailingMetadata(kAnsweredHeader, "1");
    auto it = answers.find(key);
    if (it == answers.end()) {
      r->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "floor_server: no answer kept for this request"));
      return r;
    }
    resp->CopyFrom(it->second);
    r->Finish(grpc::Status::OK);
    return r;
  }
  const Answers<pb::ResolveResponse> resolve_;  // read-only while serving
  const Answers<pb::WhichResponse> which_;
  const bool trailer_;
};

// Asks symdexd `call(key, &answer)` for each line of `path` and keeps the OK answers.
template <typename Resp, typename Call>
Answers<Resp> Collect(const std::string& path, const char* what, Call call) {
  std::ifstream in(path);
  if (!in) Usage(("cannot open " + path).c_str());
  Answers<Resp> answers;
  size_t asked = 0, refused = 0, bytes = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++asked;
    Resp resp;
    if (grpc::Status s = call(line, &resp); !s.ok()) {
      if (refused++ == 0)
        std::fprintf(stderr, "floor_server: %s '%s': %s\n", what, line.c_str(), s.error_message().c_str());
      continue;
    }
    bytes += resp.ByteSizeLong();
    answers.emplace(line, std::move(resp));
  }
  if (answers.empty()) {
    std::fprintf(stderr, "floor_server: symdexd answered none of the %zu %s requests of %s\n", asked, what,
                 path.c_str());
    std::exit(1);
  }
  std::fprintf(stderr, "floor_server: %zu %s answers kept (%zu not answered OK), %.0f bytes each on average\n",
               answers.size(), what, refused, static_cast<double>(bytes) / static_cast<double>(answers.size()));
  return answers;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  // The answers, from symdexd itself.
  auto channel = grpc::CreateChannel(o.upstream, grpc::InsecureChannelCredentials());
  auto stub = pb::SymbolService::NewStub(channel);
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(30); };
  auto resolve =
      Collect<pb::ResolveResponse>(o.inputs, "Resolve", [&](const std::string& spec, pb::ResolveResponse* resp) {
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline());
        pb::ResolveRequest req;
        req.set_target(o.target);
        req.set_spec(spec);
        grpc::Status s = stub->Resolve(&ctx, req, resp);
        if (!o.target_info) resp->clear_target_info();
        if (!o.match) resp->clear_match();
        return s;
      });
  Answers<pb::WhichResponse> which;
  if (!o.which_inputs.empty()) {
    which = Collect<pb::WhichResponse>(o.which_inputs, "Which", [&](const std::string& name, pb::WhichResponse* resp) {
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline());
      pb::WhichRequest req;
      req.set_target(o.target);
      req.set_name(name);
      return stub->Which(&ctx, req, resp);
    });
  }

  // Signals are taken by sigwait below, not by handlers: blocked before gRPC starts its threads.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  FloorService service(std::move(resolve), std::move(which), o.trailer);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(16 << 20);  // as symdexd (server/daemon/daemon.cc)
  builder.SetMaxSendMessageSize(256 << 20);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 128);
  builder.AddListeningPort(o.listen, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "floor_server: could not listen on %s\n", o.listen.c_str());
    return 1;
  }
  std::fprintf(stderr, "floor_server: serving on %s\n", o.listen.c_str());
  int sig = 0;
  sigwait(&sigs, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
