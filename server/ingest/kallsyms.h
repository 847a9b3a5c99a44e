// Parser for /proc/kallsyms and System.map text.
//
// The kernel writes /proc/kallsyms as (kernel/kallsyms.c s_show)
//   vmlinux:  "%px %c %s\n"          ADDR TYPE NAME
//   modules:  "%px %c %s\t[%s]\n"    ADDR TYPE NAME<TAB>[MODULE]
//   ADDR    hex, 1..16 digits, no 0x prefix
//   TYPE    one letter as nm prints it (t/T text, d/D data, b/B bss, r/R rodata, w/W weak, a/A abs…);
//           upper case = global
//   NAME    bytes, kept exactly: a module's name is every byte up to the tab before its tag —
//           control bytes and blanks too (GNU as names the Nth use of a numeric local label
//           ".L14472\x02N", and a module's /proc/kallsyms lists it: ".L14472\x021") — a vmlinux name every byte
//           to the end of the line (scripts/kallsyms keeps no blank in one). A NUL byte is an error.
//   MODULE  only in kallsyms: "[ext4]", "[bpf]", "[__builtin__ftrace]": no blanks or control bytes
// System.map and nm output are the vmlinux form. Also tolerated: fields separated by any run of
// spaces/tabs (then the tag is the last field, after a blank, and the name what is between), blank
// lines, blanks at the end of a line and a trailing '\r'. Anything else — a bad address, no type
// or a type that is not one letter, no name, text after the name that is not a closed [module]
// tag — is an error naming the source and the 1-based line number:
//   SOURCE:LINE: reason: 'excerpt'   (the excerpt with unprintable bytes as '?')
//
// Pure: bytes in, records out. Which names the index keeps (a module's local labels and mapping
// symbols: ModuleSymbolIgnoreRule) and what an all-zero address table means are the caller's
// policy (see kernel/live_host.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/common/kernel_records.h"
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
// (__kvm_nvhe_.L14472\x01). ParseSystemMap drops them the same way, counted by rule; the names
// kallsyms keeps are read as ParseKallsyms reads them.
// (Without CONFIG_KALLSYMS_ALL the kernel keeps only text symbols too; the data symbols a
// System.map lists stay here, where they name no probe and answer addresses.)
struct SystemMapSymbols {
  std::vector<KernelSymbol> symbols;
  // How many lines each rule dropped, rules as KallsymsIgnoreRule names them.
  std::vector<DroppedSymbols> dropped;
  size_t DroppedTotal() const;
};
absl::StatusOr<SystemMapSymbols> ParseSystemMap(std::string_view text, std::string_view source);

// The rule of scripts/kallsyms that keeps `name` (of nm type `type`) out of the kernel's symbol
// table, in words ("absolute symbols", "arm64 hypervisor local labels", ...); nullptr when the
// kernel keeps it.
const char* KallsymsIgnoreRule(std::string_view name, char type);

// The rules below, by the names status shows for what they drop.
inline constexpr char kMappingSymbolsRule[] = "mapping symbols ($x, $d)";
inline constexpr char kLocalLabelsRule[] = "local labels (.L, L0)";

// scripts/mksysmap's rule: System.map is `nm -n vmlinux` without these (mapping symbols $x/$d,
// local labels .L… and L0, __crc_/__kstrtab_/__kstrtabns_ entries, and symbols of nm type a N U
// w): the rule's name, or nullptr when System.map lists the symbol. With KallsymsIgnoreRule, what
// a kernel's own symbol table keeps of a vmlinux symbol table.
const char* MksysmapIgnoreRule(std::string_view name, char type);

// The symbols of a module that the kernel never names an address by (6.12
// include/linux/module_symbol.h is_mapping_symbol, used by kernel/module/kallsyms.c): local labels
// (".L…", "L0…": ".L14472\x021" among them) and mapping symbols ("$x", "$d", any "$…"). A
// module's /proc/kallsyms lists them; they are not functions and never unique. The rule's name
// (kLocalLabelsRule, kMappingSymbolsRule), or nullptr for a symbol the kernel names addresses by.
const char* ModuleSymbolIgnoreRule(std::string_view name);
bool IsMappingSymbol(std::string_view name);  // ModuleSymbolIgnoreRule(name) != nullptr

// True when the table is non-empty and every address is zero: what an unprivileged reader sees
// under kernel.kptr_restrict.
bool AllAddressesZero(const std::vector<KernelSymbol>& symbols);

// Pseudo-modules that kallsyms tags but that are not loadable modules: "bpf",
// "__builtin__ftrace", "__builtin__kprobes".
bool IsPseudoModule(std::string_view module);

}  // namespace symdex::ingest
