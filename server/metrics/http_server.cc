#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/http_connection.h"

namespace symdex::metrics {
namespace {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

absl::Status ErrnoStatus(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), fmt::format("{}: {}", what, std::strerror(err)));
}

absl::StatusOr<sockaddr_in> ParseHostPort(const std::string& host_port) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(fmt::format(
        "metrics listen address '{}': {} (expected HOST:PORT, HOST an IPv4 address or 'localhost')", host_port, why));
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

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_num));
  if (host == "localhost") host = "127.0.0.1";
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return bad(fmt::format("'{}' is not an IPv4 address", host));
  }
  return addr;
}

// The workers, in place of cpp-httplib's ThreadPool, whose queue has no bound: Enqueue() blocks
// cpp-httplib's accept loop while max_open connections are open.
class ConnectionPool {
 public:
  ConnectionPool(size_t threads, size_t max_open) : max_open_(max_open) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~ConnectionPool() { Shutdown(); }

  // On cpp-httplib's accept thread, with the just-accepted connection's job.
  void Enqueue(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ConnectionPool::MayAccept));
    ++open_;
    jobs_.push_back({std::move(fn), Clock::now()});
  }
  // Enqueue() stops waiting; queued jobs still run (and close their sockets at once).
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Runs what is queued, then joins the workers. Idempotent.
  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      shutdown_ = true;
    }
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  size_t open() const {
    absl::MutexLock lock(&mu_);
    return open_;
  }
  // When the connection being served on this thread was accepted: its read deadline counts from
  // then, so one that waited for a worker past it is dropped at once.
  static Clock::time_point AcceptedAt() { return accepted_at_; }

 private:
  struct Job {
    std::function<void()> fn;
    Clock::time_point accepted;
  };
  bool MayAccept() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_ < max_open_ || stopping_; }
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !jobs_.empty() || shutdown_; }
  void Work() {
    while (true) {
      Job job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &ConnectionPool::HasWork));
        if (jobs_.empty()) return;  // shut down and drained
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      accepted_at_ = job.accepted;
      job.fn();  // serves and closes the socket; cpp-httplib's jobs do not throw
      absl::MutexLock lock(&mu_);
      --open_;
    }
  }

  const size_t max_open_;
  mutable absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;  // queued or being served
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  static thread_local Clock::time_point accepted_at_;
};
thread_local Clock::time_point ConnectionPool::accepted_at_;

// What cpp-httplib's listen loop creates: a handle on the pool, which outlives it.
class PoolQueue final : public httplib::TaskQueue {
 public:
  explicit PoolQueue(ConnectionPool& pool) : pool_(pool) {}
  void enqueue(std::function<void()> fn) override { pool_.Enqueue(std::move(fn)); }
  void shutdown() override { pool_.Shutdown(); }

 private:
  ConnectionPool& pool_;
};

// cpp-httplib's server with our socket handling: process_and_close_socket(), private and
// virtual in httplib::Server, is where each accepted socket arrives, so overriding it replaces
// cpp-httplib's per-read timeouts with HttpConnection's bounds while keeping its request parsing,
// routing and response writing (process_request(), protected).
class MetricsServer final : public httplib::Server {
 public:
  MetricsServer(const HttpServerOptions& options, int wake_fd, const std::atomic<bool>& stopping)
      : options_(options), wake_fd_(wake_fd), stopping_(stopping) {}

  // A bound, listening socket for listen_after_bind(); cpp-httplib closes it in stop().
  void AdoptListener(int fd) { svr_sock_ = fd; }

 private:
  // Answers a request that cannot be served with an error, then closes (false: the connection
  // is done).
  bool Refuse(HttpConnection& conn, int status, const char* reason, const char* body) {
    conn.SetWriteTimeout(options_.write_timeout);
    conn.WriteError(status, reason, body);
    conn.Finish(/*linger=*/true);
    return false;
  }

  bool process_and_close_socket(socket_t sock) override {
    HttpConnection conn(sock, wake_fd_);
    if (stopping_.load()) return false;
    switch (conn.ReadHead(ConnectionPool::AcceptedAt() + options_.read_timeout, options_.max_header_bytes)) {
      case HttpConnection::Head::kGone:
        return false;  // nothing was asked: close without a word
      case HttpConnection::Head::kTimeout:
        return Refuse(conn, 408, "Request Timeout", "request timeout\n");
      case HttpConnection::Head::kTooLarge:
        return Refuse(conn, 431, "Request Header Fields Too Large", "request headers too large\n");
      case HttpConnection::Head::kBadLine:
        return Refuse(conn, 400, "Bad Request", "bad request\n");
      case HttpConnection::Head::kComplete:
        break;
    }
    conn.SetWriteTimeout(options_.write_timeout);
    // Whether the client sent nothing after the head that we left unread: then closing right
    // after the response cannot reset the connection, and no worker time goes to lingering.
    bool consumed = false;
    bool connection_closed = false;
    bool ok = process_request(conn, /*close_connection=*/true, connection_closed, [&](httplib::Request& req) {
      consumed = req.method == "GET" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding");
    });
    conn.Finish(/*linger=*/!consumed || conn.HasUnreadInput());
    return ok;
  }

  const HttpServerOptions options_;
  const int wake_fd_;
  const std::atomic<bool>& stopping_;
};

const char* ErrorBody(int status) {
  switch (status) {
    case 400:
      return "bad request\n";
    case 404:
      return "not found\n";
    case 405:
      return "method not allowed\n";
    case 413:
      return "request too large\n";
    case 414:
      return "request URI too long\n";
    case 416:
      return "range not satisfiable\n";
  }
  return nullptr;
}

constexpr char kPlain[] = "text/plain; charset=utf-8";

void AddRoutes(httplib::Server& server, Registry& registry) {
  server.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", kPlain); });
  // Before cpp-httplib reads a body (it would for POST, PUT, ...): nothing but GET is served.
  // cpp-httplib serves HEAD as GET without the body; the old server did not, nor does this one.
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET") return httplib::Server::HandlerResponse::Unhandled;
    res.status = 405;
    res.set_header("Allow", "GET");
    return httplib::Server::HandlerResponse::Handled;
  });
  // cpp-httplib's error responses have no body; say what went wrong, as the old server did.
  server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    const char* body = ErrorBody(res.status);
    if (!res.body.empty() || body == nullptr) return httplib::Server::HandlerResponse::Unhandled;
    res.set_content(body, kPlain);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(fmt::format("rendering metrics failed: {}\n", what), kPlain);
  });
}

}  // namespace

struct HttpServer::Impl {
  Impl(const HttpServerOptions& options, int wake)
      : wake_fd(wake), pool(options.threads, options.max_connections), server(options, wake_fd.get(), stopping) {}

  Fd wake_fd;  // eventfd: Stop() makes it readable, which ends every connection's waits
  std::atomic<bool> stopping{false};
  ConnectionPool pool;
  MetricsServer server;
  int port = 0;
  std::thread thread;  // cpp-httplib's accept loop
  std::atomic<bool> listen_returned{false};
  absl::Mutex stop_mu;  // serializes Stop()
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Registry& registry, const std::string& host_port,
                                                              HttpServerOptions options) {
  auto addr = ParseHostPort(host_port);
  if (!addr.ok()) return addr.status();
  if (options.max_header_bytes == 0 || options.max_connections == 0 || options.threads == 0) {
    return absl::InvalidArgumentError("metrics server: max_header_bytes, max_connections and threads must be positive");
  }
  const std::string what = fmt::format("metrics listen {}", host_port);

  // The listening socket is made here, not by cpp-httplib's bind_to_port(): that sets
  // SO_REUSEPORT, which lets a second daemon bind the same port silently, and reports a failure
  // as a bare false without the errno a user needs ("Address already in use").
  Fd listen_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listen_fd.valid()) return ErrnoStatus(errno, what + ": socket");
  int one = 1;
  // Lets a restarted daemon rebind while old connections sit in TIME_WAIT; on Linux it does not
  // allow two listeners on one port.
  if (::setsockopt(listen_fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return ErrnoStatus(errno, what + ": setsockopt(SO_REUSEADDR)");
  }
  if (::bind(listen_fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    return ErrnoStatus(errno, what);
  }
  if (::listen(listen_fd.get(), 64) != 0) return ErrnoStatus(errno, what);
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return ErrnoStatus(errno, what + ": getsockname");
  }
  Fd wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd.valid()) return ErrnoStatus(errno, what + ": eventfd");

  auto impl = std::make_unique<Impl>(options, wake_fd.release());
  impl->port = ntohs(bound.sin_port);
  AddRoutes(impl->server, registry);
  ConnectionPool* pool = &impl->pool;
  impl->server.new_task_queue = [pool] { return new PoolQueue(*pool); };
  impl->server.AdoptListener(listen_fd.release());
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    raw->listen_returned = true;
  });
  // httplib::Server::stop() does nothing until the loop has started: wait for it, so that a
  // Stop() right after Start() cannot miss it.
  while (!raw->server.is_running() && !raw->listen_returned)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

size_t HttpServer::connections() const { return impl_->pool.open(); }

void HttpServer::Stop() {
  absl::MutexLock lock(&impl_->stop_mu);
  if (!impl_->thread.joinable()) return;
  impl_->stopping = true;
  uint64_t one = 1;
  // Cannot fail short of a full counter (2^64 - 2 writes), and the eventfd stays readable.
  [[maybe_unused]] ssize_t w = ::write(impl_->wake_fd.get(), &one, sizeof(one));
  impl_->pool.Stop();    // the accept loop no longer waits for a free slot
  impl_->server.stop();  // closes the listening socket: the loop ends, drains and joins the pool
  impl_->thread.join();
  impl_->pool.Shutdown();  // in case the loop had ended on its own (an accept error)
}

}  // namespace symdex::metrics
