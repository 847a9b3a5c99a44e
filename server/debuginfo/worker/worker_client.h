// The parent's side of symdex-debuginfo-worker (worker_main.cc): debug files are untrusted
// input (above all those a debuginfod server sends), and libdw is not hardened against crafted
// DWARF, so files are parsed in an exec'ed child with a memory limit (RLIMIT_AS), a CPU limit
// and a wall-clock timeout. A crash, a limit hit or garbage output fails that file only, with
// the reason; the worker is restarted for the next file.
//
// One DwarfWorker per indexing thread, reused for many files (a process per module would cost
// more than parsing most modules). Not thread-safe: one thread drives one worker.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "server/common/status.h"
#include "server/common/unique_fd.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/worker/worker_protocol.h"

namespace symdex::debuginfo {

struct WorkerLimits {
  // RLIMIT_AS: this, plus (jobs + 1) times the file's size (each thread maps the file).
  uint64_t memory_base = uint64_t{4} << 30;
  // Wall clock: this, plus one second per 4 MiB of file (6.1's 590 MB vmlinux: ~3.5 min).
  double timeout_base_seconds = 60;
  // A streamed index (IndexStream) silent this long — no part, no answer — is one the caller
  // stops holding resources for (its store transaction: writers wait ~10 s for the lock); the
  // parse itself goes on to the wall-clock limit. Parts come every ~1/8 of the parse (vmlinux:
  // tens of milliseconds).
  double stream_quiet_seconds = 5;
  // Overrides for tests and operators: SYMDEX_DEBUGINFO_TIMEOUT (seconds, the whole limit),
  // SYMDEX_DEBUGINFO_MEMORY_MB (the base), SYMDEX_DEBUGINFO_QUIET (seconds, stream_quiet_seconds).
  static WorkerLimits FromEnvironment();
  bool fixed_timeout = false;
  // Added to the worker's nice value (setpriority) when it starts: work nothing waits for (the
  // address maps, which readers do without meanwhile) yields the CPU to work that something does.
  int nice = 0;
};

// The nice increment of background parsing (WorkerLimits::nice).
inline constexpr int kBackgroundNice = 10;

// The worker executable: $SYMDEX_DEBUGINFO_WORKER if set, else symdex-debuginfo-worker in the
// directory of the running executable (bin/ of the build tree or of the installation).
absl::StatusOr<std::string> FindWorkerExecutable();

class DwarfWorker {
 public:
  DwarfWorker(std::string exe, WorkerLimits limits) : exe_(std::move(exe)), limits_(limits) {}
  ~DwarfWorker();
  DwarfWorker(const DwarfWorker&) = delete;
  DwarfWorker& operator=(const DwarfWorker&) = delete;

  // Indexes `path` in the worker (started on first use; restarted after any failure). Errors
  // name the file and the reason: the parser's own, "parser killed by SIGSEGV", "timed out
  // after N s", "exceeded the memory limit", "invalid response".
  absl::StatusOr<DwarfIndex> Index(const std::string& path, unsigned jobs);
  // Index, with the index handed over in parts as the worker reads them (a linked file read by
  // the DIE scanner; others come in one piece): `on_part` gets the index so far and where the
  // part just appended starts. An error it returns ends the call (the worker is killed: it is
  // out of step). The result is the whole index, as Index gives it. Aborted: the worker's
  // scanner declined a unit after parts went out — use Index. `on_quiet`, if given, is called
  // (once) when the worker has been silent for WorkerLimits::stream_quiet_seconds.
  using PartHandler = std::function<absl::Status(const DwarfIndex& so_far, const DwarfIndexSizes& part_from)>;
  absl::StatusOr<DwarfIndex> IndexStream(const std::string& path, unsigned jobs, const PartHandler& on_part,
                                         const std::function<void()>& on_quiet = {});
  // The address map of a debug file (addr_map.h BuildAddrMap), built in the worker under the
  // same limits, written to `fd` as it arrives (vmlinux's is ~50 MB: never held whole). The
  // bytes are untrusted too: MappedAddrMap checks them when opened.
  absl::Status AddrMapInto(const std::string& path, unsigned jobs, int fd);
  // Index, then the address map (AddrMapInto's bytes, whole: a module's), the map built from the
  // relocated copy the index was read from: a module relocated once for both. `map` gets the map
  // or why there is none — the index stands either way (a worker that dies building the map
  // costs only the map).
  absl::StatusOr<DwarfIndex> IndexThenMap(const std::string& path, unsigned jobs, absl::StatusOr<std::string>& map);

  pid_t pid() const { return pid_; }

 private:
  absl::Status Start();
  // Sends `kind` for `path` and returns the response's payload (ok) or the failure.
  // Parts of a streamed answer go to `on_part` (a part where none is expected: invalid response).
  // With `sink`, an ok answer's payload goes to it in pieces of at most 1 MiB as it is read, and
  // "" is returned; an error `sink` returns ends the call (the worker is killed).
  using PayloadSink = std::function<absl::Status(std::string_view piece)>;
  absl::StatusOr<std::string> Call(WorkerRequest::Kind kind, const std::string& path, unsigned jobs,
                                   const std::function<absl::Status(std::string&&)>& on_part = {},
                                   const std::function<void()>& on_quiet = {}, const PayloadSink& sink = {});
  // Kills (SIGKILL) and reaps the worker; returns how it ended ("" if it was not running).
  std::string Stop(bool kill);

  std::string exe_;
  WorkerLimits limits_;
  pid_t pid_ = -1;
  UniqueFd fd_;  // our end of the socketpair
};

}  // namespace symdex::debuginfo
