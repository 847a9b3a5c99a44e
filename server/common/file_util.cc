#include "server/common/file_util.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "server/common/strings.h"

namespace symdex {
namespace {
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}
}  // namespace

absl::StatusOr<std::string> ReadFileBounded(const std::string& path, size_t max_bytes) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return ErrnoStatus(errno, StrCat("cannot open ", path));
  std::string out;
  // procfs/sysfs files report st_size 0, so read in chunks until EOF instead of trusting fstat.
  size_t chunk = 1 << 16;
  for (;;) {
    if (out.size() >= max_bytes + 1) break;
    size_t want = std::min(chunk, max_bytes + 1 - out.size());
    size_t old = out.size();
    out.resize(old + want);
    ssize_t n = ::read(f.fd, out.data() + old, want);
    if (n < 0) {
      if (errno == EINTR) {
        out.resize(old);
        continue;
      }
      return ErrnoStatus(errno, StrCat("cannot read ", path));
    }
    out.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
    if (chunk < (size_t{1} << 24)) chunk *= 2;
  }
  if (out.size() > max_bytes) {
    return absl::ResourceExhaustedError(
        StrCat(path, " is larger than the limit of ", max_bytes, " bytes"));
  }
  return out;
}

std::string SysrootPath(const std::string& sysroot, const std::string& abs_path) {
  if (sysroot.empty() || sysroot == "/") return abs_path;
  if (sysroot.back() == '/') return sysroot.substr(0, sysroot.size() - 1) + abs_path;
  return sysroot + abs_path;
}

std::string DefaultIndexPath() {
  if (::geteuid() == 0) return "/var/lib/symdex/index.db";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/symdex/index.db";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/state/symdex/index.db";
}

std::string AddrMapDirFor(const std::string& db_path) {
  if (db_path.empty() || db_path == ":memory:" || db_path.starts_with("file:")) return "";
  return db_path + "-addrmaps";
}

bool UnixSocketAnswers(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return false;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

}  // namespace symdex
