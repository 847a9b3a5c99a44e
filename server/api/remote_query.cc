#include "server/api/remote_query.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>

#include <google/protobuf/arena.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "server/api/convert.h"
#include "server/api/wire_fields.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "symdex/v1/symdex.grpc.pb.h"

namespace symdex::api {

namespace {
// A batch's answer — thousands of small messages and strings — is parsed onto one arena: bump
// allocation, and one free at the end instead of one per message (perf of a 10k-frame call: parse
// and destruction of a heap response were 29% of the CLI's time). Blocks of up to 1 MiB.
google::protobuf::ArenaOptions ResponseArenaOptions() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = 64 << 10;
  o.max_block_size = 1 << 20;
  return o;
}
}  // namespace

struct RemoteQuery::Impl {
  ConnectOptions opts;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::SymbolService::Stub> stub;
  std::unique_ptr<pb::JitService::Stub> jit;

  // `route`: the kernel build-ID a fleet proxy routes on (gRPC metadata symdex-build-id, hashed
  // consistently by nginx/HAProxy in front of the replicas: deploy/), from a "build-id:HEX" target.
  static std::string_view RouteOf(std::string_view target, std::string_view build_id) {
    if (build_id.empty() && target.starts_with(query::kBuildIdTargetPrefix)) {
      return target.substr(query::kBuildIdTargetPrefix.size());
    }
    return build_id;
  }
  void Prepare(grpc::ClientContext& ctx, std::string_view target = "", std::string_view build_id = "",
               std::optional<std::chrono::system_clock::time_point> deadline = std::nullopt) const {
    build_id = RouteOf(target, build_id);
    ctx.set_deadline(deadline ? *deadline : Deadline(build_id));
    if (!build_id.empty()) ctx.AddMetadata(std::string(kBuildIdHeader), Lower(build_id));
  }
  std::chrono::system_clock::time_point Deadline(std::string_view build_id) const {
    const double seconds =
        build_id.empty() ? opts.deadline_seconds : std::max(opts.deadline_seconds, opts.fleet_deadline_seconds);
    return std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }

  struct Attempt {
    grpc::Status status;
    bool answered = false;  // the status is symdexd's own (kAnsweredHeader), not the transport's
  };
  // One unary call `call(ctx)`, tried again while it fails in transport: UNAVAILABLE without the
  // daemon's mark, other than "failed to connect" — a proxy answering for a replica that died
  // under the call (nginx cannot re-send a gRPC request body it has streamed to it: HTTP 502),
  // or a connection lost. Every symdex call is a read, so a second try is safe; at most 3 more,
  // 0.2, 0.4, 0.8 s apart, within the call's one deadline.
  template <typename Call>
  Attempt Unary(std::string_view target, std::string_view build_id, Call&& call) const {
    build_id = RouteOf(target, build_id);
    const auto deadline = Deadline(build_id);
    auto backoff = std::chrono::milliseconds(200);
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(ctx, target, build_id, deadline);
      Attempt a{call(ctx), false};
      a.answered = ctx.GetServerTrailingMetadata().count(kAnsweredHeader) > 0;
      const bool transport = a.status.error_code() == grpc::StatusCode::UNAVAILABLE && !a.answered &&
                             a.status.error_message().find("failed to connect") == std::string::npos;
      if (!transport || attempt == 3 || std::chrono::system_clock::now() + backoff >= deadline) return a;
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
  }
  // UNAVAILABLE from symdexd itself (a fleet kernel's debuginfod unreachable) is its answer;
  // without the daemon's mark it is gRPC's: the daemon could not be reached.
  absl::Status Error(const Attempt& a) const {
    if (a.status.error_code() == grpc::StatusCode::UNAVAILABLE && !a.answered) {
      return absl::UnavailableError(StrCat("symdexd at ", opts.address, " is unavailable: ", a.status.error_message()));
    }
    return FromGrpc(a.status);
  }
  absl::Status Error(const grpc::Status& s, const grpc::ClientContext& ctx) const {
    return Error(Attempt{s, ctx.GetServerTrailingMetadata().count(kAnsweredHeader) > 0});
  }
};

RemoteQuery::RemoteQuery(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteQuery::~RemoteQuery() = default;

absl::StatusOr<std::unique_ptr<RemoteQuery>> RemoteQuery::Connect(const ConnectOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // An ambiguous spec's candidates travel in the status details (trailing metadata); gRPC's
  // default 8 KiB limit would turn a 50-candidate answer into RESOURCE_EXHAUSTED.
  args.SetInt(GRPC_ARG_MAX_METADATA_SIZE, kMaxStatusDetailsBytes * 2);
  if (opts.address.starts_with("unix:") || opts.tls_ca.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFileBounded(opts.tls_ca, 1 << 20));
    if (!opts.tls_cert.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFileBounded(opts.tls_cert, 1 << 20));
      ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFileBounded(opts.tls_key, 1 << 20));
    }
    creds = grpc::SslCredentials(ssl);
    if (!opts.tls_server_name.empty()) args.SetSslTargetNameOverride(opts.tls_server_name);
  }
  impl->channel = grpc::CreateCustomChannel(opts.address, creds, args);
  impl->stub = pb::SymbolService::NewStub(impl->channel);
  impl->jit = pb::JitService::NewStub(impl->channel);
  return std::unique_ptr<RemoteQuery>(new RemoteQuery(std::move(impl)));
}

bool RemoteQuery::WaitReady(double seconds) {
  return impl_->channel->WaitForConnected(std::chrono::system_clock::now() +
                                          std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

absl::StatusOr<query::AnyAnswer> RemoteQuery::Call(const query::AnyRequest& r) {
  return query::Verbs::Visit(r.index(), [&]<class V>(std::type_identity<V>) -> absl::StatusOr<query::AnyAnswer> {
    constexpr size_t kIndex = query::Verbs::IndexOf<V>();
    const typename V::Request& req = std::get<kIndex>(r);
    if constexpr (requires { V::Composed(*this, req); }) {  // over this client's own calls
      ASSIGN_OR_RETURN(typename V::Answer a, V::Composed(*this, req));
      return query::AnyAnswer(std::in_place_index<kIndex>, std::move(a));
    } else {
      const VerbWire& w = WireOf<V>();
      google::protobuf::Arena arena(ResponseArenaOptions());
      google::protobuf::Message* out = w.response->New(&arena);
      std::string target;
      if constexpr (requires { req.target; }) target = req.target;
      if constexpr (requires { typename V::Part; }) {
        // A stream of parts, read to its end, then joined.
        google::protobuf::Message* in = w.request->New(&arena);
        ToWire(req, in);
        const grpc::internal::RpcMethod method(w.path.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING);
        grpc::ClientContext ctx;
        impl_->Prepare(ctx, target);
        std::unique_ptr<grpc::ClientReader<google::protobuf::Message>> reader(
            grpc::internal::ClientReaderFactory<google::protobuf::Message>::Create(impl_->channel.get(), method, &ctx,
                                                                                   *in));
        std::vector<typename V::Part> parts;
        while (reader->Read(out)) {
          FromWire(*out, &parts.emplace_back());
          out->Clear();
        }
        if (grpc::Status s = reader->Finish(); !s.ok()) return impl_->Error(s, ctx);
        auto joined = V::Joined(req, std::move(parts));
        if (!joined.ok()) {
          return absl::Status(joined.status().code(),
                              StrCat("symdexd at ", impl_->opts.address, " ", joined.status().message()));
        }
        return query::AnyAnswer(std::in_place_index<kIndex>, std::move(*joined));
      } else {
        const grpc::internal::RpcMethod method(w.path.c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
        std::string build_id;  // what a fleet proxy routes the call on
        if constexpr (requires { V::RouteOf(req).build_id; }) build_id = V::RouteOf(req).build_id;
        // One call of `r`, its answer into `m` (thread-safe: parts go at once).
        auto call = [&](const typename V::Request& r, google::protobuf::Message* m) {
          google::protobuf::Arena a;
          google::protobuf::Message* sent = w.request->New(&a);
          ToWire(r, sent);
          return impl_->Unary(target, build_id, [&](grpc::ClientContext& c) {
            m->Clear();
            return grpc::internal::BlockingUnaryCall<google::protobuf::Message, google::protobuf::Message>(
                impl_->channel.get(), method, &c, *sent, m);
          });
        };
        if constexpr (requires { V::ConcurrentParts(req); }) {
          // Parts at once over the one connection: the daemon answers the later parts while this
          // process reads the first (on 2 cores a 10k-frame call's wall time was the sum of both
          // sides' CPU).
          auto in_parts = [&](const std::vector<typename V::Request>& ps) -> absl::StatusOr<typename V::Answer> {
            struct Part {
              // Freed once read: the next part's answer reuses its memory.
              std::unique_ptr<google::protobuf::Arena> arena =
                  std::make_unique<google::protobuf::Arena>(ResponseArenaOptions());
              google::protobuf::Message* resp = nullptr;
              Impl::Attempt attempt;
            };
            std::vector<Part> part(ps.size());
            for (Part& p : part) p.resp = w.response->New(p.arena.get());
            auto one = [&](size_t i) { part[i].attempt = call(ps[i], part[i].resp); };
            std::vector<std::jthread> others;  // declared after `part`: joined before it is destroyed
            for (size_t i = 1; i < ps.size(); ++i) others.emplace_back(one, i);
            one(0);
            typename V::Answer whole;
            for (size_t i = 0; i < ps.size(); ++i) {
              if (i > 0) others[i - 1].join();
              if (!part[i].attempt.status.ok()) return impl_->Error(part[i].attempt);  // the rest join on return
              typename V::Answer a;
              TakeWire(*part[i].resp, &a);
              part[i].resp = nullptr;
              part[i].arena.reset();
              RETURN_IF_ERROR(V::Join(whole, std::move(a), ps[i], i == 0));
            }
            return whole;
          };
          ASSIGN_OR_RETURN(std::vector<typename V::Request> parts, V::ConcurrentParts(req));
          absl::StatusOr<typename V::Answer> whole = in_parts(parts);
          // The whole request as one call, as a smaller one goes, when its parts saw two generations.
          if (parts.size() > 1 && whole.status().code() == absl::StatusCode::kAborted &&
              whole.status().message() ==
                  absl::string_view(query::kPartsSawTwoGenerations.data(), query::kPartsSawTwoGenerations.size())) {
            whole = in_parts({req});
          }
          if (!whole.ok()) return whole.status();
          return query::AnyAnswer(std::in_place_index<kIndex>, std::move(*whole));
        } else {
          const Impl::Attempt a = call(req, out);
          typename V::Answer answer;
          if constexpr (requires { V::Resolved(answer); }) {
            // No copy, or several: the status carries the candidates (convert.h ResolveError).
            const grpc::StatusCode code = a.status.error_code();
            if (code == grpc::StatusCode::NOT_FOUND || code == grpc::StatusCode::ABORTED) {
              ASSIGN_OR_RETURN(V::Resolved(answer), ResolveFromError(a.status));
              return query::AnyAnswer(std::in_place_index<kIndex>, std::move(answer));
            }
          }
          if constexpr (requires { V::Empty(req); }) {
            // Nothing found: NOT_FOUND on this RPC's wire, an empty answer in the query API.
            if (a.status.error_code() == grpc::StatusCode::NOT_FOUND) {
              return query::AnyAnswer(std::in_place_index<kIndex>, V::Empty(req));
            }
          }
          if (!a.status.ok()) return impl_->Error(a);
          TakeWire(*out, &answer);
          return query::AnyAnswer(std::in_place_index<kIndex>, std::move(answer));
        }
      }
    }
  });
}

}  // namespace symdex::api
