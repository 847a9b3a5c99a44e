#include "server/debuginfo/worker/worker_client.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/str_format.h"

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/worker/worker_protocol.h"

extern char** environ;

namespace symdex::debuginfo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorMessage = 64 * 1024;

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? StrCat("SIG", abbrev) : StrCat("signal ", sig);
}

std::string FormatGiB(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
}

enum class ReadResult { kOk, kEof, kTimeout, kError };

// Reads exactly n bytes before `deadline`.
ReadResult ReadFull(int fd, char* buf, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ReadResult::kTimeout;
    struct pollfd p {
      fd, POLLIN, 0
    };
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ReadResult::kError;
    if (r == 0) return ReadResult::kTimeout;
    ssize_t got = ::recv(fd, buf, n, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) return ReadResult::kError;
    if (got == 0) return ReadResult::kEof;
    buf += got;
    n -= static_cast<size_t>(got);
  }
  return ReadResult::kOk;
}

// Whether `fd` has bytes (or EOF, or an error) to read before `until`; nothing is read.
bool ReadableBefore(int fd, Clock::time_point until) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    struct pollfd p {
      fd, POLLIN, 0
    };
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    return r != 0;
  }
}

bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t r = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);  // a dead worker is no SIGPIPE
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    s.remove_prefix(static_cast<size_t>(r));
  }
  return true;
}

}  // namespace

WorkerLimits WorkerLimits::FromEnvironment() {
  WorkerLimits l;
  if (const char* t = std::getenv("SYMDEX_DEBUGINFO_TIMEOUT"); t && *t) {
    double v = std::strtod(t, nullptr);
    if (v > 0) {
      l.timeout_base_seconds = v;
      l.fixed_timeout = true;
    }
  }
  if (const char* m = std::getenv("SYMDEX_DEBUGINFO_MEMORY_MB"); m && *m) {
    uint64_t v = std::strtoull(m, nullptr, 10);
    if (v > 0) l.memory_base = v << 20;
  }
  if (const char* q = std::getenv("SYMDEX_DEBUGINFO_QUIET"); q && *q) {
    double v = std::strtod(q, nullptr);
    if (v > 0) l.stream_quiet_seconds = v;
  }
  return l;
}

absl::StatusOr<std::string> FindWorkerExecutable() {
  if (const char* e = std::getenv("SYMDEX_DEBUGINFO_WORKER"); e && *e) return std::string(e);
  ASSIGN_OR_RETURN(std::string dir, ProgramDir());
  // Beside the program (a build tree), else in ../lib/symdex/ (an installed package: a helper
  // program is no command of its own in bin/).
  std::string exe = dir + "/symdex-debuginfo-worker";
  if (::access(exe.c_str(), X_OK) == 0) return exe;
  const int beside = errno;
  std::string lib = dir + "/../lib/symdex/symdex-debuginfo-worker";
  if (::access(lib.c_str(), X_OK) == 0) return lib;
  return absl::FailedPreconditionError(StrCat("debug files are parsed by ", exe, " or ", lib, ", both missing (",
                                              std::strerror(beside),
                                              "): install it next to symdex/symdexd or set SYMDEX_DEBUGINFO_WORKER"));
}

DwarfWorker::~DwarfWorker() { Stop(true); }

absl::Status DwarfWorker::Start() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::InternalError(StrCat("socketpair: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);  // dup2 clears FD_CLOEXEC on 0 and 1
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // nothing else of the daemon's
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The daemon may block or ignore signals; the worker starts with the defaults.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char* argv[] = {const_cast<char*>(exe_.c_str()), nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, exe_.c_str(), &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  UniqueFd ours(sv[0]);
  UniqueFd(sv[1]).Reset();  // the worker's end: it has its copies as 0 and 1
  if (rc != 0) {
    return absl::FailedPreconditionError(StrCat("cannot start ", exe_, ": ", std::strerror(rc),
                                                " (set SYMDEX_DEBUGINFO_WORKER to symdex-debuginfo-worker)"));
  }
  pid_ = pid;
  fd_ = std::move(ours);
  if (limits_.nice > 0) {
    // The worker's main thread (its threads, started per request, inherit it). Lowering a
    // priority needs no privilege; should it fail, the worker only competes as an equal.
    errno = 0;
    const int base = ::getpriority(PRIO_PROCESS, 0);
    if (errno == 0) (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), std::min(19, base + limits_.nice));
  }
  return absl::OkStatus();
}

std::string DwarfWorker::Stop(bool kill) {
  if (pid_ < 0) return "";
  fd_.Reset();
  if (kill) ::kill(pid_, SIGKILL);
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, 0);
  } while (r < 0 && errno == EINTR);
  pid_ = -1;
  if (r < 0) return "worker vanished";
  if (WIFSIGNALED(st)) return StrCat("parser killed by ", SignalName(WTERMSIG(st)));
  if (WIFEXITED(st)) return StrCat("parser exited with status ", WEXITSTATUS(st));
  return "parser stopped";
}

absl::StatusOr<std::string> DwarfWorker::Call(WorkerRequest::Kind kind, const std::string& path, unsigned jobs,
                                              const std::function<absl::Status(std::string&&)>& on_part,
                                              const std::function<void()>& on_quiet, const PayloadSink& sink) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0)
    return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  if (path.empty() || path.size() > kMaxPathLength) return absl::InvalidArgumentError(StrCat(path, ": path too long"));
  jobs = std::max(1u, jobs);
  const uint64_t size = static_cast<uint64_t>(sb.st_size);
  WorkerRequest req{.kind = kind, .path = path, .jobs = jobs};
  req.memory_limit = limits_.memory_base + (uint64_t{jobs} + 1) * size;
  const double timeout = limits_.fixed_timeout ? limits_.timeout_base_seconds
                                               : limits_.timeout_base_seconds + static_cast<double>(size >> 22);
  // CPU: every thread may be busy for the whole wall-clock limit.
  req.cpu_seconds = static_cast<uint32_t>(std::ceil(timeout)) * jobs + 1;
  const std::string request = EncodeRequest(req);

  bool sent = false;
  for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
    if (pid_ >= 0) {
      // An idle worker has nothing to say: readable means it died (EOF) or is out of step.
      struct pollfd pf {
        fd_.get(), POLLIN, 0
      };
      if (::poll(&pf, 1, 0) != 0) Stop(true);
    }
    if (pid_ < 0) RETURN_IF_ERROR(Start());
    sent = SendAll(fd_.get(), request);
    if (!sent) Stop(true);  // died while idle (killed from outside?): one fresh start
  }
  if (!sent) return absl::UnavailableError(StrCat(path, ": cannot send the file to ", exe_));

  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  auto failed = [&](ReadResult r, const char* what) -> absl::Status {
    if (r == ReadResult::kTimeout) {
      Stop(true);
      return absl::DeadlineExceededError(
          StrCat(path, ": timed out after ", absl::StrFormat("%.0f", timeout), " s (parser killed)"));
    }
    // EOF: the worker died; how it ended says why.
    std::string how = Stop(r != ReadResult::kEof);
    if (how == "parser killed by SIGXCPU") how = StrCat("exceeded the CPU limit of ", req.cpu_seconds, " s");
    if (how == "parser killed by SIGKILL") how += " (out of memory?)";
    return absl::DataLossError(
        StrCat(path, ": ", how, " while ", what, " (memory limit ", FormatGiB(req.memory_limit), ")"));
  };
  absl::StatusOr<ResponseHeader> header;
  std::string payload;
  bool quiet_told = !on_quiet;
  uint64_t answer_bytes = 0;
  for (;;) {
    if (!quiet_told) {
      const auto quiet_until =
          std::min(deadline,
                   Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(limits_.stream_quiet_seconds * 1000)));
      if (!ReadableBefore(fd_.get(), quiet_until)) {
        quiet_told = true;
        on_quiet();
      }
    }
    char hbuf[kResponseHeaderSize];
    if (ReadResult r = ReadFull(fd_.get(), hbuf, sizeof hbuf, deadline); r != ReadResult::kOk)
      return failed(r, "parsing");
    header = DecodeResponseHeader(std::string_view(hbuf, sizeof hbuf));
    if (header.ok() && header->part && !on_part) header = absl::DataLossError("a part where none was asked for");
    if (!header.ok()) {
      Stop(true);
      return absl::DataLossError(StrCat(path, ": invalid response from the parser: ", header.status().message()));
    }
    if (!header->ok && header->payload_size > kMaxErrorMessage) {
      Stop(true);
      return absl::DataLossError(StrCat(path, ": invalid response from the parser: error message too long"));
    }
    // A streamed answer's parts and its end together are bounded as one answer is.
    answer_bytes += header->payload_size;
    if (answer_bytes > kMaxResponsePayload) {
      Stop(true);
      return absl::DataLossError(StrCat(path, ": invalid response from the parser: parts of ", answer_bytes,
                                        " bytes exceed the limit of ", kMaxResponsePayload));
    }
    if (sink && header->ok && !header->part) {
      constexpr uint64_t kPiece = uint64_t{1} << 20;
      payload.resize(std::min(header->payload_size, kPiece));
      for (uint64_t left = header->payload_size; left > 0;) {
        const size_t n = static_cast<size_t>(std::min(left, kPiece));
        if (ReadResult r = ReadFull(fd_.get(), payload.data(), n, deadline); r != ReadResult::kOk) {
          return failed(r, "sending results");
        }
        if (absl::Status s = sink(std::string_view(payload.data(), n)); !s.ok()) {
          Stop(true);  // the rest of the answer is still coming: out of step
          return s;
        }
        left -= n;
      }
      return std::string();
    }
    payload.assign(header->payload_size, '\0');
    if (ReadResult r = ReadFull(fd_.get(), payload.data(), payload.size(), deadline); r != ReadResult::kOk) {
      return failed(r, "sending results");
    }
    if (!header->part) break;
    if (absl::Status s = on_part(std::move(payload)); !s.ok()) {
      Stop(true);  // the rest of the answer would be out of step with what the caller has
      return s;
    }
  }
  if (!header->ok) {
    // The parser's own message names the file already (IndexDwarfFile's errors do).
    return absl::DataLossError(payload.find(path) == std::string::npos ? StrCat(path, ": ", payload) : payload);
  }
  return payload;
}

absl::StatusOr<DwarfIndex> DwarfWorker::IndexStream(const std::string& path, unsigned jobs, const PartHandler& on_part,
                                                    const std::function<void()>& on_quiet) {
  DwarfIndex whole;
  auto append = [&](std::string_view bytes) -> absl::Status {
    if (absl::Status s = AppendDwarfIndex(bytes, whole); !s.ok()) {
      Stop(true);  // out of step with us: never trust its next answer
      return absl::DataLossError(StrCat(path, ": invalid response from the parser: ", s.message()));
    }
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(std::string rest, Call(
                                         WorkerRequest::Kind::kIndexStream, path, jobs,
                                         [&](std::string&& part) {
                                           const DwarfIndexSizes from = SizesOf(whole);
                                           RETURN_IF_ERROR(append(part));
                                           return on_part(whole, from);
                                         },
                                         on_quiet));
  RETURN_IF_ERROR(append(rest));
  return whole;
}

absl::StatusOr<DwarfIndex> DwarfWorker::Index(const std::string& path, unsigned jobs) {
  ASSIGN_OR_RETURN(std::string payload, Call(WorkerRequest::Kind::kIndex, path, jobs));
  auto idx = DecodeDwarfIndex(payload);
  if (!idx.ok()) {
    Stop(true);  // out of step with us: never trust its next answer
    return absl::DataLossError(StrCat(path, ": invalid response from the parser: ", idx.status().message()));
  }
  return idx;
}

absl::StatusOr<DwarfIndex> DwarfWorker::IndexThenMap(const std::string& path, unsigned jobs,
                                                     absl::StatusOr<std::string>& map) {
  std::optional<DwarfIndex> idx;
  auto answer = Call(WorkerRequest::Kind::kIndexThenMap, path, jobs, [&](std::string&& part) -> absl::Status {
    if (idx) return absl::DataLossError(StrCat(path, ": invalid response from the parser: a second index"));
    auto decoded = DecodeDwarfIndex(part);
    if (!decoded.ok()) {
      return absl::DataLossError(StrCat(path, ": invalid response from the parser: ", decoded.status().message()));
    }
    idx = std::move(*decoded);
    return absl::OkStatus();
  });
  if (!idx) {
    map = absl::CancelledError("no index");
    if (answer.ok()) return absl::DataLossError(StrCat(path, ": invalid response from the parser: no index"));
    return answer.status();
  }
  map = std::move(answer);
  return std::move(*idx);
}

absl::Status DwarfWorker::AddrMapInto(const std::string& path, unsigned jobs, int fd) {
  auto write = [fd](std::string_view piece) -> absl::Status {
    while (!piece.empty()) {
      const ssize_t n = ::write(fd, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return absl::ResourceExhaustedError(StrCat("writing the address map: ", std::strerror(errno)));
      piece.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  };
  return Call(WorkerRequest::Kind::kAddrMap, path, jobs, {}, {}, write).status();
}

}  // namespace symdex::debuginfo
