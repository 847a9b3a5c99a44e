// symdex-faults: `symdex` (the same command line, client/cli_main.cc) with its fault points
// (server/common/fault_point.h) armed from the environment, for the crash-safety tests. Built
// with the tests, never installed: the shipped `symdex` has no handler and ignores all of this.
//
//   SYMDEX_FAULT_KILL=POINT#N          SIGKILL this process at the N-th time POINT is reached
//   SYMDEX_FAULT_KILL=POINT#N@AFTER    ... counting only the times after AFTER was first reached
//   SYMDEX_FAULT_LOG=FILE              append "killed at POINT#N[@AFTER]" to FILE just before
//   SYMDEX_FAULT_TRACE=FILE            at exit, write every point reached, in order, one
//                                      "POINT COUNT" line per run of the same point
//
// Besides the points in symdex's code, SQLite's own writes are points here: this program makes
// a VFS that wraps the default one its default, so every write to an index's WAL is
// "sqlite-wal-write" and every write to its database file (checkpoints) "sqlite-db-write". That
// is how a test kills a run in the middle of the target's commit:
// SYMDEX_FAULT_KILL=sqlite-wal-write#N@target-commit.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/cli_common.h"
#include "server/common/fault_point.h"
#include "server/store/sqlite_db.h"

namespace {

struct Faults {
  std::mutex mu;
  // The kill: POINT#N@AFTER.
  std::string point, after, spec;
  uint64_t at = 0;
  bool after_seen = false;
  uint64_t seen = 0;
  int log_fd = -1;
  // The trace, run-length encoded.
  std::string trace_path;
  std::vector<std::pair<std::string, uint64_t>> trace;
};

Faults* g_faults = nullptr;  // made once in main, never freed (points may be reached until exit)

void OnPoint(std::string_view point) {
  Faults& f = *g_faults;
  std::lock_guard<std::mutex> l(f.mu);
  if (!f.trace_path.empty()) {
    if (!f.trace.empty() && f.trace.back().first == point) {
      ++f.trace.back().second;
    } else {
      f.trace.emplace_back(std::string(point), 1);
    }
  }
  if (f.at == 0) return;
  if (!f.after_seen) {  // AFTER itself, and all before it, are not counted
    if (point == f.after) f.after_seen = true;
    return;
  }
  if (point != f.point || ++f.seen != f.at) return;
  if (f.log_fd >= 0) {
    const std::string line = "killed at " + f.spec + "\n";
    (void)!::write(f.log_fd, line.data(), line.size());
  }
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

void WriteTrace() {
  Faults& f = *g_faults;
  std::lock_guard<std::mutex> l(f.mu);
  FILE* out = std::fopen(f.trace_path.c_str(), "w");
  if (out == nullptr) return;
  for (const auto& [point, n] : f.trace)
    std::fprintf(out, "%s %llu\n", point.c_str(), static_cast<unsigned long long>(n));
  std::fclose(out);
}

// "POINT#N" or "POINT#N@AFTER"; false when it is neither.
bool ParseKill(const std::string& spec, Faults& f) {
  const size_t hash = spec.find('#');
  if (hash == std::string::npos || hash == 0) return false;
  const size_t at = spec.find('@', hash);
  const std::string_view n = std::string_view(spec).substr(hash + 1, at == std::string::npos ? at : at - hash - 1);
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), f.at);
  if (ec != std::errc() || end != n.data() + n.size() || f.at == 0) return false;
  f.point = spec.substr(0, hash);
  if (at != std::string::npos) f.after = spec.substr(at + 1);
  f.after_seen = f.after.empty();
  f.spec = spec;
  return true;
}

// ---- the VFS: the default one, with a point before every write to a WAL or database file.

sqlite3_vfs* g_real_vfs = nullptr;
sqlite3_vfs g_vfs;

struct FaultFile {
  sqlite3_file base;
  const char* point;   // the write point of this kind of file, or nullptr
  sqlite3_file* real;  // the default VFS's file, allocated right after this struct
};

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }

int Close(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return Real(f)->pMethods->xRead(Real(f), buf, n, off);
}
int Write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  if (const char* p = reinterpret_cast<FaultFile*>(f)->point) symdex::FaultPoint(p);
  return Real(f)->pMethods->xWrite(Real(f), buf, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) { return Real(f)->pMethods->xTruncate(Real(f), size); }
int Sync(sqlite3_file* f, int flags) { return Real(f)->pMethods->xSync(Real(f), flags); }
int FileSize(sqlite3_file* f, sqlite3_int64* size) { return Real(f)->pMethods->xFileSize(Real(f), size); }
int Lock(sqlite3_file* f, int l) { return Real(f)->pMethods->xLock(Real(f), l); }
int Unlock(sqlite3_file* f, int l) { return Real(f)->pMethods->xUnlock(Real(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) { return Real(f)->pMethods->xCheckReservedLock(Real(f), out); }
int FileControl(sqlite3_file* f, int op, void* arg) { return Real(f)->pMethods->xFileControl(Real(f), op, arg); }
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) { return Real(f)->pMethods->xDeviceCharacteristics(Real(f)); }
int ShmMap(sqlite3_file* f, int pg, int sz, int extend, void volatile** p) {
  return Real(f)->pMethods->xShmMap(Real(f), pg, sz, extend, p);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return Real(f)->pMethods->xShmUnmap(Real(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) { return Real(f)->pMethods->xFetch(Real(f), off, n, p); }
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) { return Real(f)->pMethods->xUnfetch(Real(f), off, p); }

const sqlite3_io_methods kMethods = {3,
                                     Close,
                                     Read,
                                     Write,
                                     Truncate,
                                     Sync,
                                     FileSize,
                                     Lock,
                                     Unlock,
                                     CheckReservedLock,
                                     FileControl,
                                     SectorSize,
                                     DeviceCharacteristics,
                                     ShmMap,
                                     ShmLock,
                                     ShmBarrier,
                                     ShmUnmap,
                                     Fetch,
                                     Unfetch};

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* ff = reinterpret_cast<FaultFile*>(file);
  ff->base.pMethods = nullptr;
  ff->real = reinterpret_cast<sqlite3_file*>(ff + 1);
  ff->point = (flags & SQLITE_OPEN_WAL)       ? "sqlite-wal-write"
              : (flags & SQLITE_OPEN_MAIN_DB) ? "sqlite-db-write"
                                              : nullptr;
  int rc = g_real_vfs->xOpen(g_real_vfs, name, ff->real, flags, out_flags);
  // The default VFS's files are version 3 (memory-mapped reads): the wrapper forwards all of it.
  if (ff->real->pMethods != nullptr) {
    if (ff->real->pMethods->iVersion < 3) {
      ff->real->pMethods->xClose(ff->real);
      return SQLITE_CANTOPEN;
    }
    ff->base.pMethods = &kMethods;
  }
  return rc;
}

void InstallVfs() {
  g_real_vfs = sqlite3_vfs_find(nullptr);
  g_vfs = *g_real_vfs;  // every other method is the default VFS's own, on its own data
  g_vfs.zName = "symdex-faults";
  g_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_real_vfs->szOsFile;
  g_vfs.xOpen = Open;
  g_vfs.pNext = nullptr;
  if (sqlite3_vfs_register(&g_vfs, /*makeDflt=*/1) != SQLITE_OK) {
    std::fprintf(stderr, "symdex-faults: cannot register the SQLite VFS\n");
    std::exit(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_faults = new Faults;
  if (const char* kill = std::getenv("SYMDEX_FAULT_KILL"); kill != nullptr && *kill != '\0') {
    if (!ParseKill(kill, *g_faults)) {
      std::fprintf(stderr, "symdex-faults: SYMDEX_FAULT_KILL='%s' is not POINT#N or POINT#N@AFTER\n", kill);
      return 2;
    }
  }
  if (const char* log = std::getenv("SYMDEX_FAULT_LOG"); log != nullptr && *log != '\0') {
    g_faults->log_fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (g_faults->log_fd < 0) {
      std::fprintf(stderr, "symdex-faults: cannot open %s: %s\n", log, std::strerror(errno));
      return 3;
    }
  }
  if (const char* trace = std::getenv("SYMDEX_FAULT_TRACE"); trace != nullptr && *trace != '\0') {
    g_faults->trace_path = trace;
    std::atexit(WriteTrace);
  }
  symdex::store::ConfigureSqlite();  // the settings symdex gives SQLite, before the VFS initializes it
  InstallVfs();
  symdex::SetFaultHandler(OnPoint);
  return symdex::cli::Main(argc, argv);
}
