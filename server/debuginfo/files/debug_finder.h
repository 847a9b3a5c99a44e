// Finds the debug file for vmlinux or a module, by build-ID, and says what it tried.
//
// Search order, for each root in --debug-dir DIR... then <sysroot>/usr/lib/debug:
//   ROOT/.build-id/ab/cdef....debug                  (any file, by build-ID)
//   ROOT/boot/vmlinux-R, ROOT/lib/modules/R/vmlinux   (vmlinux)
//   ROOT/lib/modules/R/**/M.ko[.xz|.zst|.gz]          (module M; '-' and '_' equivalent)
//   ROOT/lib/modules/*/**/M.ko...                     (module with a build-ID: any release dir,
//                                                      so a renamed or symlinked layout works)
//   ROOT/lib/modules/*/**/*.ko[.debug]                (module with a build-ID: by build-ID alone)
//   ROOT/lib/modules/*/vmlinux, ROOT/boot/vmlinux-*   (vmlinux: by build-ID, or without one when
//                                                      its linux_banner names release R)
// then <sysroot>/boot/vmlinux-R and an explicit --vmlinux FILE, then debuginfod
// (libdebuginfod; DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT, ...).
// A candidate is used only when its GNU build-ID equals the wanted one; when the target does
// not know its build-ID (an offline System.map has none) the first existing candidate is used
// and the result says it is unverified.
#pragma once

#include <gelf.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/index_inputs.h"
#include "server/common/status.h"
#include "server/kernel/file_status.h"

typedef struct Elf Elf;

namespace symdex::debuginfo {

struct DebugFileRequest {
  std::string module;  // "" = vmlinux
  std::string release;
  std::optional<BuildId> build_id;
};

struct FoundDebugFile {
  std::string path;
  std::string origin;               // "local" | "debuginfod"
  bool verified = false;            // build-ID compared equal
  std::optional<BuildId> build_id;  // of the file
};

// What one lookup did: the file found, or the reason there is none (the status), plus every
// candidate examined and why it was rejected.
struct LookupResult {
  std::optional<FoundDebugFile> found;
  kernel::DebugFileStatus status = kernel::DebugFileStatus::kNotFound;  // used, not-found or build-id-mismatch
  std::vector<std::string> attempts;
  // debuginfod's failure (a positive errno: ENOENT not there, ECONNREFUSED/EHOSTUNREACH server
  // unreachable, ETIME too slow, EFBIG over DEBUGINFOD_MAXSIZE); 0 = it was not asked or answered.
  int debuginfod_errno = 0;
};

// The status a failed lookup deserves: NotFound when nobody has the file, Unavailable when
// debuginfod could not be reached, DeadlineExceeded when it was too slow, ResourceExhausted when
// the file is over the size limit. `what` leads the message.
absl::Status LookupFailure(const LookupResult& r, const std::string& what);

// The GNU build-ID in an open ELF's SHT_NOTE sections, nullopt if it has none.
std::optional<BuildId> ElfBuildId(Elf* elf);

// The GNU build-ID of an ELF file (plain or .xz/.zst/.gz compressed), nullopt if it has none.
absl::StatusOr<std::optional<BuildId>> ReadFileBuildId(const std::string& path);

// Calls fn(symbol, name) for every entry but the null one of every SHT_SYMTAB; stops when fn
// returns false.
void ForEachSymtabSymbol(Elf* elf, const std::function<bool(const GElf_Sym&, const char*)>& fn);

// The value of symbol `name` in the ELF symbol table of `path` (e.g. a vmlinux's _text).
absl::StatusOr<std::optional<uint64_t>> ReadElfSymbolValue(const std::string& path, const std::string& name);

// Thread-safe: lookups for different modules may run concurrently.
class DebugFinder {
 public:
  explicit DebugFinder(DebugFinderOptions opts);
  ~DebugFinder();
  LookupResult Find(const DebugFileRequest& req);

 private:
  std::vector<std::string> Roots() const;
  // ROOT/lib/modules/<release> if it exists, then (with `all`) every other directory there.
  static std::vector<std::string> ReleaseDirs(const std::string& root, const std::string& release, bool all);
  // Module files below `dir`, by module name ('-' as '_').
  const std::map<std::string, std::vector<std::string>>& ModuleFiles(const std::string& dir);
  // Uncompressed module files below ROOT/lib/modules/*/, by build-ID (hex).
  const std::map<std::string, std::vector<std::string>>& BuildIdIndex(const std::string& root);
  bool FindModule(const std::string& root, const DebugFileRequest& req, LookupResult& r);
  bool FindVmlinuxElsewhere(const std::string& root, const DebugFileRequest& req, LookupResult& r);
  // `elsewhere`: a file met while searching beyond where release R puts things; another build's
  // file there is no build-ID mismatch of the target's.
  bool TryCandidate(const std::string& path, const DebugFileRequest& req, const std::string& origin, LookupResult& r,
                    bool elsewhere = false);
  void TryDebuginfod(const DebugFileRequest& req, LookupResult& r);

  DebugFinderOptions opts_;
  std::mutex mu_;
  std::map<std::string, std::map<std::string, std::vector<std::string>>> module_files_;    // by directory
  std::map<std::string, std::map<std::string, std::vector<std::string>>> build_id_index_;  // by root
};

}  // namespace symdex::debuginfo
