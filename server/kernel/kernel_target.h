// In-memory picture of one kernel target, as built by a loader (live host or offline kernel)
// and written to the store in one transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/compact_optional.h"
#include "server/common/index_inputs.h"
#include "server/common/kernel_records.h"
#include "server/common/shared_text.h"
#include "server/kernel/file_status.h"

namespace symdex::kernel {

class SymbolSpill;

struct ModuleInfo {
  std::string name;
  std::optional<BuildId> build_id;
  std::optional<uint64_t> text_addr;  // live: /sys/module/M/sections/.text
  std::optional<uint64_t> size;       // live: /proc/modules
  std::string path;                   // offline: the .ko file
  // live: /sys/module/M/sections/* (name, base address), for the DWARF join
  std::vector<std::pair<std::string, uint64_t>> sections;
};

// One symbol of the target. A kernel has hundreds of thousands: fields ordered so that none pads,
// the recurring strings shared (common/shared_text.h). (An index run holds vmlinux's and the few
// modules' it is working on; the others wait in kernel/symbol_spill.h.)
struct SymbolEntry {
  std::string name;
  uint64_t addr = 0;  // absolute, or the offset into `section` when section is non-empty
  std::optional<uint64_t> size;
  // The DWARF join (debuginfo/dwarf/symbol_join.h): the function instance, or why there is none.
  // (Row ids and line numbers: never the smallest int64, which says "none" in 8 bytes.)
  using Id = CompactOptional<int64_t, INT64_MIN>;
  Id debug_file_id;
  Id dwarf_function_id;
  Id src_unit, src_file, src_line;  // line-table row at the symbol address
  SharedText section;               // offline module symbols only
  SharedText dwarf_note;
  int module = -1;     // index into KernelTarget::modules; -1 = vmlinux
  uint32_t probe = 0;  // kernel::ProbeBits (probe_bits.h), set by the indexer's probe step
  char type = '?';
  bool size_exact = false;
  // common/elf_facts.h bits from an ELF symbol table (the module's own .ko, or the debug file
  // of vmlinux/a module): absent when none covered this symbol.
  std::optional<uint8_t> elf_facts;
};
static_assert(sizeof(SymbolEntry) <= 128, "vmlinux's symbols are all held at once: keep each small");

// Which debug file a part of the target (vmlinux or a module) uses, or why none.
struct DebugInfoRecord {
  std::string module;  // "" = vmlinux
  std::string build_id;
  std::optional<int64_t> debug_file_id;
  DebugFileStatus status = DebugFileStatus::kNotFound;
  std::string path;
  std::string origin;  // local | debuginfod
  std::string detail;
};

// One input file and what happened to it.
struct SourceFile {
  std::string role;  // kallsyms, modules, notes, module-notes, module-sections, system-map, module
  std::string path;
  InputFileStatus status = InputFileStatus::kUsed;
  std::string detail;
  // Symbols it lists that the target leaves out, as the kernel does, by rule (ingest/kallsyms.h).
  std::vector<DroppedSymbols> dropped;
};

struct KernelTarget {
  std::string name;
  std::string kind;  // live | offline
  std::string release;
  std::optional<BuildId> build_id;
  std::optional<uint64_t> text_addr;  // the kernel's _text: KASLR slides are taken from it
  // The symbol a KASLR-proof probe is written against (ANCHOR+N) and its address: _text where
  // the kernel's kallsyms lists it, else _stext (ChooseTextAnchor).
  std::string text_anchor = "_text";
  std::optional<uint64_t> anchor_addr;
  // ELF e_machine of the kernel's files (its vmlinux or modules; 0: none read): which row of
  // common/kernel_arch.h applies.
  uint16_t machine = 0;
  std::string source;
  std::vector<ModuleInfo> modules;
  // Every symbol as loaded; once an index run has spilled the modules' (SpillModuleSymbols),
  // vmlinux's only, and `spill` holds the others (ForEachSymbol gives them all back in order).
  std::vector<SymbolEntry> symbols;
  std::shared_ptr<SymbolSpill> spill;
  std::vector<SourceFile> files;
  std::vector<DebugInfoRecord> debuginfo;
  std::vector<std::string> warnings;
  // The kernel's CONFIG_KPROBE_EVENTS_ON_NOTRACE (unknown without a kernel config), and the
  // config file it was read from.
  std::optional<bool> kprobe_events_on_notrace;
  std::string kernel_config;
  // The kernel's CONFIG_FPROBE (unknown without a kernel config): BPF kprobe_multi links exist; and
  // CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS: BPF trampolines attach to functions ftrace patches.
  std::optional<bool> fprobe;
  std::optional<bool> ftrace_direct;
};

// The anchor of KASLR-proof probes among a kernel's symbols: _text when kallsyms lists it — on a
// live kernel, when it is there (`live`); from a System.map or a vmlinux, when it is _stext's
// address too, as on x86-64 (arm64's _text is the image header before _stext, which kallsyms
// without CONFIG_KALLSYMS_ALL leaves out, as it does everything outside the text) — else _stext,
// which kallsyms always keeps. Sets t.text_anchor and t.anchor_addr (and t.text_addr from _text).
// `symbol_of(name)` gives a vmlinux symbol's address.
void ChooseTextAnchor(KernelTarget& t, const std::function<std::optional<uint64_t>(std::string_view)>& symbol_of,
                      bool live);

// Sets each symbol's `size` (not exact) to the kernel's extent: the distance to the next higher
// address of the same vmlinux/module (and section, for a module file's section-relative symbols).
// The last of each run keeps what it had (a module file's .symtab size; none for absolute
// addresses). Also drops exact duplicates (same owner, name, type, address).
void DeriveSizesAndDedupe(KernelTarget& target);
// The same over `syms` alone (a module's symbols, or vmlinux's: owners never mix in the rule).
void DeriveSizesAndDedupe(std::vector<SymbolEntry>& syms);

}  // namespace symdex::kernel
