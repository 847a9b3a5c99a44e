// A thread's buffer reused from call to call: its pages stay mapped, so a call that reads file
// after file (a module's relocated sections, a decompressed module) does not fault in fresh
// memory and unmap it each time.
#pragma once

#include <cstddef>
#include <string>

namespace symdex {

// One use of such a buffer: afterwards it keeps its memory for the next use, unless this use
// grew it past `keep` bytes (an unusually large input), which it then gives back.
class ScratchUse {
 public:
  static constexpr size_t kKeep = size_t{64} << 20;
  explicit ScratchUse(std::string& buf, size_t keep = kKeep) : buf_(buf), keep_(keep) {}
  ScratchUse(const ScratchUse&) = delete;
  ScratchUse& operator=(const ScratchUse&) = delete;
  ~ScratchUse() {
    if (buf_.capacity() > keep_) std::string().swap(buf_);
  }

 private:
  std::string& buf_;
  size_t keep_;
};

}  // namespace symdex
