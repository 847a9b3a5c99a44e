// The release a vmlinux file names in its linux_banner (ingest/kernel_release.h), read through
// a read-only mapping: a debug vmlinux is hundreds of MB and only ~100 bytes of it are wanted.
#pragma once

#include <string>

#include "server/common/status.h"

namespace symdex::kernel {

// "" when the file is an ELF without a readable linux_banner; an error when it cannot be
// opened or is no ELF at all.
absl::StatusOr<std::string> VmlinuxRelease(const std::string& path);

}  // namespace symdex::kernel
