// File access with explicit size limits: symdex never reads an unbounded amount from a file
// whose size it does not control (procfs files report size 0; a hostile .ko can claim anything).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/common/status.h"
#include "server/common/unique_fd.h"

namespace symdex {

inline constexpr size_t kDefaultMaxFileBytes = size_t{1} << 30;  // 1 GiB

// Reads the whole file. Fails with NotFound / PermissionDenied / ResourceExhausted (over
// max_bytes) / Internal, each message naming the path.
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, size_t max_bytes = kDefaultMaxFileBytes);

// Joins a sysroot and an absolute path ("/proc/kallsyms"); an empty or "/" sysroot is the host.
std::string SysrootPath(const std::string& sysroot, const std::string& abs_path);

// Where the index lives when nobody says (--db, $SYMDEX_DB are the callers' business):
// /var/lib/symdex/index.db as root, else $XDG_STATE_HOME/symdex/index.db
// (~/.local/state/symdex/index.db). The CLI and the daemon share this rule.
std::string DefaultIndexPath();

// Where an index keeps its address maps (debuginfo/symbolize/addr_map.h), one file per build-ID:
// "<db>-addrmaps" next to the database, as SQLite keeps "<db>-wal". "" for an in-memory database.
std::string AddrMapDirFor(const std::string& db_path);

// ---- files that hold live kernel addresses ----------------------------------------------------
// The index, its -wal/-shm/-journal, the address maps and their directories show the running
// kernel's addresses, which /proc/kallsyms hides from unprivileged users (kptr_restrict). They
// are for their owner and the `symdex` group only, whatever the umask says.
inline constexpr mode_t kPrivateFileMode = 0640;
inline constexpr mode_t kPrivateDirMode = 0750;

// The group private files and directories get: the `symdex` group when it exists and this
// process may give files to it (root), else -1 (the process's own group, left as created).
gid_t PrivateGroup();

// Creates `dir` and its missing parents, each 0750 and PrivateGroup() (mkdir, then chmod: the
// umask must not decide). Directories that exist already are left alone.
absl::Status CreatePrivateDir(const std::string& dir);

// open(path, O_CREAT | flags, 0640), then fchmod 0640 and fchown to PrivateGroup() before the
// caller writes a byte. `flags` adds O_WRONLY / O_RDWR, O_EXCL, O_TRUNC (O_CLOEXEC is implied).
absl::StatusOr<UniqueFd> OpenPrivateFile(const std::string& path, int flags);

// Makes sure nobody outside `path`'s owner and group may read or write it (a file) or list it
// (a directory). Missing: fine (""). Over-readable and ours (or we are root): the "other" bits
// are removed and the returned notice says so ("P was readable by every user (0644); now
// 0640"). Over-readable and not ours: FailedPrecondition naming the file, its mode and the
// chmod its owner must run. Mere traversal (o+x on a directory) is allowed.
absl::StatusOr<std::string> EnsurePrivate(const std::string& path);

// Temporary files "<name><marker><pid>" that a writer makes next to its result and renames
// into place: one killed mid-write leaves its file behind.
struct TempFile {
  std::string path;
  int64_t pid = 0;
  int64_t age_seconds = 0;
  bool stale = false;  // its writer is gone (or it is over an hour old): safe to remove
};
// The temporary files in `dir` (none when it cannot be listed).
std::vector<TempFile> FindTempFiles(const std::string& dir, const std::string& marker);
// Removes the stale ones; returns how many were removed.
int RemoveStaleTempFiles(const std::string& dir, const std::string& marker);

// Writes `bytes` to "<path><marker><pid>" (a private file, in a private directory made as
// needed), fsyncs it and renames it over `path`: a reader sees the old file or the new one,
// never a part. The fault points `temp_fault` (written, not in place) and `installed_fault`
// are named by the caller. On failure the temporary file is gone and the old file untouched.
absl::Status InstallPrivateFile(const std::string& path, std::string_view bytes, std::string_view marker,
                                std::string_view temp_fault, std::string_view installed_fault);
// The same with the bytes written by `write` into the temporary file's descriptor.
absl::Status InstallPrivateFileFrom(const std::string& path, std::string_view marker, std::string_view temp_fault,
                                    std::string_view installed_fault, const std::function<absl::Status(int fd)>& write);

// Files installed as InstallPrivateFileFrom installs one, but together: each is written to its
// temporary file as it comes (Write, from any thread), then Commit flushes the file system once
// (syncfs) and renames them all into place. For many files of one directory — a kernel's 1,100
// module address maps — one flush instead of one per file, each of which held up the thread that
// had the next file to make. Temporary files not committed are removed with the batch.
class PrivateFileBatch {
 public:
  PrivateFileBatch(std::string marker, std::string temp_fault, std::string installed_fault)
      : marker_(std::move(marker)), temp_fault_(std::move(temp_fault)), installed_fault_(std::move(installed_fault)) {}
  PrivateFileBatch(const PrivateFileBatch&) = delete;
  PrivateFileBatch& operator=(const PrivateFileBatch&) = delete;
  ~PrivateFileBatch();

  absl::Status Write(const std::string& path, const std::function<absl::Status(int fd)>& write);
  // Each written path and whether it is in place now, in the order they were written.
  std::vector<std::pair<std::string, absl::Status>> Commit();

 private:
  std::string marker_, temp_fault_, installed_fault_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> pending_;  // (temporary file, path)
};

// ---- scratch files ------------------------------------------------------------------------------
// Where a private scratch copy of a large file may go: $TMPDIR, else /var/tmp (disk, not tmpfs,
// where they differ), else /tmp.
std::vector<std::string> ScratchDirs();
// An unlinked file (O_TMPFILE, else a named "<stem>-XXXXXX" removed at once) in the first of
// ScratchDirs() that takes one; `dir` says which. FailedPrecondition naming each directory when
// none does.
absl::StatusOr<UniqueFd> UnlinkedScratchFile(std::string_view stem, std::string& dir);
// pwrite() of all of `bytes` at `offset`; ResourceExhausted "cannot write <what>: <errno>".
absl::Status WriteAllAt(int fd, std::string_view bytes, uint64_t offset, std::string_view what);

// Does something accept a connection on this Unix socket? (A stale socket file does not.)
bool UnixSocketAnswers(const std::string& path);

// The directory of this process's executable (/proc/self/exe): where the programs and modules
// installed with symdex are looked for (symdex-debuginfo-worker, symdex-remote.so).
absl::StatusOr<std::string> ProgramDir();

}  // namespace symdex
