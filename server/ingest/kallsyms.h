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
#include <utility>
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

// System.map is what the kernel's symbol table is made from (scripts/link-vmlinux.sh runs
// scripts/kallsyms over it), but the kernel does not keep all of it: scripts/kallsyms drops
// absolute symbols, the arm64 hypervisor's local labels (__kvm_nvhe_.L…, __kvm_nvhe_$x), the EFI
// stub's aliases (__efistub_…), linker thunks and veneers (6.1 is_ignored_symbol). Those names
// are what a live kernel never shows and never accepts in a probe; some are not even printable
// (__kvm_nvhe_.L14472\x01). ParseSystemMap drops them the same way, counted by reason, before it
// judges a name: a name kallsyms keeps is held to the same rules as ParseKallsyms's.
// (Without CONFIG_KALLSYMS_ALL the kernel keeps only text symbols too; the data symbols a
// System.map lists stay here, where they name no probe and answer addresses.)
struct SystemMapSymbols {
  std::vector<KernelSymbol> symbols;
  // How many lines each rule dropped (rule -> count), rules as KallsymsIgnoreRule names them.
  std::vector<std::pair<std::string, size_t>> dropped;
  size_t DroppedTotal() const;
};
absl::StatusOr<SystemMapSymbols> ParseSystemMap(std::string_view text, std::string_view source);

// The rule of scripts/kallsyms that keeps `name` (of nm type `type`) out of the kernel's symbol
// table, in words ("absolute symbols", "arm64 hypervisor local labels", ...); nullptr when the
// kernel keeps it.
const char* KallsymsIgnoreRule(std::string_view name, char type);

// scripts/mksysmap's rule: System.map is `nm -n vmlinux` without these (mapping symbols $x/$d,
// local labels .L…, __crc_/__kstrtab_/__kstrtabns_ entries, L0, and symbols of nm type a N U w):
// the rule's name, or nullptr when System.map lists the symbol. With KallsymsIgnoreRule, what
// a kernel's own symbol table keeps of a vmlinux symbol table.
const char* MksysmapIgnoreRule(std::string_view name, char type);

// ARM mapping symbols ($a, $d, $t, $x, optionally with a ".suffix") and local labels (.L…),
// which a module's symbol table carries and the kernel never names an address by (6.1
// kernel/module/kallsyms.c is_arm_mapping_symbol): not functions, and never unique.
bool IsMappingSymbol(std::string_view name);

// True when the table is non-empty and every address is zero: what an unprivileged reader sees
// under kernel.kptr_restrict.
bool AllAddressesZero(const std::vector<KernelSymbol>& symbols);

// Pseudo-modules that kallsyms tags but that are not loadable modules: "bpf",
// "__builtin__ftrace", "__builtin__kprobes".
bool IsPseudoModule(std::string_view module);

}  // namespace symdex::ingest
