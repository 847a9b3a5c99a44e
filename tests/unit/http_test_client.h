// A raw-socket HTTP client for the metrics endpoint's tests (metrics_test.cc,
// metrics_http_bounds_test.cc): raw so that tests can send what no HTTP library would (split,
// oversized, malformed or never-finished requests) and see exactly what the server sends back.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace symdex::metrics::http_test {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class ClientSocket {
 public:
  explicit ClientSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~ClientSocket() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  ClientSocket(const ClientSocket&) = delete;
  ClientSocket& operator=(const ClientSocket&) = delete;

  bool connected() const { return connected_; }
  bool SendAll(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t w = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      off += static_cast<size_t>(w);
    }
    return true;
  }
  // Reads until EOF; false on timeout. `reset` tells whether the connection was reset instead.
  // The default timeout is a ceiling for a machine under load, not an expected time.
  bool ReadToEof(std::string& out, milliseconds timeout = milliseconds(60000), bool* reset = nullptr) {
    auto deadline = Clock::now() + timeout;
    char buf[4096];
    while (true) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        if (reset) *reset = true;
        return true;
      }
      if (r == 0) return true;
      out.append(buf, static_cast<size_t>(r));
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

struct HttpResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

inline HttpResponse ParseResponse(const std::string& raw) {
  HttpResponse resp;
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.rfind("HTTP/1.1 ", 0) != 0) return resp;
  resp.head = raw.substr(0, end + 2);
  resp.body = raw.substr(end + 4);
  resp.status = std::stoi(raw.substr(9, 3));
  return resp;
}

// Sends `request` on a fresh connection and reads the response until the server closes.
inline HttpResponse Exchange(int port, const std::string& request) {
  ClientSocket s(port);
  EXPECT_TRUE(s.connected());
  EXPECT_TRUE(s.SendAll(request));
  std::string raw;
  bool reset = false;
  EXPECT_TRUE(s.ReadToEof(raw, milliseconds(60000), &reset)) << "no EOF from server; got: " << raw;
  // The server lingers after responding, so even a client whose request it did not read in full
  // (oversized headers, an unread body) gets a clean EOF rather than a reset.
  EXPECT_FALSE(reset) << "connection reset by server";
  return ParseResponse(raw);
}

// Polls `cond` until it holds; false when it still does not after `timeout` (a ceiling).
inline bool WaitFor(const std::function<bool()>& cond, milliseconds timeout = milliseconds(60000)) {
  auto deadline = Clock::now() + timeout;
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

}  // namespace symdex::metrics::http_test
