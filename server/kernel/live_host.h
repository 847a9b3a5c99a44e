// Builds a KernelTarget from a running kernel's procfs/sysfs: /proc/kallsyms, /proc/modules,
// /sys/kernel/notes, /sys/module/M/{sections/.text,notes/.note.gnu.build-id},
// /proc/sys/kernel/osrelease. `sysroot` re-roots every path, so tests use fixture trees.
//
// This is the I/O-policy layer over the pure parsers in ingest/: it decides what is fatal
// (no kallsyms, all-zero addresses, a malformed line) and what is recorded and tolerated
// (a module whose sysfs entries are unreadable).
#pragma once

#include <string>

#include "server/common/status.h"
#include "server/kernel/kernel_target.h"

namespace symdex::kernel {

absl::StatusOr<KernelTarget> LoadLiveHost(const LiveHostOptions& opts);

}  // namespace symdex::kernel
