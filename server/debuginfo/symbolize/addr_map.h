// Address maps: what a linked debug file (vmlinux) says about every address — the line-table
// row, the function and its inline nesting — precomputed once per build-ID into one flat file
// that is mmap'ed and binary-searched. `symdex addr` over a whole kernel then parses no DWARF.
//
// The answers are, by construction and by test, the ones Symbolizer's libdw walk gives:
//   CU        the .debug_aranges entry dwarf_addrdie picks (same binary search);
//   line      the row dwarf_getsrc_die picks: the last row at the greatest address <= pc,
//             none when that row ends a sequence;
//   function  the CU's top-level function range holding pc (CollectFunctionRanges order),
//             then the concrete inline nesting at pc, flattened into address intervals (the
//             nesting only changes where some range of the function's tree starts or ends).
// A module's (ET_REL) map is built over libdwfl's relocated layout of its sections, the same
// view SymbolizeInSection reads — from symdex's relocated copy (relocated_elf.h: the same layout,
// the same relocated bytes) by the scanner and line reader, else through libdwfl, the same bytes
// either way — and carries that layout: section name -> the address its offset 0 has in the map.
// A linked file's map has no sections.
//
// File layout (host byte order, checked; every section 8-byte aligned):
//   Header | strings (NUL-terminated, offset 0 = "") | aranges | units | lines | spans |
//   intervals | nodes | sections
// Readers check every index against the section it points into: a damaged file gives empty
// or wrong frames, never a read outside the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/file_util.h"
#include "server/common/kernel_records.h"
#include "server/common/status.h"
#include "server/debuginfo/dwarf/relocated_elf.h"

namespace symdex::debuginfo {

namespace addrmap {

inline constexpr char kMagic[8] = {'S', 'Y', 'M', 'D', 'X', 'A', 'M', '\n'};
inline constexpr uint32_t kVersion = 2;  // 2: the section layout of relocatable files
inline constexpr uint32_t kByteOrderMark = 0x01020304;
inline constexpr uint32_t kNone = 0xffffffffu;

enum Section : uint32_t { kStrings, kAranges, kUnits, kLines, kSpans, kIntervals, kNodes, kElfSections, kSectionCount };

struct SectionRef {
  uint64_t offset = 0, count = 0;  // count: records (bytes for kStrings)
};
struct Header {
  char magic[8];
  uint32_t version, byte_order, header_size, build_id_size;
  uint8_t build_id[64];
  uint64_t file_size;
  SectionRef sections[kSectionCount];
};
// Version 1 (vmlinux maps written before module maps): the same header without the last
// SectionRef (no sections table); still read, as a linked file's map.
inline constexpr uint32_t kVersion1 = 1;
inline constexpr size_t kHeaderV1Size = sizeof(Header) - sizeof(SectionRef);
struct Arange {
  uint64_t addr, length;
  uint32_t unit;  // kNone: the CU DIE could not be read
  uint32_t reserved;
};
struct Unit {
  uint32_t lines_begin, lines_count, spans_begin, spans_count;
};
struct Line {
  uint64_t addr;
  uint32_t file;  // string offset
  int32_t line, column;
  uint32_t end_sequence;
};
struct Span {
  uint64_t lo, hi;
  uint32_t intervals_begin, intervals_count;
};
struct Interval {
  uint64_t lo;    // up to the next interval's lo (or the span's hi)
  uint32_t node;  // innermost frame of the nesting here
  uint32_t reserved;
};
struct Node {
  uint32_t name;       // string offset
  uint32_t call_file;  // where this inline was called from (string offset)
  int32_t call_line, call_column;
  uint32_t parent;  // the enclosing frame; kNone at the function itself
  uint32_t is_subprogram;
};
struct ElfSection {  // a relocatable file's section as libdwfl laid it out
  uint32_t name;     // string offset
  uint32_t reserved;
  uint64_t base;  // the map address of the section's offset 0
};

}  // namespace addrmap

// One copy of a function the compiler inlined into another (addr_map.h AddrMap::InlinedCopies).
struct InlineCopy {
  uint64_t addr = 0;         // its lowest address
  std::string inlined_into;  // the function it sits in directly (a subprogram, or another copy)
  std::string call_file;     // the call site
  int call_line = 0, call_column = 0;
  unsigned depth = 1;  // 1: in a subprogram's own body; 2: in a copy inlined there; ...
};

// A validated view over an address map's bytes (not owned).
class AddrMap {
 public:
  // Checks the header and that every section lies inside `bytes`.
  static absl::StatusOr<AddrMap> FromBytes(std::string_view bytes);

  // Frames at `addr` (a link-time address of the debug file), leaf first; empty when the
  // debug file has nothing for it. Exactly what Symbolizer::Symbolize returns.
  std::vector<Frame> FramesAt(uint64_t addr) const;
  // A relocatable file's map: where `section` starts (the first section of that name, as
  // libdwfl reports them); nullopt when there is none (always, in a linked file's map).
  std::optional<uint64_t> SectionBase(std::string_view section) const;
  // A relocatable file's map: the section holding map address `addr` (the one laid out at the
  // highest base at or below it) and the offset into it; nullopt below every section.
  std::optional<std::pair<std::string, uint64_t>> SectionOf(uint64_t addr) const;
  bool relocatable() const { return count(addrmap::kElfSections) > 0; }
  // Every inlined copy of the function named `name` that has code (its DWARF name: no clone
  // suffix), by address. One pass over the nodes and one over the intervals.
  std::vector<InlineCopy> InlinedCopies(std::string_view name) const;

  std::string BuildIdHex() const;
  size_t size_bytes() const { return bytes_.size(); }
  uint64_t count(addrmap::Section s) const { return header_.sections[s].count; }

 private:
  template <typename T>
  const T* Records(addrmap::Section s) const {
    return reinterpret_cast<const T*>(bytes_.data() + header_.sections[s].offset);
  }
  const char* String(uint32_t off) const;

  std::string_view bytes_;
  addrmap::Header header_{};  // a copy: a version-1 file's header is one SectionRef shorter
};

// An address map file, mmap'ed read-only for as long as this lives.
class MappedAddrMap {
 public:
  // NotFound when there is no file; InvalidArgument (saying what is wrong) when it is not a
  // valid map or belongs to another build-ID.
  static absl::StatusOr<std::unique_ptr<MappedAddrMap>> Open(const std::string& path, const std::string& build_id_hex);
  ~MappedAddrMap();
  MappedAddrMap(const MappedAddrMap&) = delete;
  MappedAddrMap& operator=(const MappedAddrMap&) = delete;
  const AddrMap& map() const { return map_; }

 private:
  MappedAddrMap(void* base, size_t size, AddrMap map) : base_(base), size_(size), map_(map) {}
  void* base_;
  size_t size_;
  AddrMap map_;
};

struct AddrMapStats {
  uint64_t units = 0, lines = 0, spans = 0, intervals = 0, nodes = 0, string_bytes = 0, bytes = 0;
  uint64_t handle_recycles = 0;   // libdw handles begun again to bound memory (BoundedDwarf)
  uint64_t units_fast_lines = 0;  // units whose line table ReadLineTable read (line_table.h)
  uint64_t units_scanned = 0;     // units whose DIEs the scanner read (die_scanner.h; the rest: libdw)
};

// Builds the address map of a debug file. A linked one (ET_EXEC/ET_DYN): `jobs` threads, each
// with its own libdw handle; the result does not depend on it. A relocatable one (a module,
// ET_REL): as a linked one, from its relocated copy (relocated_elf.h), else one thread over
// libdwfl's relocated view (modules are small; callers build several at once). Memory is bounded as for the DWARF index
// (dwarf_index.h): handles recycled every `handle_budget` bytes of units (0: 16 MiB), each
// unit's part merged as soon as the units before it are, the sections kept in 1 MiB chunks.
absl::StatusOr<std::string> BuildAddrMap(const std::string& debug_file_path, unsigned jobs = 1,
                                         AddrMapStats* stats = nullptr, uint64_t handle_budget = 0);

// The address map of a module from the relocated copy its DWARF index was read from
// (DwarfIndexOptions::relocated_copy): what BuildAddrMap gives for that module when symdex reads
// the copy, without relocating the file again. Any error: call BuildAddrMap, which has the
// fallbacks.
absl::StatusOr<std::string> BuildAddrMapFromCopy(const RelocatedElf& copy, AddrMapStats* stats = nullptr);

// `<dir>/<build-id>.addrmap`
std::string AddrMapPath(const std::string& dir, const std::string& build_id_hex);

// Writes `bytes` to `path` through a temporary file ("<path>.tmp.<pid>") and rename: readers
// see the old file or the whole new one. Creates the directory; both are private (0750/0640,
// server/common/file_util.h). (Temporary files killed writers left behind are removed once
// per index run: RemoveStaleAddrMapTempFiles.)
absl::Status WriteAddrMapFile(const std::string& path, std::string_view bytes);
// The same with the bytes written by `write` into the temporary file's descriptor.
absl::Status WriteAddrMapFileFrom(const std::string& path, const std::function<absl::Status(int fd)>& write);

inline constexpr char kAddrMapTempMarker[] = ".addrmap.tmp.";
// Temporary maps in `dir` (in progress, or left by a killed writer: TempFile::stale).
std::vector<TempFile> AddrMapTempFiles(const std::string& dir);
// Removes the stale ones (their writer is gone, or they are over an hour old); how many.
int RemoveStaleAddrMapTempFiles(const std::string& dir);

}  // namespace symdex::debuginfo
