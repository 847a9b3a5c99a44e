#include "server/api/peers.h"
#include "server/common/hex.h"

#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <google/protobuf/descriptor.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "symdex/v1/symdex.pb.h"

namespace symdex::api {
namespace {

int ReadSysctl(const std::string& sysroot, const char* path, int fallback) {
  auto text = ReadFileBounded(SysrootPath(sysroot, path), 64);
  if (!text.ok()) return fallback;
  try {
    return std::stoi(*text);
  } catch (...) {
    return fallback;
  }
}

// CAP_SYSLOG (34) in the effective set of `pid`, from /proc/PID/status.
bool HasCapSyslog(pid_t pid) {
  auto text = ReadFileBounded(StrCat("/proc/", pid, "/status"), 1 << 16);
  if (!text.ok()) return false;
  for (std::string_view line : Split(*text, '\n', true)) {
    if (!line.starts_with("CapEff:")) continue;
    line.remove_prefix(7);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    auto caps = ParseHex(line, HexPrefix::kNone);
    return caps && ((*caps >> 34) & 1);
  }
  return false;
}

std::string IpOf(const std::string& peer) {
  // "ipv4:127.0.0.1:5555" / "ipv6:[::1]:5555" -> the address without the port
  std::string s = peer.substr(peer.find(':') + 1);
  auto colon = s.rfind(':');
  if (colon != std::string::npos) s.resize(colon);
  return s;
}

}  // namespace

absl::StatusOr<AccessPolicy> AccessPolicy::Create(const AccessPolicyOptions& o) {
  AccessPolicy p;
  p.opts_ = o;
  for (const auto& name : o.privileged_groups) {
    std::vector<char> buf(16384);
    group g{};
    group* found = nullptr;
    if (getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return absl::InvalidArgumentError(StrCat("--privileged-group ", name, ": no such group"));
    }
    p.gids_.push_back(found->gr_gid);
  }
  return p;
}

Peer AccessPolicy::ForUnixPeer(uid_t uid, gid_t gid, pid_t pid, const std::vector<gid_t>& groups) const {
  Peer p;
  p.key = StrCat("uid:", uid);
  p.description = StrCat("uid ", uid, " (pid ", pid, ")");
  auto grant = [&](std::string why) {
    p.privileged = true;
    p.why = std::move(why);
    return p;
  };
  if (uid == 0) return grant("uid 0");
  if (uid == ::geteuid()) return grant("the daemon's own uid");
  for (gid_t g : gids_) {
    if (g == gid || std::find(groups.begin(), groups.end(), g) != groups.end()) {
      return grant(StrCat("privileged group ", g));
    }
  }
  const int kptr = ReadSysctl(opts_.sysroot, "/proc/sys/kernel/kptr_restrict", 1);
  const int paranoid = ReadSysctl(opts_.sysroot, "/proc/sys/kernel/perf_event_paranoid", 2);
  if (kptr == 0 && paranoid <= 1) return grant("kernel.kptr_restrict=0 and perf_event_paranoid<=1");
  if (kptr <= 1 && HasCapSyslog(pid)) return grant("CAP_SYSLOG");
  p.why = StrCat("unprivileged (kptr_restrict=", kptr, ")");
  return p;
}

Peer AccessPolicy::ForTcpPeer(const grpc::CallbackServerContext& ctx) const {
  Peer p;
  auto auth = ctx.auth_context();
  if (auth && auth->IsPeerAuthenticated()) {
    std::vector<std::string> ids;
    for (const auto& id : auth->GetPeerIdentity()) ids.emplace_back(id.data(), id.size());
    for (const char* prop : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
      for (const auto& v : auth->FindPropertyValues(prop)) ids.emplace_back(v.data(), v.size());
    }
    if (!ids.empty()) {
      p.key = StrCat("cert:", ids.front());
      p.description = StrCat("certificate ", Excerpt(ids.front(), 80));
      for (const auto& id : ids) {
        if (std::find(opts_.privileged_cert_names.begin(), opts_.privileged_cert_names.end(), id) !=
            opts_.privileged_cert_names.end()) {
          p.privileged = true;
          p.why = StrCat("certificate name ", Excerpt(id, 80));
          return p;
        }
      }
    }
  }
  if (p.key.empty()) {
    p.key = StrCat("ip:", IpOf(ctx.peer()));
    p.description = p.key;
  }
  if (opts_.trust_tcp_peers) {
    p.privileged = true;
    p.why = "--trust-tcp-peers";
  } else {
    p.why = "TCP peer without a privileged certificate name";
  }
  return p;
}

void PeerRegistry::Add(int fd, Peer p, ino_t inode) {
  std::unique_lock l(mu_);
  by_fd_[fd] = Entry{std::move(p), inode};
}

Peer PeerRegistry::Of(const grpc::CallbackServerContext& ctx, const AccessPolicy& policy) const {
  std::string peer = ctx.peer();
  if (!peer.starts_with("fd:")) return policy.ForTcpPeer(ctx);
  int fd = -1;
  try {
    fd = std::stoi(peer.substr(3));
  } catch (...) {
  }
  std::shared_lock l(mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return Peer{peer, peer, false, "unknown connection"};
  return it->second.peer;
}

std::map<std::string, int> PeerRegistry::LiveConnections() {
  std::unique_lock l(mu_);
  std::map<std::string, int> out;
  for (auto it = by_fd_.begin(); it != by_fd_.end();) {
    struct stat st {};
    if (::fstat(it->first, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != it->second.inode) {
      it = by_fd_.erase(it);
      continue;
    }
    ++out[it->second.peer.key];
    ++it;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const UnixListenerOptions& o) {
  std::unique_ptr<UnixListener> l(new UnixListener(o));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (o.path.size() >= sizeof(addr.sun_path))
    return absl::InvalidArgumentError(StrCat("socket path too long: ", o.path));
  std::memcpy(addr.sun_path, o.path.c_str(), o.path.size() + 1);
  l->fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l->fd_ < 0) return absl::FailedPreconditionError(StrCat("socket: ", std::strerror(errno)));
  // No one may connect before the mode is right: bind under a umask that leaves nothing to
  // others, then set the exact mode, then listen.
  mode_t old = ::umask(0177);
  int rc = ::bind(l->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int bind_errno = errno;
  ::umask(old);
  if (rc != 0) return absl::FailedPreconditionError(StrCat("bind ", o.path, ": ", std::strerror(bind_errno)));
  if (::chmod(o.path.c_str(), static_cast<mode_t>(o.mode)) != 0) {
    return absl::FailedPreconditionError(StrCat("chmod ", o.path, ": ", std::strerror(errno)));
  }
  if (::listen(l->fd_, 128) != 0)
    return absl::FailedPreconditionError(StrCat("listen ", o.path, ": ", std::strerror(errno)));
  l->stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (l->stop_fd_ < 0) return absl::FailedPreconditionError(StrCat("eventfd: ", std::strerror(errno)));
  return l;
}

UnixListener::~UnixListener() {
  Stop();
  if (fd_ >= 0) ::close(fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void UnixListener::Start(grpc::Server* server, PeerRegistry* registry, const AccessPolicy* policy, LogFn warn) {
  thread_ = std::thread([=, this] { Loop(server, registry, policy, warn); });
}

void UnixListener::Stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    thread_.join();
    ::unlink(opts_.path.c_str());
  }
}

void UnixListener::Loop(grpc::Server* server, PeerRegistry* registry, const AccessPolicy* policy, LogFn warn) {
  while (true) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      warn(StrCat("poll on ", opts_.path, ": ", std::strerror(errno)));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        warn(StrCat("accept on ", opts_.path, ": ", std::strerror(errno), "; pausing 100 ms"));
        ::poll(nullptr, 0, 100);
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    struct stat st {};
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || ::fstat(c, &st) != 0) {
      ::close(c);
      continue;
    }
    std::vector<gid_t> groups(64);
    socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(c, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
      groups.resize(glen / sizeof(gid_t));
    } else {
      groups.clear();  // more than 64 groups, or an old kernel: the primary gid still counts
    }
    Peer peer = policy->ForUnixPeer(cred.uid, cred.gid, cred.pid, groups);
    auto live = registry->LiveConnections();
    int total = 0;
    for (const auto& [k, n] : live) total += n;
    if (total >= opts_.max_connections || live[peer.key] >= opts_.max_connections_per_peer) {
      warn(StrCat("refused a connection from ", peer.description, ": ", live[peer.key], " open for this peer (limit ",
                  opts_.max_connections_per_peer, "), ", total, " in all (limit ", opts_.max_connections, ")"));
      ::close(c);
      continue;
    }
    registry->Add(c, std::move(peer), st.st_ino);
    grpc::AddInsecureChannelFromFd(server, c);
  }
}

}  // namespace symdex::api

namespace symdex::api {
namespace {

class UndecodableInterceptor : public grpc::experimental::Interceptor {
 public:
  // `method` is gRPC's registered name of the method: it outlives every call.
  explicit UndecodableInterceptor(std::string_view method) : method_(method) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status s = m->GetSendStatus();
      if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED && s.error_message().empty()) {
        m->ModifySendStatus(UndecodableRequest(method_));
      }
    }
    m->Proceed();
  }

 private:
  std::string_view method_;
};

// gRPC asks the factory on every call: the paths of symdex's streaming methods
// ("/symdex.v1.SymbolService/ListSymbols") are listed once, from the descriptors, instead of looking
// each call's up in the descriptor pool. A unary method gets no interceptor (DecodedHere).
class UndecodableFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  UndecodableFactory() {
    const google::protobuf::FileDescriptor* file = v1::ResolveRequest::descriptor()->file();
    for (int i = 0; i < file->service_count(); ++i) {
      const google::protobuf::ServiceDescriptor* svc = file->service(i);
      for (int j = 0; j < svc->method_count(); ++j) {
        const google::protobuf::MethodDescriptor* m = svc->method(j);
        if (m->client_streaming() || m->server_streaming())
          methods_.insert(StrCat("/", svc->full_name(), "/", m->name()));
      }
    }
  }
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    const char* m = info->method();
    // Only streaming methods that exist: an unknown method's UNIMPLEMENTED is the right answer.
    if (m == nullptr || !methods_.contains(std::string_view(m))) return nullptr;
    return new UndecodableInterceptor(m);
  }

 private:
  std::set<std::string, std::less<>> methods_;
};

}  // namespace

grpc::Status UndecodableRequest(std::string_view method) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      StrCat("the request to ", method,
                             " could not be decoded: not a protobuf message of the method's request type, or a string "
                             "field that is not UTF-8"));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> UndecodableRequestInterceptor() {
  return std::make_unique<UndecodableFactory>();
}

}  // namespace symdex::api
