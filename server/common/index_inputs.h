// What one index run reads, as a caller names it: a live host, an offline kernel's files, or a
// kernel known by build-ID, and where debug files are looked for. Plain values (std only): the
// CLI's `symdex index`, the daemon and the fleet fill them in; kernel/, debuginfo/ and indexer/
// read them, each as symdex::X.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace symdex {

// Reports progress of long steps: ("modules", 300, 1121).
using ProgressFn = std::function<void(std::string_view stage, size_t done, size_t total)>;

struct LiveHostOptions {
  std::string sysroot;        // "" or "/" = this host
  std::string name = "host";  // target name in the store
};

struct OfflineKernelOptions {
  std::string system_map;   // required
  std::string modules_dir;  // optional
  std::string name;         // default: the release
  // Default: what the files say of themselves: vmlinux's linux_banner (when `vmlinux` is
  // given), else the release most modules' .modinfo vermagic= names; only then a guess from
  // the paths ("System.map-<release>", lib/modules/<release>). Given, it overrides them all.
  std::string release;
  std::string vmlinux;  // optional vmlinux ELF (the --vmlinux debug file): its linux_banner
  unsigned jobs = 0;    // 0 = hardware concurrency
  ProgressFn progress;
};

// Where the debug files of a kernel and its modules are looked for (debuginfo/files/debug_finder.h).
struct DebugFinderOptions {
  std::vector<std::string> debug_dirs;
  std::string sysroot;
  std::string vmlinux;               // explicit vmlinux debug file
  bool use_debuginfod = true;        // when DEBUGINFOD_URLS is set
  bool debuginfod_progress = false;  // progress on stderr (a TTY)
};

struct ModuleByBuildId {
  std::string name;      // as the kernel names it (hyphens are underscores)
  std::string build_id;  // hex
};

struct BuildIdTargetOptions {
  std::string build_id;  // hex, 2..64 digits (GNU build-IDs are 20 bytes)
  std::string name;      // default: the build-ID
  // Modules to include. One whose debug file is missing or wrong is recorded in the target's
  // files (status error, with the reason) and a warning; the kernel is indexed without it.
  std::vector<ModuleByBuildId> modules;
};

}  // namespace symdex
