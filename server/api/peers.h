// Who is calling, and what they may see.
//
// Unix socket: symdexd accepts connections itself (UnixListener), reads the peer's credentials
// from the kernel (SO_PEERCRED: uid, gid, pid; SO_PEERGROUPS: supplementary groups), decides
// its access once, and hands the connected socket to gRPC (AddInsecureChannelFromFd). gRPC then
// names the peer "fd:N", which the PeerRegistry maps back to the decision. TCP: the verified
// client certificate's identity (CN / SAN), else the remote IP address.
//
// The decision mirrors what /proc/kallsyms shows the same process (kallsyms_show_value()):
//   kernel.kptr_restrict = 0 and kernel.perf_event_paranoid <= 1   everyone
//   kernel.kptr_restrict <= 1 and CAP_SYSLOG in the peer's effective set
// plus, whatever the sysctls: uid 0, the daemon's own uid, a member of a --privileged-group,
// a TLS client whose certificate names a --privileged-cert-name; and every TCP peer when
// --trust-tcp-peers says the network is trusted. Everyone else gets KASLR-free answers
// (query::CallerView).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/common/status.h"

namespace symdex::api {

struct Peer {
  std::string key;          // what limits count by: "uid:1000", "cert:NAME", "ip:127.0.0.1"
  std::string description;  // for logs: "uid 1000 (pid 4242)"
  bool privileged = false;
  std::string why;  // the rule that decided: "uid 0", "CAP_SYSLOG", "group symdex", ...
};

struct AccessPolicyOptions {
  std::vector<std::string> privileged_groups;      // group names
  std::vector<std::string> privileged_cert_names;  // TLS client certificate CN or SAN
  bool trust_tcp_peers = false;
  std::string sysroot;  // where /proc/sys/kernel/{kptr_restrict,perf_event_paranoid} are read
};

class AccessPolicy {
 public:
  // InvalidArgument for a group name that does not exist.
  static absl::StatusOr<AccessPolicy> Create(const AccessPolicyOptions& o);
  Peer ForUnixPeer(uid_t uid, gid_t gid, pid_t pid, const std::vector<gid_t>& groups) const;
  Peer ForTcpPeer(const grpc::CallbackServerContext& ctx) const;

 private:
  AccessPolicyOptions opts_;
  std::vector<gid_t> gids_;
};

// fd -> peer of every connection UnixListener handed to gRPC.
class PeerRegistry {
 public:
  void Add(int fd, Peer p, ino_t inode);
  // The peer of a call: "fd:N" peers from the registry; TCP peers through the policy. A call on
  // a connection the registry does not know (cannot happen but for a race with its close) is
  // unprivileged.
  Peer Of(const grpc::CallbackServerContext& ctx, const AccessPolicy& policy) const;
  // Live connections per peer key, pruning those gRPC has closed (their fd now names another
  // file or none).
  std::map<std::string, int> LiveConnections();

 private:
  struct Entry {
    Peer peer;
    ino_t inode;
  };
  mutable std::shared_mutex mu_;
  std::map<int, Entry> by_fd_;
};

struct UnixListenerOptions {
  std::string path;
  int mode = 0660;
  int max_connections = 1024;         // all peers
  int max_connections_per_peer = 64;  // per uid
};

// A Unix-domain listening socket whose connections are accepted here (for SO_PEERCRED) and
// served by gRPC.
class UnixListener {
 public:
  using LogFn = std::function<void(const std::string&)>;
  // Binds and listens; the socket file gets `mode` (umask ignored) before anyone can connect.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const UnixListenerOptions& o);
  ~UnixListener();
  // Accepts in a thread of its own until Stop().
  void Start(grpc::Server* server, PeerRegistry* registry, const AccessPolicy* policy, LogFn warn);
  void Stop();  // stops accepting; removes the socket file
  const std::string& path() const { return opts_.path; }

 private:
  explicit UnixListener(UnixListenerOptions o) : opts_(std::move(o)) {}
  void Loop(grpc::Server* server, PeerRegistry* registry, const AccessPolicy* policy, LogFn warn);
  UnixListenerOptions opts_;
  int fd_ = -1;
  int stop_fd_ = -1;  // eventfd
  std::thread thread_;
};

}  // namespace symdex::api

namespace symdex::api {

// What symdexd answers a request it cannot decode (bytes that are no protobuf, a string field that
// is not UTF-8) to `method` ("/symdex.v1.SymbolService/Which"): INVALID_ARGUMENT saying so.
grpc::Status UndecodableRequest(std::string_view method);

// gRPC answers such a request with UNIMPLEMENTED and no message (its callback handlers in 1.51);
// none of symdex's handlers ever does. The unary methods decode their requests themselves (serve.h:
// DecodedHere); for the streaming ones, this interceptor turns exactly that answer into
// UndecodableRequest's.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> UndecodableRequestInterceptor();

}  // namespace symdex::api
