// The one owner of a file descriptor: every fd symdex opens is closed exactly once, on every
// path, by this class (or handed on with Release()).
#pragma once

#include <unistd.h>

#include <utility>

namespace symdex {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(o.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }

  // Closes the owned fd (if any) and owns `fd` instead.
  void Reset(int fd = -1) {
    const int old = std::exchange(fd_, fd);
    // Linux releases the descriptor even when close() fails with EINTR; retrying could close a
    // descriptor another thread has just been given. So: once, whatever it returns.
    if (old >= 0) (void)::close(old);
  }

 private:
  int fd_ = -1;
};

}  // namespace symdex
