// Parser for /proc/kallsyms and System.map text.
//
// Line format (both files):   ADDR TYPE NAME[\t[MODULE]]
//   ADDR    hex, 1..16 digits, no 0x prefix
//   TYPE    one letter as nm prints it (t/T text, d/D data, b/B bss, r/R rodata, w/W weak, a/A abs…);
//           upper case = global
//   NAME    no white space
//   MODULE  only in kallsyms: "[ext4]", "[bpf]", "[__builtin__ftrace]"
// Fields may be separated by any run of spaces/tabs; blank lines and a trailing '\r' are
// tolerated. Anything else is an error naming the source and the 1-based line number.
//
// Pure: bytes in, records out. Deciding what an all-zero address table means is the caller's
// policy (see target/live_host.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

struct KernelSymbol {
  uint64_t addr = 0;
  char type = '?';
  std::string name;
  std::string module;  // empty = vmlinux

  bool operator==(const KernelSymbol&) const = default;
};

// `source` names the input in error messages ("/proc/kallsyms", "System.map-6.1.0-28").
absl::StatusOr<std::vector<KernelSymbol>> ParseKallsyms(std::string_view text, std::string_view source);

// True when the table is non-empty and every address is zero: what an unprivileged reader sees
// under kernel.kptr_restrict.
bool AllAddressesZero(const std::vector<KernelSymbol>& symbols);

// Pseudo-modules that kallsyms tags but that are not loadable modules: "bpf",
// "__builtin__ftrace", "__builtin__kprobes".
bool IsPseudoModule(std::string_view module);

}  // namespace symdex::ingest
