// What differs between the architectures the kernel runs on, as far as symdex is concerned, in
// one table: how ftrace records its call sites, where a traceable function's code starts
// relative to its symbol, which text the kprobe blacklist adds, how a call instruction is
// found before a return address, and which symbol anchors a KASLR-proof probe. Everything else
// (kallsyms, DWARF, the verdict rules) is the same code for every architecture.
//
// The architecture is always the files' (ELF e_machine of the vmlinux or module read), never
// the host's: one x86-64 daemon serves arm64 kernels. A third architecture joins by adding a
// row to kArchs (kernel_arch.cc) with the facts its kernel sources give.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace symdex {

// A region of text the kprobe blacklist covers, by the linker symbols that bound it.
struct BoundedText {
  std::string_view start, end;  // symbols: [start, end)
  std::string_view what;        // how a verdict names it: ".entry.text", ".idmap.text", ...
};

struct KernelArch {
  uint16_t machine = 0;     // ELF e_machine
  std::string_view name;    // as `uname -m` says it: "x86_64", "aarch64"
  std::string_view debian;  // as Debian's package names say it: "amd64", "arm64"

  // ftrace. Each traceable function's call site is recorded at build time: vmlinux between
  // __start_mcount_loc and __stop_mcount_loc, a module in a section of its own (this name).
  std::string_view module_ftrace_section;
  // The recorded site, relative to the function's symbol, that ftrace still takes for the
  // function's own (x86-64: the call, at 0 or 4 after endbr64 with IBT; arm64: the recorded
  // address is the symbol itself, the first of its NOPs).
  uint64_t ftrace_entry_max_offset = 0;
  // What ftrace lists for a recorded site further into a function than that (the body of an
  // overridden __weak function, which the linker keeps without a symbol): true, another line
  // under the name of the kallsyms symbol before it (arm64 6.1, no FTRACE_MCOUNT_MAX_OFFSET);
  // false, "__ftrace_invalid_address___N" (x86-64).
  bool ftrace_names_far_sites = false;
  // A landing pad at a function's entry that the kernel moves a kprobe at the entry past
  // (arch_adjust_kprobe_addr): x86-64's ENDBR64 with IBT, 4 bytes, known from an fentry site that
  // far in. 0: none (arm64 probes its BTI landing pad where asked).
  uint64_t kprobe_entry_pad = 0;

  // Patchable function entry (arm64: -fpatchable-function-entry=2): a traceable function's
  // symbol is this many NOP words before the code its DWARF subprogram and line table
  // describe (the kernel patches them to call ftrace). 0: none.
  uint32_t entry_pad_words = 0;
  uint32_t nop_word = 0;  // the NOP, little-endian as in the file

  // Text the architecture adds to the kprobe blacklist (arch_populate_kprobe_blacklist), beyond
  // the generic .kprobes.text and .noinstr.text.
  std::span<const BoundedText> blacklist_areas;

  // Calls of a fixed size: the call is this many bytes before its return address (arm64: 4,
  // BL/BLR). 0: variable-length code (x86-64), decoded backwards from the return address.
  uint32_t call_size = 0;

  uint64_t EntryPad() const { return uint64_t{entry_pad_words} * 4; }
};

// The row for `machine` (ELF e_machine); nullptr for an architecture symdex does not know.
const KernelArch* ArchOfMachine(uint16_t machine);
// Every known architecture, in the table's order.
std::span<const KernelArch> KnownArchs();

}  // namespace symdex
