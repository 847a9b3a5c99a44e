// Reads the function names a kernel's BTF declares (BTF_KIND_FUNC): the names a BPF trampoline
// (fentry/fexit, fmod_ret, LSM) can be attached to by name. libbpf and bpftrace look the name
// up in vmlinux's BTF, then in the modules' (include/uapi/linux/btf.h: a header, a type section
// of variable-length records, a string section).
// A module's BTF is split BTF over vmlinux's: its type IDs and string offsets continue where
// vmlinux's end, so a name offset below vmlinux's string length is a string of vmlinux's; the
// caller passes vmlinux's strings (BtfInfo::strings of vmlinux's read) as `base_strings`.
// Pure: bytes in, names out; every read bounded by the section it comes from.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

struct BtfInfo {
  std::string strings;             // this BTF's own string section
  std::vector<std::string> funcs;  // the names of its FUNC records, in type order (repeats kept)
  uint32_t types = 0;              // how many type records it has
};

// `btf`: a .BTF section's bytes (or /sys/kernel/btf/NAME). `base_strings`: for split BTF (a
// module's), the base's string section; empty for vmlinux's own.
absl::StatusOr<BtfInfo> ReadBtf(std::string_view btf, std::string_view base_strings = {});

}  // namespace symdex::ingest
