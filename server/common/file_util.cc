#include "server/common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>

#include "server/common/fault_point.h"
#include "server/common/strings.h"

namespace symdex {
namespace {
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
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f) return ErrnoStatus(errno, StrCat("cannot open ", path));
  std::string out;
  // procfs/sysfs files report st_size 0, so read in chunks until EOF instead of trusting fstat;
  // a regular file's size is where the first read starts (one buffer, not one per doubling).
  size_t chunk = 1 << 16, expect = 0;
  struct stat st {};
  if (::fstat(f.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    expect = std::min(static_cast<size_t>(st.st_size), max_bytes + 1);
    chunk = std::max(chunk, expect);
    out.reserve(expect + 1);
  }
  for (;;) {
    if (out.size() >= max_bytes + 1) break;
    // At the size fstat gave, one byte more is asked for: the end of the file, without growing.
    size_t want = std::min(expect > 0 && out.size() == expect ? 1 : chunk, max_bytes + 1 - out.size());
    size_t old = out.size();
    out.resize(old + want);
    ssize_t n = ::read(f.get(), out.data() + old, want);
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
    return absl::ResourceExhaustedError(StrCat(path, " is larger than the limit of ", max_bytes, " bytes"));
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

gid_t PrivateGroup() {
  // Only root may give a file to a group it is not in; a member could too, but then one user's
  // own index would become readable by every other member, which nobody asked for.
  if (::geteuid() != 0) return static_cast<gid_t>(-1);
  // Looked up at most once a minute: an index run writes a file per module (1,100+), and each
  // lookup reads /etc/group through NSS (a third of a CPU-second per run); a group made meanwhile
  // (the package's postinst) is seen within the minute.
  static std::mutex mu;
  static gid_t cached = static_cast<gid_t>(-1);
  static std::chrono::steady_clock::time_point until{};
  std::lock_guard<std::mutex> l(mu);
  const auto now = std::chrono::steady_clock::now();
  if (now < until) return cached;
  group g{};
  group* out = nullptr;
  std::vector<char> buf(16384);
  cached = ::getgrnam_r("symdex", &g, buf.data(), buf.size(), &out) != 0 || out == nullptr ? static_cast<gid_t>(-1)
                                                                                           : out->gr_gid;
  until = now + std::chrono::seconds(60);
  return cached;
}

absl::Status CreatePrivateDir(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(StrCat("cannot create directory ", dir, ": a file of that name exists"));
  }
  // Parents first (each one ours only if we create it).
  if (size_t slash = dir.find_last_of('/'); slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(CreatePrivateDir(dir.substr(0, slash)));
  }
  if (::mkdir(dir.c_str(), kPrivateDirMode) != 0) {
    if (errno == EEXIST) return absl::OkStatus();  // made by someone else meanwhile
    return ErrnoStatus(errno, StrCat("cannot create directory ", dir));
  }
  // mkdir's mode went through the umask (0750 & ~umask): set it exactly.
  if (::chmod(dir.c_str(), kPrivateDirMode) != 0) return ErrnoStatus(errno, StrCat("cannot chmod ", dir));
  if (gid_t gid = PrivateGroup(); gid != static_cast<gid_t>(-1)) {
    // Best effort: a process outside the symdex group cannot hand the directory to it, which then
    // keeps the process's group (still 0750).
    [[maybe_unused]] const int best_effort = ::chown(dir.c_str(), -1, gid);
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenPrivateFile(const std::string& path, int flags) {
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_CLOEXEC | flags, kPrivateFileMode));
  if (fd.get() < 0) return ErrnoStatus(errno, StrCat("cannot create ", path));
  // Before any data: the umask may have taken group read away (or, for a file that existed,
  // the old mode may be anything).
  if (::fchmod(fd.get(), kPrivateFileMode) != 0) return ErrnoStatus(errno, StrCat("cannot chmod ", path));
  if (gid_t gid = PrivateGroup(); gid != static_cast<gid_t>(-1)) {
    // Best effort, as for directories: the file keeps the process's group when this fails.
    [[maybe_unused]] const int best_effort = ::fchown(fd.get(), -1, gid);
  }
  return fd;
}

namespace {
std::string OctalMode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

std::string UserName(uid_t uid) {
  passwd pw{};
  passwd* out = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr) return out->pw_name;
  return StrCat("uid ", uid);
}
}  // namespace

absl::StatusOr<std::string> EnsurePrivate(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::string();  // missing (or hidden from us): nothing to show
  const bool dir = S_ISDIR(st.st_mode);
  // A directory others may only traverse lists nothing; a file's o+x alone reads nothing.
  if ((st.st_mode & (S_IROTH | S_IWOTH)) == 0) return std::string();
  const char* what =
      (st.st_mode & S_IROTH) ? (dir ? "listable by every user" : "readable by every user") : "writable by every user";
  const mode_t fixed = st.st_mode & 07770;
  if (st.st_uid == ::geteuid() || ::geteuid() == 0) {
    if (::chmod(path.c_str(), fixed) != 0) {
      return ErrnoStatus(errno, StrCat(path, " is ", what, " (", OctalMode(st.st_mode), ") and chmod failed"));
    }
    return StrCat(path, " was ", what, " (", OctalMode(st.st_mode), "); now ", OctalMode(fixed));
  }
  return absl::FailedPreconditionError(StrCat(
      path, " is ", what, " (", OctalMode(st.st_mode), ") and holds live kernel addresses; symdex will not use it ",
      "until its owner (", UserName(st.st_uid), ") runs: chmod o-rwx '", path, "'"));
}

std::vector<TempFile> FindTempFiles(const std::string& dir, const std::string& marker) {
  std::vector<TempFile> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return out;
  const time_t now = ::time(nullptr);
  while (dirent* e = ::readdir(d.get())) {
    std::string_view name = e->d_name;
    size_t at = name.rfind(marker);
    if (at == std::string_view::npos || at + marker.size() == name.size()) continue;
    std::string_view digits = name.substr(at + marker.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) continue;
    TempFile t;
    t.path = StrCat(dir, "/", name);
    t.pid = std::strtoll(std::string(digits).c_str(), nullptr, 10);
    struct stat st;
    if (::lstat(t.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    t.age_seconds = now > st.st_mtime ? static_cast<int64_t>(now - st.st_mtime) : 0;
    // kill(pid, 0): ESRCH means no such process. A PID reused since (or one from another PID
    // namespace) looks alive; the age limit catches those, since a writer keeps its file fresh
    // and is done within minutes.
    const bool gone = t.pid <= 0 || (::kill(static_cast<pid_t>(t.pid), 0) != 0 && errno == ESRCH);
    t.stale = gone || t.age_seconds > 3600;
    out.push_back(std::move(t));
  }
  return out;
}

int RemoveStaleTempFiles(const std::string& dir, const std::string& marker) {
  int removed = 0;
  for (const TempFile& t : FindTempFiles(dir, marker)) {
    if (t.stale && ::unlink(t.path.c_str()) == 0) ++removed;
  }
  return removed;
}

namespace {
// An install's temporary file: `path`'s directory made as needed, "<path><marker><pid>" written
// by `write` (removed again if that fails), and its descriptor.
absl::StatusOr<std::pair<std::string, UniqueFd>> WriteTemporary(const std::string& path, std::string_view marker,
                                                                const std::function<absl::Status(int fd)>& write) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (absl::Status made = CreatePrivateDir(dir); !made.ok()) {
    return absl::PermissionDeniedError(StrCat("cannot create ", dir, ": ", made.message()));
  }
  std::string tmp = StrCat(path, marker, ::getpid());
  auto fd = OpenPrivateFile(tmp, O_WRONLY | O_TRUNC);
  if (!fd.ok()) return absl::PermissionDeniedError(StrCat("cannot write ", tmp, ": ", fd.status().message()));
  if (absl::Status written = write(fd->get()); !written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  return std::pair<std::string, UniqueFd>(std::move(tmp), std::move(*fd));
}
}  // namespace

absl::Status InstallPrivateFileFrom(const std::string& path, std::string_view marker, std::string_view temp_fault,
                                    std::string_view installed_fault,
                                    const std::function<absl::Status(int fd)>& write) {
  ASSIGN_OR_RETURN(auto temporary, WriteTemporary(path, marker, write));
  auto& [tmp, fd] = temporary;
  FaultPoint(temp_fault);
  if (::fsync(fd.get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(StrCat("installing ", path, ": ", why));
  }
  FaultPoint(installed_fault);
  return absl::OkStatus();
}

absl::Status InstallPrivateFile(const std::string& path, std::string_view bytes, std::string_view marker,
                                std::string_view temp_fault, std::string_view installed_fault) {
  return InstallPrivateFileFrom(path, marker, temp_fault, installed_fault, [&](int fd) -> absl::Status {
    for (size_t done = 0; done < bytes.size();) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::ResourceExhaustedError(
            StrCat("writing ", path, marker, ::getpid(), ": ", n == 0 ? "no progress" : std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  });
}

std::vector<std::string> ScratchDirs() {
  std::vector<std::string> out;
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') out.emplace_back(t);
  out.emplace_back("/var/tmp");
  out.emplace_back("/tmp");
  return out;
}

absl::StatusOr<UniqueFd> UnlinkedScratchFile(std::string_view stem, std::string& dir) {
  std::string why;
  for (const std::string& d : ScratchDirs()) {
    dir = d;
    UniqueFd fd(::open(d.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (fd) return fd;
    std::string tmpl = StrCat(d, "/", stem, "-XXXXXX");
    fd.Reset(::mkostemp(tmpl.data(), O_CLOEXEC));
    if (fd) {
      ::unlink(tmpl.c_str());
      return fd;
    }
    why += StrCat(why.empty() ? "" : ", ", d, ": ", std::strerror(errno));
  }
  return absl::FailedPreconditionError(
      StrCat("no directory takes a temporary file (", why, "); set TMPDIR to a writable one"));
}

absl::Status WriteAllAt(int fd, std::string_view bytes, uint64_t offset, std::string_view what) {
  while (!bytes.empty()) {
    const ssize_t r = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::ResourceExhaustedError(StrCat("cannot write ", what, ": ", std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(r));
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

PrivateFileBatch::~PrivateFileBatch() {
  for (const auto& [tmp, path] : pending_) ::unlink(tmp.c_str());
}

absl::Status PrivateFileBatch::Write(const std::string& path, const std::function<absl::Status(int fd)>& write) {
  // (A path written twice: the last write wins.)
  ASSIGN_OR_RETURN(auto temporary, WriteTemporary(path, marker_, write));
  const std::string& tmp = temporary.first;
  FaultPoint(temp_fault_);
  std::lock_guard<std::mutex> l(mu_);
  if (std::find_if(pending_.begin(), pending_.end(), [&](const auto& e) { return e.first == tmp; }) == pending_.end()) {
    pending_.emplace_back(tmp, path);
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, absl::Status>> PrivateFileBatch::Commit() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, absl::Status>> out;
  if (pending_.empty()) return out;
  // One flush of the file system the files are on, then the renames: each file is whole on disk
  // before its name points at it, as with a per-file fsync.
  absl::Status synced = absl::OkStatus();
  if (UniqueFd dir(::open(std::filesystem::path(pending_.front().first).parent_path().c_str(),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      !dir || ::syncfs(dir.get()) != 0) {
    synced = absl::InternalError(StrCat("flushing the files to disk: ", std::strerror(errno)));
  }
  for (const auto& [tmp, path] : pending_) {
    absl::Status st = synced;
    if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      st = absl::InternalError(StrCat("installing ", path, ": ", std::strerror(errno)));
    }
    if (!st.ok()) ::unlink(tmp.c_str());
    if (st.ok()) FaultPoint(installed_fault_);
    out.emplace_back(path, std::move(st));
  }
  pending_.clear();
  return out;
}

bool UnixSocketAnswers(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return false;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

absl::StatusOr<std::string> ProgramDir() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return absl::FailedPreconditionError(StrCat("cannot read /proc/self/exe: ", ec.message()));
  return self.parent_path().string();
}

}  // namespace symdex
