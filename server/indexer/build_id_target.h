// A kernel known only by its vmlinux build-ID (the fleet holds build-IDs, not
// files): its debug vmlinux is found by build-ID — a local debug root (.build-id/ab/cdef.debug,
// ...) or debuginfod — and becomes the target's input: the symbol table kallsyms would list is the
// file's .symtab (sizes exact), _text and the release (linux_banner) come from the same file.
// Modules are added by their own build-IDs (a fleet host reports each loaded module's name and
// build-ID): each debug .ko found the same way, its symbols section-relative as an offline
// module's (a module has no address until a host loads it; the caller supplies the bases).
#pragma once

#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/debuginfo/debug_finder.h"
#include "server/target/kernel_target.h"

namespace symdex::indexer {

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

absl::StatusOr<target::KernelTarget> LoadBuildIdTarget(const BuildIdTargetOptions& opts,
                                                       const debuginfo::DebugFinderOptions& finder);

}  // namespace symdex::indexer
