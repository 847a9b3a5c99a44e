// Indexes the functions and variables of one debug file (a vmlinux, or a kernel module .ko,
// i.e. ET_REL) from its DWARF: with symdex's DIE scanner and line reader (die_scanner.h,
// line_table.h), libdw/libdwfl their fallback.
//
// For every concrete function instance (DW_TAG_subprogram with code): its name (through
// DW_AT_abstract_origin / DW_AT_specification), address ranges (hot part and .cold parts),
// entry pc, compilation unit, declaration file:line, entry line (the line-table row at the entry
// pc: what addr2line/kas_alias print for the symbol), and whether it is an out-of-line copy of a
// function declared inline. For every variable with a static address: name, address, CU,
// declaration file:line.
//
// Speed: a vmlinux is read by `jobs` threads, each with its own Elf/Dwarf handles over the same
// mmap()ed file, taking whole CUs (largest first) from a shared counter. Memory: each handle is
// recycled every 16 MiB of units, so what libdw caches and which file pages stay resident do not
// grow with the file (~110 MB peak for the Debian vmlinux); a module (ET_REL) is read by one
// thread (modules are indexed in parallel by the caller) from a copy symdex relocated
// (relocated_elf.h: libdwfl's layout and relocations), else through libdwfl.
//
// Addresses: a vmlinux's are link-time virtual addresses. A module's are section offsets, with
// the section named in `sections` (".text", ".text.unlikely", ".init.text", ...).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/status.h"
#include "server/debuginfo/dwarf/relocated_elf.h"

namespace symdex::debuginfo {

inline constexpr uint32_t kNoFile = UINT32_MAX;
inline constexpr uint16_t kNoSection = UINT16_MAX;

struct AddrRange {
  uint64_t lo = 0, hi = 0;  // [lo, hi)
  uint16_t section = kNoSection;
};

struct DwarfFunction {
  std::string name;
  uint64_t entry = 0;
  uint16_t entry_section = kNoSection;
  std::vector<AddrRange> ranges;
  uint32_t cu = 0;
  uint32_t decl_file = kNoFile;
  uint32_t decl_line = 0;
  uint32_t entry_file = kNoFile;
  uint32_t entry_line = 0;
  bool external = false;
  bool inline_copy = false;  // out-of-line instance of a function declared inline
};

struct DwarfVariable {
  std::string name;
  uint64_t addr = 0;
  uint16_t section = kNoSection;
  uint32_t cu = 0;
  uint32_t decl_file = kNoFile;
  uint32_t decl_line = 0;
  bool external = false;
};

struct DwarfUnit {
  std::string name;      // source-tree relative
  std::string raw_name;  // as DW_AT_name says
  std::string comp_dir;
  uint64_t die_offset = 0;
};

// The line-table row at the address of a text symbol of the file's own symbol table (what
// addr2line prints for the symbol, and what kas_alias used): also for symbols that are not a
// function's entry (.cold parts, labels inside assembly) or have no DW_TAG_subprogram at all.
struct DwarfSymbolLine {
  uint64_t addr = 0;
  uint16_t section = kNoSection;
  uint32_t cu = UINT32_MAX;  // UINT32_MAX: no unit covers the address
  uint32_t file = kNoFile;
  uint32_t line = 0;
};

struct DwarfIndex {
  std::optional<BuildId> build_id;
  bool relocatable = false;
  std::vector<std::string> sections;   // ET_REL: section names that addresses refer to
  std::vector<std::string> files;      // source-tree relative paths
  std::vector<std::string> raw_files;  // the same files as DWARF names them
  std::vector<DwarfUnit> units;
  std::vector<DwarfFunction> functions;
  std::vector<DwarfVariable> variables;
  std::vector<DwarfSymbolLine> symbol_lines;  // sorted by (section, addr), unique
  // Which reader read the DWARF (symdex status shows it): "symdex" (the DIE scanner and line
  // reader, every unit), "libdw (the scanner declined: WHY)"; for a relocatable module "symdex
  // (relocated by symdex)" (the same readers over relocated_elf.h's copy), else "libdwfl" (symdex
  // declined to relocate it, or the scanner a unit of it: DwarfIndexOptions::scan_misses says
  // why); each followed by ", zstd sections decompressed" (or zlib) where plain_elf.h did that first.
  std::string reader;
};

// How many entries of each table an index holds: where the rows of a part appended to it start
// (DwarfIndexOptions::on_part, worker_client.h IndexStream, store::DebugFileWriter).
struct DwarfIndexSizes {
  size_t sections = 0, files = 0, units = 0, functions = 0, variables = 0, symbol_lines = 0;
};
inline DwarfIndexSizes SizesOf(const DwarfIndex& idx) {
  return {idx.sections.size(),  idx.files.size(),     idx.units.size(),
          idx.functions.size(), idx.variables.size(), idx.symbol_lines.size()};
}

struct DwarfIndexOptions {
  unsigned jobs = 0;  // 0 = hardware concurrency (vmlinux-style files only)
  // Bytes of units each thread's libdw handle reads before it is begun again and the file's
  // pages are dropped (libdw_util.h BoundedDwarf; linked files only). 0: the default, 16 MiB.
  uint64_t handle_budget = 0;
  // Out: how many units' line tables ReadLineTable read (line_table.h; the rest: libdw). Tests.
  size_t* units_fast_lines = nullptr;
  // Out: how many units the DIE scanner read (die_scanner.h; the rest: libdw), and why the
  // first few it declined were declined. Tests and benchmarks.
  size_t* units_scanned = nullptr;
  std::vector<std::string>* scan_misses = nullptr;
  // When set, a linked file read by the DIE scanner is handed out in parts as its units are read,
  // in unit order (a part per ~1/8 of .debug_info; called from the parsing threads, one call at
  // a time): each part holds the files, units, functions and variables not handed out before,
  // its ids the whole index's. The index returned holds the rest, symbol lines included: parts
  // and result appended in order (worker_protocol.h AppendDwarfIndex) are the index this call
  // returns without on_part. Should the scanner decline a unit after a part went out, the call
  // fails (Aborted): index the file again without on_part. Other files: no parts.
  std::function<void(DwarfIndex&& part)> on_part;
  // When set, a module that symdex relocated and read (relocated_elf.h) hands its relocated copy
  // over here, for the address map to be built from it (addr_map.h BuildAddrMapFromCopy) without
  // relocating the file again; left empty for a file read otherwise.
  std::optional<RelocatedElf>* relocated_copy = nullptr;
};

absl::StatusOr<DwarfIndex> IndexDwarfFile(const std::string& path, const DwarfIndexOptions& opts = {});

}  // namespace symdex::debuginfo
