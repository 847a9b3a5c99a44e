// What a debug file's stored index was made from: size, modification and change times, inode
// and device. A cached index is reused only while the file behind it still has the same stamp
// (a damaged file replaced by a good one, or a file rewritten in place, is parsed again).
// stat() costs microseconds; hashing the contents would cost ~1 s per GB read (a 590 MB
// vmlinux, 1.1 GB of modules) on every `symdex index`, for what ctime already catches.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

namespace symdex::debuginfo {

struct FileStamp {
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;  // changes on every write, even one that restores the mtime (cp -p, touch -d)
  int64_t ino = 0;
  int64_t dev = 0;
  bool operator==(const FileStamp&) const = default;
};

inline std::optional<FileStamp> StampOf(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return std::nullopt;
  FileStamp s;
  s.size = static_cast<int64_t>(sb.st_size);
  s.mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1000000000 + sb.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(sb.st_ctim.tv_sec) * 1000000000 + sb.st_ctim.tv_nsec;
  s.ino = static_cast<int64_t>(sb.st_ino);
  s.dev = static_cast<int64_t>(sb.st_dev);
  return s;
}

}  // namespace symdex::debuginfo
