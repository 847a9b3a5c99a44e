// The HTTP endpoint exposing a metrics Registry to Prometheus, on cpp-httplib (Debian's
// libcpp-httplib-dev):
//   GET /metrics  200, text/plain; version=0.0.4, body = registry.Render()
//   GET /healthz  200, "ok\n"
//   GET other     404;  any other method 405;  malformed request line 400;
//   headers > max_header_bytes 431;  headers not complete within read_timeout 408.
// Every response carries Content-Length and "Connection: close"; one request per connection.
// cpp-httplib compresses a response when the client asks for it (Accept-Encoding: gzip, as
// Prometheus does).
//
// Bounds: `threads` workers serve connections, each for at most read_timeout + write_timeout +
// 1 s of lingering, so a slow or stuck client holds one worker for a bounded time and never the
// others. At most max_connections are accepted at once (being served or waiting for a worker);
// further clients wait in the kernel's accept backlog. See http_connection.h for why the request
// head is read by this code rather than by cpp-httplib.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics/metrics.h"

namespace symdex::metrics {

struct HttpServerOptions {
  // From accept until the request's headers are complete.
  std::chrono::milliseconds read_timeout{2000};
  // From the complete request until the response is fully written.
  std::chrono::milliseconds write_timeout{10000};
  // Request line plus headers, including the blank line ending them.
  size_t max_header_bytes = 8192;
  size_t max_connections = 64;
  // Connections served at the same time; Render() runs on these threads.
  size_t threads = 4;
};

class HttpServer {
 public:
  // Listens on "HOST:PORT": HOST an IPv4 literal (0.0.0.0 for all interfaces) or "localhost"
  // (127.0.0.1); PORT 0 picks an ephemeral port (see port()). `registry` must outlive the server.
  // Errors: InvalidArgument for a malformed address; otherwise the errno's code with a message
  // like "metrics listen 127.0.0.1:9464: Address already in use".
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Registry& registry, const std::string& host_port,
                                                           HttpServerOptions options = {});

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // Stop()s

  // The bound port (the ephemeral one when asked for port 0).
  int port() const;
  // Client connections currently open (accepted, not yet closed); for tests and self-monitoring.
  size_t connections() const;

  // Closes the listening socket and every open connection and joins the threads. Idempotent and
  // thread-safe; must not be called from a collector (it runs on a server thread).
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symdex::metrics
