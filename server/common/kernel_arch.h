// What differs between the architectures the kernel runs on, as far as symdex is concerned, in
// two tables: per architecture (kArchs) which text the kprobe blacklist adds, how a call
// instruction is found before a return address and where a module records its ftrace sites;
// per entry layout (an architecture has one or more) how the compiler lays out a traceable
// function's entry and what ftrace makes of the address the build records for it. Everything
// else (kallsyms, DWARF, the verdict rules) is the same code for every architecture and layout.
//
// The architecture is always the files' (ELF e_machine of the vmlinux or module read), never
// the host's: one x86-64 daemon serves arm64 kernels. The layout is the file's too: which
// layout's records the image's ftrace table holds (ingest/probe_tables.h tells them apart by the
// function symbols the records point at or into). A new layout joins by adding a row to its
// architecture's layouts (kernel_arch.cc) with the facts its kernel sources give; a third
// architecture by adding a row to kArchs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace symdex {

// A region of text the kprobe blacklist covers, by the linker symbols that bound it.
struct BoundedText {
  std::string_view start, end;  // symbols: [start, end)
  std::string_view what;        // how a verdict names it: ".entry.text", ".idmap.text", ...
};

// One way a traceable function's entry is laid out. The build records one address per
// function (vmlinux: between __start_mcount_loc and __stop_mcount_loc; a module: its own
// section), and at boot or load ftrace turns it into the address it patches and lists
// (ftrace_call_adjust: rec->ip, what available_filter_functions_addrs prints).
//
//   x86-64, -mfentry:            sym: call __fentry__               record = site = sym
//   x86-64 with IBT:             sym: endbr64; call __fentry__      record = site = sym+4
//   arm64, -fpatchable-function-entry=2:
//                                sym: nop; nop (; bti c)            record = sym, site = sym+4
//   arm64, -fpatchable-function-entry=4,2 (CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS):
//                   sym-8: nop; nop (the ops pointer's 8 bytes, 8-aligned)
//                   sym:   nop; nop (; bti c)                       record = sym-8, site = sym+4
//                   (a compiler that puts `bti c` first: sym: bti c; nop; nop, site = sym+8)
struct EntryLayout {
  std::string_view name;    // how `symdex status` names it
  std::string_view config;  // the Kconfig option that selects it ("" = the architecture's default)
  // How the layout is recognised from the records themselves: a record is this layout's when a
  // function symbol starts `pre_words` NOP words after it (arm64 CALL_OPS: the words before the
  // symbol), or `pad_before_record` bytes before it with the architecture's landing pad there
  // (x86-64 IBT: ENDBR64).
  uint32_t pre_words = 0;
  uint64_t pad_before_record = 0;
  // ftrace_call_adjust: the site is the record + this, plus `landing_pad_bytes` when the
  // instruction at record + skip_landing_pad_at is a landing pad (arm64 BTI; the kernel reads
  // the instruction to decide). skip_landing_pad_at 0: nothing is skipped.
  uint64_t site_after_record = 0;
  uint64_t skip_landing_pad_at = 0;
  // ftrace lists a function when a site is at most this far past its symbol (x86-64's
  // FTRACE_MCOUNT_MAX_OFFSET: ENDBR64's 4 bytes with IBT, else 0; arm64 has no limit, and its
  // own site is 4 past the symbol, 8 after a BTI).
  uint64_t ftrace_entry_max_offset = 0;
  // What ftrace lists for a site further into a function than that (the body of an overridden
  // __weak function, which the linker keeps without a symbol): true, another line under the name
  // of the kallsyms symbol before it (arm64: no FTRACE_MCOUNT_MAX_OFFSET); false,
  // "__ftrace_invalid_address___N" (x86-64).
  bool ftrace_names_far_sites = false;
  // A landing pad at a function's entry that the kernel moves a kprobe at the entry past
  // (arch_adjust_kprobe_addr): x86-64's ENDBR64 with IBT, 4 bytes, known from an fentry site that
  // far in. 0: none (arm64 probes its BTI landing pad where asked).
  uint64_t kprobe_entry_pad = 0;
};

struct KernelArch {
  uint16_t machine = 0;     // ELF e_machine
  std::string_view name;    // as `uname -m` says it: "x86_64", "aarch64"
  std::string_view debian;  // as Debian's package names say it: "amd64", "arm64"

  // ftrace. Each traceable function's call site is recorded at build time: vmlinux between
  // __start_mcount_loc and __stop_mcount_loc, a module in a section of its own (this name).
  std::string_view module_ftrace_section;
  // The entry layouts of this architecture's kernels, tried in order: a file's is the first that
  // any of its records shows, else the last. A row's shape is one no kernel of a later row can
  // have (a record 8 bytes before a function symbol; a call after an ENDBR64), and an IBT kernel
  // keeps some calls at the symbol too: one record decides, as a module of an IBT kernel may
  // have a single function with ENDBR64.
  std::span<const EntryLayout> layouts;

  // Patchable function entry (arm64): a traceable function's symbol is this many NOP words
  // before the code its DWARF subprogram and line table describe (the kernel patches them to
  // call ftrace); every layout of the architecture has them. 0: none.
  uint32_t entry_pad_words = 0;
  uint32_t nop_word = 0;  // the NOP, little-endian as in the file
  // The landing pad instruction's first word (arm64 BTI: `hint #32|#34|#36|#38`, as the
  // kernel's aarch64_insn_is_bti tests it; x86-64 ENDBR64, f3 0f 1e fa): (word &
  // landing_pad_mask) == landing_pad_word, little-endian as in the file. 0: none.
  uint32_t landing_pad_mask = 0, landing_pad_word = 0;

  // Text the architecture adds to the kprobe blacklist (arch_populate_kprobe_blacklist), beyond
  // the generic .kprobes.text and .noinstr.text.
  std::span<const BoundedText> blacklist_areas;

  // Calls of a fixed size: the call is this many bytes before its return address (arm64: 4,
  // BL/BLR). 0: variable-length code (x86-64), decoded backwards from the return address.
  uint32_t call_size = 0;
  // Instructions start at multiples of this (arm64: 4); 1: variable-length code (x86-64), whose
  // boundaries the kernel's kprobes check by decoding the function when the probe is written.
  uint32_t insn_align = 1;

  // The register kprobe_events names (without '%') for each DWARF register number; a number
  // past the end, or a name that is empty, is one a fetch arg cannot read.
  std::span<const std::string_view> dwarf_registers;
  uint32_t stack_pointer = 0;  // its DWARF number
  // Registers kprobe_events also reads that have no DWARF number here (x86-64's ip, flags).
  std::span<const std::string_view> other_registers;
  // The registers of the first arguments and of the return value (kprobe_events' $argN, $retval).
  std::span<const std::string_view> argument_registers;
  std::string_view return_register;

  // The registers as the tracers that read them in a program of their own name them. arm64's
  // general registers are numbered (kprobe_events x0..x30): bpftrace reads them as r0..r30, a BPF
  // C program as struct user_pt_regs' regs[N]; x86-64's names (ax, di, r12, ...) are the same in
  // all three (struct pt_regs' fields).
  std::string_view numbered_register_prefix;  // kprobe_events' prefix of a numbered register; "" = none
  std::string_view bpftrace_numbered_prefix;  // bpftrace's for the same
  std::string_view c_registers;               // what a BPF C program puts before a register's field
  std::string_view c_numbered_array;          // the array a numbered register is in ("regs")

  uint64_t EntryPad() const { return uint64_t{entry_pad_words} * 4; }
  // Whether kprobe_events reads register `name` (without '%') on this architecture.
  bool HasRegister(std::string_view name) const;
  // Register `name` (one HasRegister takes) as bpftrace's reg() names it, and as a BPF C program
  // reads it from its `ctx` (`ctx->di`, `((const struct user_pt_regs *)ctx)->regs[19]`).
  std::string BpftraceRegister(std::string_view name) const;
  std::string CRegister(std::string_view name) const;
  // The layout named `name`; nullptr when the architecture has none of that name.
  const EntryLayout* Layout(std::string_view name) const;
};

// The row for `machine` (ELF e_machine); nullptr for an architecture symdex does not know.
const KernelArch* ArchOfMachine(uint16_t machine);
// Every known architecture, in the table's order.
std::span<const KernelArch> KnownArchs();

}  // namespace symdex
