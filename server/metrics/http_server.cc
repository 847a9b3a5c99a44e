#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace symdex::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// After the response: how long to wait for the client to close (while discarding whatever it
// still sends, so that closing does not reset the connection before the response is read), and
// how much to discard at most.
constexpr std::chrono::milliseconds kLingerTimeout{1000};
constexpr size_t kMaxLingerBytes = 64 * 1024;
// How long to stop accepting after running out of file descriptors or memory.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

std::string ErrnoString(int err) { return std::strerror(err); }

absl::Status ErrnoStatus(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), fmt::format("{}: {}", what, ErrnoString(err)));
}

struct ListenAddress {
  sockaddr_in addr{};
};

absl::StatusOr<ListenAddress> ParseHostPort(const std::string& host_port) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(fmt::format(
        "metrics listen address '{}': {} (expected HOST:PORT, HOST an IPv4 address or 'localhost')", host_port,
        why));
  };
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  std::string host = host_port.substr(0, colon);
  std::string port = host_port.substr(colon + 1);
  if (host.empty()) return bad("no host");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad(fmt::format("bad port '{}'", port));
  }
  int port_num = std::stoi(port);
  if (port_num > 65535) return bad(fmt::format("port {} out of range", port_num));

  ListenAddress out;
  out.addr.sin_family = AF_INET;
  out.addr.sin_port = htons(static_cast<uint16_t>(port_num));
  if (host == "localhost") host = "127.0.0.1";
  if (inet_pton(AF_INET, host.c_str(), &out.addr.sin_addr) != 1) {
    return bad(fmt::format("'{}' is not an IPv4 address", host));
  }
  return out;
}

const char* Reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
  }
  return "Unknown";
}

std::string Response(int code, std::string_view content_type, std::string_view body,
                     std::string_view extra_headers = {}) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{}", code,
      Reason(code), content_type, body.size(), extra_headers, body);
}

std::string PlainResponse(int code, std::string_view body, std::string_view extra_headers = {}) {
  return Response(code, "text/plain; charset=utf-8", body, extra_headers);
}

// End of the header block ("\r\n\r\n", or a lenient "\n\n"), or npos.
size_t HeaderEnd(const std::string& buf) {
  size_t crlf = buf.find("\n\r\n");
  size_t lf = buf.find("\n\n");
  size_t end = std::string::npos;
  if (crlf != std::string::npos) end = crlf + 3;
  if (lf != std::string::npos) end = std::min(end, lf + 2);
  return end;
}

struct Conn {
  enum class State { kReading, kWriting, kLingering };
  Fd fd;
  State state = State::kReading;
  Clock::time_point deadline;
  std::string in;
  std::string out;
  size_t out_off = 0;
  size_t discarded = 0;
  bool closed = false;
};

}  // namespace

struct HttpServer::Impl {
  Impl(Registry& r, HttpServerOptions o) : registry(r), options(o) {}

  Registry& registry;
  const HttpServerOptions options;
  Fd listen_fd;
  Fd wake_fd;  // eventfd: Stop() writes it to end the loop
  int port = 0;
  std::atomic<size_t> connections{0};
  std::thread thread;
  absl::Mutex stop_mu;  // serializes Stop()

  void Run();
  void Accept(std::vector<Conn>& conns, Clock::time_point now, Clock::time_point& accept_paused_until);
  void OnReadable(Conn& c, Clock::time_point now);
  void OnWritable(Conn& c, Clock::time_point now);
  void OnDeadline(Conn& c, Clock::time_point now);
  void HandleRequest(Conn& c, Clock::time_point now);
  void Respond(Conn& c, std::string response, Clock::time_point now);
  void Close(Conn& c) {
    if (c.closed) return;
    c.fd.reset();
    c.closed = true;
    connections.fetch_sub(1, std::memory_order_relaxed);
  }
};

void HttpServer::Impl::Run() {
  std::vector<Conn> conns;
  std::vector<pollfd> pfds;
  Clock::time_point accept_paused_until{};
  while (true) {
    Clock::time_point now = Clock::now();
    bool accepting = conns.size() < options.max_connections && now >= accept_paused_until;
    pfds.clear();
    pfds.push_back({wake_fd.get(), POLLIN, 0});
    pfds.push_back({accepting ? listen_fd.get() : -1, POLLIN, 0});  // fd -1: ignored by poll
    std::optional<Clock::time_point> next;
    if (!accepting && conns.size() < options.max_connections) next = accept_paused_until;
    for (const Conn& c : conns) {
      pfds.push_back({c.fd.get(), static_cast<short>(c.state == Conn::State::kWriting ? POLLOUT : POLLIN), 0});
      if (!next || c.deadline < *next) next = c.deadline;
    }
    int timeout_ms = -1;
    if (next) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
      timeout_ms = static_cast<int>(std::clamp<decltype(wait)>(wait, 0, 60'000));
    }

    int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // ENOMEM; nothing better to do
      continue;
    }
    if (pfds[0].revents != 0) break;  // Stop()

    now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      short revents = pfds[i + 2].revents;
      if (revents & POLLNVAL) {
        Close(c);
      } else if (revents != 0) {
        // POLLERR/POLLHUP included: the read or write below reports the error or EOF.
        if (c.state == Conn::State::kWriting) {
          OnWritable(c, now);
        } else {
          OnReadable(c, now);
        }
      }
      if (!c.closed && now >= c.deadline) OnDeadline(c, now);
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Conn& c) { return c.closed; }),
                conns.end());
    if (pfds[1].revents != 0) Accept(conns, now, accept_paused_until);
  }
  for (Conn& c : conns) Close(c);
}

void HttpServer::Impl::Accept(std::vector<Conn>& conns, Clock::time_point now,
                              Clock::time_point& accept_paused_until) {
  while (conns.size() < options.max_connections) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // EMFILE, ENFILE, ENOBUFS, ENOMEM, ...: the listening socket stays readable, so back off
      // instead of spinning.
      accept_paused_until = now + kAcceptBackoff;
      return;
    }
    Conn& c = conns.emplace_back();
    c.fd.reset(fd);
    c.deadline = now + options.read_timeout;
    connections.fetch_add(1, std::memory_order_relaxed);
  }
}

void HttpServer::Impl::OnReadable(Conn& c, Clock::time_point now) {
  char buf[4096];
  while (!c.closed) {
    size_t want = sizeof(buf);
    if (c.state == Conn::State::kReading) {
      // Never buffer more than one byte past the limit: that byte is enough to say "too large".
      want = std::min(want, options.max_header_bytes + 1 - c.in.size());
    }
    ssize_t r = ::recv(c.fd.get(), buf, want, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Close(c);  // ECONNRESET etc.
      return;
    }
    if (r == 0) {  // EOF: the client gave up mid-request, or closed after our response
      Close(c);
      return;
    }
    if (c.state == Conn::State::kLingering) {
      c.discarded += static_cast<size_t>(r);
      if (c.discarded > kMaxLingerBytes) Close(c);
      continue;
    }
    c.in.append(buf, static_cast<size_t>(r));
    size_t end = HeaderEnd(c.in);
    if (end != std::string::npos && end <= options.max_header_bytes) {
      HandleRequest(c, now);
      return;
    }
    if (c.in.size() > options.max_header_bytes) {
      Respond(c, PlainResponse(431, "request headers too large\n"), now);
      return;
    }
  }
}

void HttpServer::Impl::HandleRequest(Conn& c, Clock::time_point now) {
  std::string_view line(c.in);
  line = line.substr(0, line.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // METHOD SP TARGET SP HTTP/1.x
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1 ||
      line.find(' ', sp2 + 1) != std::string_view::npos || line.substr(sp2 + 1).substr(0, 7) != "HTTP/1.") {
    Respond(c, PlainResponse(400, "bad request\n"), now);
    return;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (method != "GET") {
    Respond(c, PlainResponse(405, "method not allowed\n", "Allow: GET\r\n"), now);
  } else if (target == "/metrics") {
    std::string body;
    try {
      body = registry.Render();
    } catch (const std::exception& e) {
      Respond(c, PlainResponse(500, fmt::format("rendering metrics failed: {}\n", e.what())), now);
      return;
    }
    Respond(c, Response(200, "text/plain; version=0.0.4; charset=utf-8", body), now);
  } else if (target == "/healthz") {
    Respond(c, PlainResponse(200, "ok\n"), now);
  } else {
    Respond(c, PlainResponse(404, "not found\n"), now);
  }
}

void HttpServer::Impl::Respond(Conn& c, std::string response, Clock::time_point now) {
  c.in.clear();
  c.in.shrink_to_fit();
  c.out = std::move(response);
  c.out_off = 0;
  c.state = Conn::State::kWriting;
  c.deadline = now + options.write_timeout;
  OnWritable(c, now);  // usually completes right away
}

void HttpServer::Impl::OnWritable(Conn& c, Clock::time_point now) {
  while (c.out_off < c.out.size()) {
    ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Close(c);  // EPIPE, ECONNRESET
      return;
    }
    c.out_off += static_cast<size_t>(w);
  }
  // Done: send FIN, then wait briefly for the client to close its side (discarding any body or
  // oversized headers it still sends) so our close does not turn into a reset that could
  // destroy the response before the client reads it.
  c.out.clear();
  c.out.shrink_to_fit();
  ::shutdown(c.fd.get(), SHUT_WR);
  c.state = Conn::State::kLingering;
  c.deadline = now + kLingerTimeout;
}

void HttpServer::Impl::OnDeadline(Conn& c, Clock::time_point now) {
  if (c.state == Conn::State::kReading) {
    if (c.in.empty()) {
      Close(c);  // connected and never said anything: nothing to answer
    } else {
      Respond(c, PlainResponse(408, "request timeout\n"), now);
    }
  } else {
    Close(c);  // write timed out, or linger over
  }
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Registry& registry, const std::string& host_port,
                                                              HttpServerOptions options) {
  auto addr = ParseHostPort(host_port);
  if (!addr.ok()) return addr.status();
  if (options.max_header_bytes == 0 || options.max_connections == 0) {
    return absl::InvalidArgumentError("metrics server: max_header_bytes and max_connections must be positive");
  }
  const std::string what = fmt::format("metrics listen {}", host_port);

  auto impl = std::make_unique<Impl>(registry, options);
  impl->listen_fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!impl->listen_fd.valid()) return ErrnoStatus(errno, what + ": socket");
  int one = 1;
  // Lets a restarted daemon rebind while old connections sit in TIME_WAIT; on Linux it does not
  // allow two listeners on one port.
  if (::setsockopt(impl->listen_fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return ErrnoStatus(errno, what + ": setsockopt(SO_REUSEADDR)");
  }
  if (::bind(impl->listen_fd.get(), reinterpret_cast<const sockaddr*>(&addr->addr), sizeof(addr->addr)) != 0) {
    return ErrnoStatus(errno, what);
  }
  if (::listen(impl->listen_fd.get(), 64) != 0) return ErrnoStatus(errno, what);
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(impl->listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return ErrnoStatus(errno, what + ": getsockname");
  }
  impl->port = ntohs(bound.sin_port);
  impl->wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->wake_fd.valid()) return ErrnoStatus(errno, what + ": eventfd");

  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

size_t HttpServer::connections() const { return impl_->connections.load(std::memory_order_relaxed); }

void HttpServer::Stop() {
  absl::MutexLock lock(&impl_->stop_mu);
  if (!impl_->thread.joinable()) return;
  uint64_t one = 1;
  // Cannot fail short of a full counter (2^64 - 2 writes); the thread then wakes anyway.
  [[maybe_unused]] ssize_t w = ::write(impl_->wake_fd.get(), &one, sizeof(one));
  impl_->thread.join();
  impl_->listen_fd.reset();
  impl_->wake_fd.reset();
}

}  // namespace symdex::metrics
