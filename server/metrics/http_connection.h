// One accepted connection of the metrics endpoint, as the httplib::Stream that cpp-httplib parses
// the request from and writes the response to. Internal to server/metrics (http_server.cc).
//
// Why not cpp-httplib's own socket stream: Debian's cpp-httplib 0.11 bounds each read by a
// timeout but not the request as a whole. A client trickling one byte a second keeps a worker
// forever, a header line without '\n' is buffered without limit, and Server::stop() waits for
// every open connection's read timeout. This stream reads the request line and headers itself,
// against one deadline from accept and one byte limit, and hands cpp-httplib the complete block;
// a Stop() wakes every wait at once. The request line and headers are still parsed by
// cpp-httplib; the body never is (only GET is served).
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace symdex::metrics {

class HttpConnection final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // `fd`: the accepted socket; made non-blocking, closed by Finish() or the destructor.
  // `wake_fd`: readable once the server stops; every wait here returns as soon as it is.
  HttpConnection(int fd, int wake_fd);
  ~HttpConnection() override;
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  enum class Head {
    kComplete,  // the header block is buffered; read() serves it to cpp-httplib
    kGone,      // EOF, reset, stopped, or the deadline passed before any byte: nothing to answer
    kTimeout,   // some bytes, but the headers were not complete by the deadline: answer 408
    kTooLarge,  // more than max_bytes without the blank line ending the headers: answer 431
    kBadLine,   // a request line cpp-httplib would accept but HTTP does not (empty fields): 400
  };
  // Reads until the blank line ending the headers, reading at most max_bytes + 1 bytes. Bare-LF
  // line ends are accepted and handed on as CRLF (cpp-httplib requires CRLF).
  Head ReadHead(Clock::time_point deadline, size_t max_bytes);

  // Writes a complete plain-text response of our own (408, 431, 400) with Connection: close.
  void WriteError(int code, std::string_view reason, std::string_view body);

  // How long writing the response may take, from its first byte.
  void SetWriteTimeout(std::chrono::milliseconds timeout) { write_timeout_ = timeout; }

  // Sends FIN and closes. With `linger` it first discards what the client still sends (at most
  // 64 KiB, for at most a second, until its EOF), so that closing with unread input does not
  // reset the connection and destroy the response before the client has read it.
  void Finish(bool linger);

  // Bytes the client sent after the header block (a body, a pipelined request).
  bool HasUnreadInput() const { return head_end_ < received_; }

  // httplib::Stream.
  bool is_readable() const override { return pos_ < head_.size(); }
  bool is_writable() const override;
  // Serves the header block, then EOF: nothing reads a request body.
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  enum class Ready { kReady, kTimeout, kStopped };
  // Waits until fd_ has `events`, the deadline passes, or the server stops.
  Ready Wait(short events, Clock::time_point deadline) const;
  void Close();

  int fd_;
  const int wake_fd_;
  std::string head_;     // the header block, CRLF line ends, once ReadHead() returned kComplete
  size_t pos_ = 0;       // how much of head_ read() has served
  size_t received_ = 0;  // bytes read from the socket by ReadHead()
  size_t head_end_ = 0;  // of which the header block
  std::chrono::milliseconds write_timeout_{10000};
  Clock::time_point write_deadline_{};  // set by the first write()
};

}  // namespace symdex::metrics
