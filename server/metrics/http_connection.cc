#include "server/metrics/http_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace symdex::metrics {
namespace {

// After the response: how long to wait for the client to close, and how much of what it still
// sends to discard meanwhile (see Finish()).
constexpr std::chrono::milliseconds kLingerTimeout{1000};
constexpr size_t kMaxLingerBytes = 64 * 1024;

// End of the header block ("\r\n\r\n", or a lenient "\n\n"), or npos.
size_t HeaderEnd(const std::string& buf) {
  size_t crlf = buf.find("\n\r\n");
  size_t lf = buf.find("\n\n");
  size_t end = std::string::npos;
  if (crlf != std::string::npos) end = crlf + 3;
  if (lf != std::string::npos) end = std::min(end, lf + 2);
  return end;
}

// cpp-httplib splits the request line on runs of spaces, so it would take "GET  /x HTTP/1.1" or
// " GET /x HTTP/1.1" as a valid request; HTTP/1.1 says exactly one space between the three fields.
bool HasEmptyField(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\r'));
  return !line.empty() && (line.front() == ' ' || line.back() == ' ' || line.find("  ") != std::string_view::npos);
}

void Endpoint(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    if (inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf)) != nullptr) {
      ip = buf;
      port = ntohs(in.sin_port);
    }
  }
}

}  // namespace

HttpConnection::HttpConnection(int fd, int wake_fd) : fd_(fd), wake_fd_(wake_fd) {
  // Every wait goes through poll() with the stop signal; a blocking recv/send could not be woken.
  int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  // cpp-httplib sends the head and the body in separate writes; with Nagle the body's last
  // segment would wait for the client's (possibly delayed) ACK of the head.
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

HttpConnection::~HttpConnection() { Close(); }

void HttpConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

HttpConnection::Ready HttpConnection::Wait(short events, Clock::time_point deadline) const {
  while (true) {
    pollfd p[2] = {{fd_, events, 0}, {wake_fd_, POLLIN, 0}};
    auto now = Clock::now();
    if (now >= deadline) return Ready::kTimeout;
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    int n = ::poll(p, 2, static_cast<int>(std::min<decltype(wait)>(wait, 60'000)));
    if (n < 0 && errno != EINTR) return Ready::kStopped;  // ENOMEM: give the connection up
    if (n <= 0) continue;
    if (p[1].revents != 0) return Ready::kStopped;
    // POLLERR/POLLHUP included: the recv or send that follows reports it.
    if (p[0].revents != 0) return Ready::kReady;
  }
}

HttpConnection::Head HttpConnection::ReadHead(Clock::time_point deadline, size_t max_bytes) {
  std::string in;
  char buf[4096];
  size_t end;
  while (true) {
    end = HeaderEnd(in);
    if (end != std::string::npos && end <= max_bytes) break;
    if (in.size() > max_bytes) return Head::kTooLarge;
    Ready ready = Wait(POLLIN, deadline);
    if (ready == Ready::kStopped) return Head::kGone;
    if (ready == Ready::kTimeout) return in.empty() ? Head::kGone : Head::kTimeout;
    // Never buffer more than one byte past the limit: that byte is enough to say "too large".
    ssize_t r = ::recv(fd_, buf, std::min(sizeof(buf), max_bytes + 1 - in.size()), 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (r <= 0) return Head::kGone;  // EOF or reset: the client gave up mid-request
    in.append(buf, static_cast<size_t>(r));
  }
  received_ = in.size();
  head_end_ = end;
  head_.reserve(end + 64);
  for (size_t i = 0; i < end; ++i) {
    if (in[i] == '\n' && (i == 0 || in[i - 1] != '\r')) head_ += '\r';
    head_ += in[i];
  }
  return HasEmptyField(head_) ? Head::kBadLine : Head::kComplete;
}

void HttpConnection::WriteError(int code, std::string_view reason, std::string_view body) {
  std::string response = fmt::format(
      "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Length: {}\r\n"
      "Content-Type: text/plain; charset=utf-8\r\n\r\n{}",
      code, reason, body.size(), body);
  size_t off = 0;
  while (off < response.size()) {
    ssize_t w = write(response.data() + off, response.size() - off);
    if (w < 0) return;
    off += static_cast<size_t>(w);
  }
}

bool HttpConnection::is_writable() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0;
}

ssize_t HttpConnection::read(char* ptr, size_t size) {
  size_t n = std::min(size, head_.size() - pos_);
  std::copy_n(head_.data() + pos_, n, ptr);
  pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t HttpConnection::write(const char* ptr, size_t size) {
  if (size == 0) return 0;
  // The write deadline starts with the response, so a slow collector does not eat into it.
  if (write_deadline_ == Clock::time_point{}) write_deadline_ = Clock::now() + write_timeout_;
  while (true) {
    ssize_t w = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (w > 0) return w;
    if (w < 0 && errno == EINTR) continue;
    if (w == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return -1;  // EPIPE, ECONNRESET
    // Never 0 on a timeout: cpp-httplib's write loop would spin on it.
    if (Wait(POLLOUT, write_deadline_) != Ready::kReady) return -1;
  }
}

void HttpConnection::Finish(bool linger) {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  if (linger) {
    auto deadline = Clock::now() + kLingerTimeout;
    char buf[4096];
    size_t discarded = 0;
    while (discarded <= kMaxLingerBytes && Wait(POLLIN, deadline) == Ready::kReady) {
      ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (r <= 0) break;  // the client's EOF, or a reset
      discarded += static_cast<size_t>(r);
    }
  }
  Close();
}

void HttpConnection::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) Endpoint(ss, ip, port);
}

void HttpConnection::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) Endpoint(ss, ip, port);
}

}  // namespace symdex::metrics
