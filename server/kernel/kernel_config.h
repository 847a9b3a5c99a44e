// Where a target's kernel config is, and what it says about probes: only
// CONFIG_KPROBE_EVENTS_ON_NOTRACE so far (y: kprobe events may probe functions without an fentry
// site; Debian, Fedora and Ubuntu build with n).
#pragma once

#include <string>
#include <vector>

#include "server/common/status.h"
#include "server/kernel/kernel_target.h"

namespace symdex::kernel {

// The usual places of the config of `t`'s kernel: a live host's (sysroot-relative)
// /proc/config.gz, /boot/config-R, /lib/modules/R/config; for an offline kernel, config-R or
// config beside its System.map.
std::vector<std::string> KernelConfigCandidates(const KernelTarget& t, const std::string& sysroot,
                                                const std::string& system_map);

// Reads the config into t.kprobe_events_on_notrace / t.kernel_config: from `explicit_path`
// (an error when unreadable or not a config), else from the first candidate that exists.
// None found: left unknown, with a warning on the target.
absl::Status AttachKernelConfig(KernelTarget& t, const std::string& explicit_path,
                                const std::vector<std::string>& candidates);

}  // namespace symdex::kernel
