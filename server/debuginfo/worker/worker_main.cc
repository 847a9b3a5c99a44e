// symdex-debuginfo-worker: parses debug files for the indexer in a process of its own — their
// DWARF into the index, and vmlinux's into its address map (see
// worker_protocol.h for the wire format, worker_client.h for the parent's side). Reads
// requests on stdin, writes responses on stdout, exits at end of input.
//
// Limits are applied here, per request, before the file is opened: RLIMIT_AS (memory) and
// RLIMIT_CPU (soft limit = CPU used so far + the request's budget: the worker lives for many
// files). The wall-clock limit is the parent's: it kills the worker.
//
//   symdex-debuginfo-worker --print [-j N] FILE...       index FILEs in-process and print counts
//   symdex-debuginfo-worker --print-map [-j N] FILE...   build their address maps in-process
// (debugging and timing; nothing is written). Each line carries a digest of what was made — the
// index's rows (not the name of the reader) or the map's bytes — so that two ways of reading a
// file (SYMDEX_MODULES_VIA=libdwfl, SYMDEX_DIE_READER=libdw) can be compared over a whole corpus.
//
// Test hooks (environment): SYMDEX_WORKER_TEST_CRASH_ON=S aborts, SYMDEX_WORKER_TEST_HANG_ON=S
// sleeps forever, on a path containing S; SYMDEX_WORKER_TEST_CRASH_MAP_ON=S aborts building the
// address map of such a path; SYMDEX_WORKER_TEST_CRASH_AFTER_PART=S aborts (_HANG_AFTER_PART=S
// sleeps forever) once the first part of such a path's streamed index is sent.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "server/common/sanitizer.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/debuginfo/worker/worker_protocol.h"

namespace symdex::debuginfo {
namespace {

bool ReadAll(int fd, char* buf, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t r = ::write(fd, s.data(), s.size());
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    s.remove_prefix(static_cast<size_t>(r));
  }
  return true;
}

bool Respond(bool ok, const std::string& payload) {
  return WriteAll(1, EncodeResponseHeader(ok, payload.size())) && WriteAll(1, payload);
}

// Writes the parts of a streamed index (DwarfIndexOptions::on_part) on a thread of its own, in
// the order they come: the parsing threads hand a part over and go on reading units while it is
// encoded and while the parent, busy storing the one before, does not read.
class PartWriter {
 public:
  // The test hooks SYMDEX_WORKER_TEST_CRASH_AFTER_PART / _HANG_AFTER_PART: a worker dying or
  // hanging mid-stream, once the first part is out.
  enum class AfterFirst { kGoOn, kCrash, kHang };
  explicit PartWriter(AfterFirst after_first) : after_first_(after_first), thread_([this] { Loop(); }) {}
  ~PartWriter() { Finish(); }
  PartWriter(const PartWriter&) = delete;
  PartWriter& operator=(const PartWriter&) = delete;

  void Add(DwarfIndex&& part) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(part));
    cv_.notify_one();
  }
  // Every part written; false if a write failed (the parent is gone).
  bool Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    return ok_;
  }

 private:
  void Loop() {
    for (;;) {
      DwarfIndex part;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        part = std::move(queue_.front());
        queue_.pop_front();
      }
      if (!ok_) continue;  // the parent is gone: drop the rest
      const std::string bytes = EncodeDwarfIndex(part);
      ok_ = WriteAll(1, EncodePartHeader(bytes.size())) && WriteAll(1, bytes);
      if (after_first_ == AfterFirst::kCrash) std::abort();
      while (after_first_ == AfterFirst::kHang) pause();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DwarfIndex> queue_;
  bool closed_ = false;
  const AfterFirst after_first_;
  bool ok_ = true;      // the writing thread's
  std::thread thread_;  // declared last: started once the rest is ready
};

void ApplyLimits(const WorkerRequest& req) {
  // ASan reserves terabytes of shadow address space: under it (the test suite's sanitizer
  // build) RLIMIT_AS would fail every allocation, so only the CPU and wall-clock limits apply.
  if (!kAddressSanitizer) {
    struct rlimit as {};
    as.rlim_cur = req.memory_limit ? req.memory_limit : RLIM_INFINITY;
    as.rlim_max = RLIM_INFINITY;
    setrlimit(RLIMIT_AS, &as);
  }
  struct rlimit cpu {};
  cpu.rlim_max = RLIM_INFINITY;
  cpu.rlim_cur = RLIM_INFINITY;
  if (req.cpu_seconds) {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    cpu.rlim_cur = static_cast<rlim_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1) + req.cpu_seconds;
  }
  setrlimit(RLIMIT_CPU, &cpu);
}

// SYMDEX_WORKER_TEST_CRASH_MAP_ON: a worker that dies building `path`'s address map.
void MapTestHook(const std::string& path) {
  const char* map_crash = std::getenv("SYMDEX_WORKER_TEST_CRASH_MAP_ON");
  if (map_crash && *map_crash && path.find(map_crash) != std::string::npos) std::abort();
}

void TestHooks(const WorkerRequest& req) {
  const std::string& path = req.path;
  if (req.kind == WorkerRequest::Kind::kAddrMap) MapTestHook(path);
  const char* crash = std::getenv("SYMDEX_WORKER_TEST_CRASH_ON");
  if (crash && *crash && path.find(crash) != std::string::npos) std::abort();
  const char* hang = std::getenv("SYMDEX_WORKER_TEST_HANG_ON");
  if (hang && *hang && path.find(hang) != std::string::npos) {
    for (;;) pause();
  }
}

// FNV-1a: a digest to compare outputs by, not a checksum against tampering.
uint64_t Digest(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

int Serve() {
  for (;;) {
    char header[kRequestHeaderSize];
    if (!ReadAll(0, header, sizeof header)) return 0;  // parent closed: done
    WorkerRequest req;
    auto n = DecodeRequestHeader(std::string_view(header, sizeof header), req);
    if (!n.ok()) {
      Respond(false, std::string(n.status().message()));
      return 2;
    }
    req.path.resize(*n);
    if (!ReadAll(0, req.path.data(), *n)) return 2;
    ApplyLimits(req);
    TestHooks(req);
    bool ok = false;
    std::string payload;
    try {
      if (req.kind == WorkerRequest::Kind::kAddrMap) {
        auto map = BuildAddrMap(req.path, req.jobs);
        ok = map.ok();
        payload = ok ? std::move(*map) : std::string(map.status().message());
      } else if (req.kind == WorkerRequest::Kind::kIndexThenMap) {
        // The index first (the caller has it whatever becomes of the map), then the map from the
        // module's relocated copy the index was read from: the file relocated once for both.
        std::optional<RelocatedElf> copy;
        auto idx = IndexDwarfFile(req.path, {.jobs = req.jobs, .relocated_copy = &copy});
        if (idx.ok()) {
          const std::string bytes = EncodeDwarfIndex(*idx);
          idx = DwarfIndex();
          if (!WriteAll(1, EncodePartHeader(bytes.size())) || !WriteAll(1, bytes)) return 2;
          MapTestHook(req.path);
          absl::StatusOr<std::string> map = absl::UnknownError("");
          if (copy) map = BuildAddrMapFromCopy(*copy);
          copy.reset();
          if (!map.ok()) map = BuildAddrMap(req.path, req.jobs);
          ok = map.ok();
          payload = ok ? std::move(*map) : std::string(map.status().message());
        } else {
          payload = std::string(idx.status().message());
        }
      } else if (req.kind == WorkerRequest::Kind::kIndexStream) {
        auto hook = [&](const char* name) {
          const char* v = std::getenv(name);
          return v && *v && req.path.find(v) != std::string::npos;
        };
        PartWriter parts(hook("SYMDEX_WORKER_TEST_CRASH_AFTER_PART")  ? PartWriter::AfterFirst::kCrash
                         : hook("SYMDEX_WORKER_TEST_HANG_AFTER_PART") ? PartWriter::AfterFirst::kHang
                                                                      : PartWriter::AfterFirst::kGoOn);
        auto idx = IndexDwarfFile(
            req.path, {.jobs = req.jobs, .on_part = [&](DwarfIndex&& part) { parts.Add(std::move(part)); }});
        if (!parts.Finish()) return 2;
        ok = idx.ok();
        payload = ok ? EncodeDwarfIndex(*idx) : std::string(idx.status().message());
      } else {
        auto idx = IndexDwarfFile(req.path, {.jobs = req.jobs});
        ok = idx.ok();
        payload = ok ? EncodeDwarfIndex(*idx) : std::string(idx.status().message());
      }
    } catch (const std::bad_alloc&) {
      ok = false;
      payload = req.path + ": exceeded the memory limit of " + GiB(req.memory_limit) + " while parsing";
    }
    if (!Respond(ok, payload)) return 2;
  }
}

// --print / --print-map: parse in this process with `jobs` threads and print counts.
int Print(int argc, char** argv) {
  int rc = 0;
  const bool map = std::strcmp(argv[1], "--print-map") == 0;
  unsigned jobs = 1;
  int first = 2;
  if (argc > 3 && std::strcmp(argv[2], "-j") == 0) {
    jobs = static_cast<unsigned>(std::max(1, std::atoi(argv[3])));
    first = 4;
  }
  for (int i = first; i < argc; ++i) {
    if (map) {
      auto bytes = BuildAddrMap(argv[i], jobs);
      if (!bytes.ok()) {
        std::printf("FAILED %s\n", std::string(bytes.status().message()).c_str());
        rc = 1;
        continue;
      }
      std::printf("ok %s address map of %zu bytes digest=%016llx\n", argv[i], bytes->size(),
                  static_cast<unsigned long long>(Digest(*bytes)));
      continue;
    }
    size_t scanned = 0;
    std::vector<std::string> misses;
    auto idx = IndexDwarfFile(argv[i], {.jobs = jobs, .units_scanned = &scanned, .scan_misses = &misses});
    for (const std::string& m : misses) std::printf("scanner declined: %s\n", m.c_str());
    if (!idx.ok()) {
      std::printf("FAILED %s\n", std::string(idx.status().message()).c_str());
      rc = 1;
      continue;
    }
    idx->reader.clear();  // the rows, whichever reader made them
    std::printf("ok %s units=%zu functions=%zu variables=%zu lines=%zu digest=%016llx scanned=%zu\n", argv[i],
                idx->units.size(), idx->functions.size(), idx->variables.size(), idx->symbol_lines.size(),
                static_cast<unsigned long long>(Digest(EncodeDwarfIndex(*idx))), scanned);
  }
  return rc;
}

}  // namespace
}  // namespace symdex::debuginfo

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "--print") == 0 || std::strcmp(argv[1], "--print-map") == 0)) {
    return symdex::debuginfo::Print(argc, argv);
  }
  if (argc != 1) {
    std::fprintf(stderr,
                 "usage: %s  (requests on stdin; started by symdex/symdexd)\n       %s --print|--print-map [-j N] "
                 "FILE...\n",
                 argv[0], argv[0]);
    return 2;
  }
  return symdex::debuginfo::Serve();
}
