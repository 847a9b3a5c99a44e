// Which symbol, if any, an address is in: the one rule both address lookups apply (the
// per-address SQL query, store::SymbolContaining, and the batch table, store::TextSymbolTable),
// so that they never disagree. "No answer is better than a wrong one": an address past the end
// of the code (after _etext), between modules or past a module's end is not found, rather than
// named as the last symbol below it plus a huge offset.
//
// The rule:
//  - the candidate is the text symbol at the greatest address <= addr; among aliases there,
//    the best by AliasRank: a sized function over a label, as llvm-symbolizer ranks them;
//  - a label that ends a region (_etext, _einittext, __*_text_end, __end_*, ...) holds nothing;
//  - a symbol extends up to its size: the ELF size, or the distance to the next symbol of any
//    type of the same owner (kernel::DeriveSizesAndDedupe), and for a module symbol no further
//    than the module's end; the last symbol of an owner, whose
//    size is unknown, extends to its owner's end: _end for vmlinux, base + size from
//    /proc/modules for a loaded module; when that end is unknown too, nothing is claimed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "server/common/status.h"

namespace symdex::store {

class Db;

// Labels the linker script or assembly put where a code region starts (_stext, _sinittext,
// __sched_text_start, ...) or ends (_etext, _einittext, __irqentry_text_end, __end_*, ...). Only
// names of these reserved forms: `__stop_tty` or `entry_SYSRETQ_end` are ordinary symbols.
bool IsRegionStartLabel(std::string_view name);
bool IsRegionEndLabel(std::string_view name);

// What ranks one of several symbols that share an address.
struct AliasFacts {
  std::string_view name;
  char type = '?';                   // kallsyms/nm letter: its case (and W/V) is the binding
  std::optional<uint8_t> elf_facts;  // common/elf_facts.h bits; absent: no ELF symbol table said
  bool has_dwarf_function = false;
};

// How good a name is for an address several symbols share: greater is better. A real name
// beats __pfx_/__cfi_ padding. Then what the ELF symbol table says, as llvm-symbolizer ranks:
// a symbol with a size beats one without (the label _sinittext at early_idt_handler_array),
// a function (STT_FUNC) beats an assembly label (STT_NOTYPE), and a global name beats a weak
// one beats a local one (__x64_sys_ni_syscall over the static __do_sys_ni_syscall it was
// made from; __memmove over the weak memmove). Without ELF facts (kallsyms, System.map
// without a debug file), only the name rule is left: a function beats a region label
// (_stext, __irqentry_text_end, ...). Then one joined to a DWARF function beats one that is
// not, and the shorter name wins.
std::tuple<bool, int, int, int, bool, bool, int64_t> AliasRank(const AliasFacts& a);
// a is a better name than b: AliasRank, then (for a deterministic answer whatever order the
// rows come in) the name that sorts first.
bool PreferAlias(const AliasFacts& a, const AliasFacts& b);

// Where vmlinux and each loaded module lie in the address space: the owners of addresses.
struct OwnerExtents {
  std::optional<uint64_t> vmlinux_start, vmlinux_end;  // _text, _end (absent in some kallsyms)
  struct Module {
    std::string name;
    uint64_t start = 0, end = 0;  // [.text base, base + /proc/modules size)
  };
  std::vector<Module> modules;    // only those whose base and size are known
  bool modules_unplaced = false;  // the target has modules without addresses (offline)

  // The end of `module`'s ("" = vmlinux) address range, when known.
  std::optional<uint64_t> EndOf(std::string_view module) const;
  // Why no function holds `addr`, starting with its owner: "not in vmlinux or any module",
  // "in vmlinux but in no function", "in module uio but in no function", ...
  std::string Describe(uint64_t addr) const;
};
absl::StatusOr<OwnerExtents> LoadOwnerExtents(Db& db, int64_t target_id);

// The symbol found at the greatest text address <= addr (the best alias there).
struct Candidate {
  std::string_view name;
  std::string_view module;  // "" = vmlinux
  uint64_t addr = 0;
  std::optional<uint64_t> size;
};

// Applies the rule: nullopt when `c` holds `addr`, else why no function does (c == nullptr: no
// text symbol below addr). `extents` is called only for a module symbol, when the candidate's
// own size does not decide (the last symbol of its owner), or to explain a miss: a vmlinux hit
// costs nothing more.
using ExtentsFn = std::function<absl::StatusOr<const OwnerExtents*>()>;
absl::StatusOr<std::optional<std::string>> WhyNotContained(const Candidate* c, uint64_t addr, const ExtentsFn& extents);

}  // namespace symdex::store
