// The records every layer names alike: a kernel target as the index holds it, its counts, the
// DWARF function a symbol was joined to, one source frame of an address. Plain values (std only):
// the store writes and reads them, the debug-info readers make frames, the query API hands them
// out and the wire carries them — one type each, below all of those, named by every layer as
// symdex::X (no layer re-exports one under its own namespace).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace symdex {

// Symbols an input lists that the index leaves out, because the kernel's own symbol table leaves
// them out or never names an address by them: how many, by the rule that drops them ("local labels
// (.L, L0)" -> 3). Each input file of a target carries its counts; `symdex status` shows them.
struct DroppedSymbols {
  std::string rule;
  uint64_t count = 0;
  bool operator==(const DroppedSymbols&) const = default;
};

// Adds `n` to `rule`'s count (a rule not counted yet goes last: the order rules were first met).
inline void CountDropped(std::vector<DroppedSymbols>& counts, std::string_view rule, uint64_t n = 1) {
  for (DroppedSymbols& d : counts) {
    if (d.rule == rule) {
      d.count += n;
      return;
    }
  }
  counts.push_back({std::string(rule), n});
}

inline uint64_t DroppedTotal(const std::vector<DroppedSymbols>& counts) {
  uint64_t n = 0;
  for (const DroppedSymbols& d : counts) n += d.count;
  return n;
}

struct TargetInfo {
  int64_t id = 0;
  std::string name, kind, release, build_id, source, warnings;
  std::optional<uint64_t> text_addr;  // the kernel's _text (KASLR slides)
  // KASLR-proof probes are ANCHOR+N (kernel/kernel_target.h KernelTarget::text_anchor); anchor_addr is unset in
  // rows written before it was stored, whose anchor is _text.
  std::string text_anchor = "_text";
  std::optional<uint64_t> anchor_addr;
  std::optional<uint64_t> AnchorAddr() const { return anchor_addr ? anchor_addr : text_addr; }
  uint16_t machine = 0;  // ELF e_machine (kernel/kernel_target.h KernelTarget::machine)
  int64_t indexed_at = 0;
  int64_t generation = 0;
  int64_t symbols_stamp = 0;  // changes with every change of its symbol rows (schema/013); 0: unknown
  std::optional<bool> kprobe_events_on_notrace;  // the kernel's config; unknown without one
  std::string kernel_config;                     // where that was read
  std::optional<bool> fprobe;                    // CONFIG_FPROBE: kprobe_multi links; unknown without a config
  std::optional<bool> ftrace_direct;             // CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS: fentry on ftrace sites
};

struct TargetCounts {
  int64_t modules = 0;
  int64_t vmlinux_symbols = 0;
  int64_t module_symbols = 0;
  int64_t text_symbols = 0;
};

// The DWARF function instance a symbol was joined to.
struct DwarfInfo {
  bool has_function = false;  // joined to a DW_TAG_subprogram instance
  std::string function;       // its DWARF name (no .isra/.cold suffix)
  std::string cu;             // compilation unit, source-tree relative
  std::string decl_file;      // the function's declaration
  int64_t decl_line = 0;
  std::string entry_file;  // line-table row at the symbol's address (what addr2line says)
  int64_t entry_line = 0;
  bool inline_copy = false;
};

// One source frame of an address: what the symbolizer (libdw), the address maps and the query
// API's AddressInfo carry, leaf first in a chain.
struct Frame {
  std::string function;  // DWARF name of the (inlined) function
  std::string file;      // source-tree relative
  int line = 0;
  int column = 0;
  bool operator==(const Frame&) const = default;
};

}  // namespace symdex
