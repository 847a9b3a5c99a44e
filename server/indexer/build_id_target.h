// A kernel known only by its vmlinux build-ID (issue 13: the fleet holds build-IDs, not
// files): its debug vmlinux is found by build-ID — a local debug root (.build-id/ab/cdef.debug,
// ...) or debuginfod — and becomes the target's input: the symbol table kallsyms would list is the
// file's .symtab (sizes exact), _text and the release (linux_banner) come from the same file.
// Modules are not part of it yet (they are known per host: name, build-ID, load address).
#pragma once

#include <string>

#include "server/common/status.h"
#include "server/debuginfo/debug_finder.h"
#include "server/target/kernel_target.h"

namespace symdex::indexer {

struct BuildIdTargetOptions {
  std::string build_id;  // hex, 2..64 digits (GNU build-IDs are 20 bytes)
  std::string name;      // default: the build-ID
};

absl::StatusOr<target::KernelTarget> LoadBuildIdTarget(const BuildIdTargetOptions& opts,
                                                       const debuginfo::DebugFinderOptions& finder);

}  // namespace symdex::indexer
