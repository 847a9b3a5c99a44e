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
#include "server/debuginfo/files/debug_finder.h"
#include "server/kernel/kernel_target.h"

namespace symdex::indexer {

absl::StatusOr<kernel::KernelTarget> LoadBuildIdTarget(const BuildIdTargetOptions& opts,
                                                       const DebugFinderOptions& finder);

}  // namespace symdex::indexer
