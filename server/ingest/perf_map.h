// Parser and lookup table for perf map files (`/tmp/perf-<pid>.map`), written by JIT runtimes
// (`node --perf-basic-prof`, JVM perf-map-agent, LuaJIT, .NET, CPython -X perf).
//
// Usage overview
//   auto parsed = ParsePerfMap(text, "/tmp/perf-123.map");   // bytes in, entries out; no I/O
//   PerfMap map; map.Add(parsed->entries);
//   map.Lookup(0x7f00...) -> the entry covering the address, if any
//   Growing file: parse again from parsed->consumed_bytes with
//   first_line_number = parsed->next_line_number, and Add() the new entries.
//
// Line format:   START SIZE NAME
//   START, SIZE  hex, 1-16 digits, optional 0x/0X prefix
//   NAME         the rest of the line after the blanks that follow SIZE, spaces included
//                ("LazyCompile:~foo /app/my file.js:3:10"); a trailing '\r' is dropped
// Fields are separated by runs of spaces/tabs; blank lines are ignored.
//
// Error policy: skip and count. A malformed line (bad hex, missing name, a range that wraps past
// 2^64, a NUL byte) is skipped, counted, and described -- "<source>:<line>: <why>: '<excerpt>'"
// -- in `issues` (the first max_issues of them). Why not fail: these files are written by many
// runtimes while they run, perf itself skips lines it cannot read, and one bad line from a buggy
// writer should not throw away thousands of good symbols. Callers that want all-or-nothing set
// `strict`, which turns the first malformed line into an InvalidArgument error with the same text.
//
// A last line without '\n' may be a line the writer is still in the middle of (a name cut short
// would be silently wrong), so by default it is not parsed but reported as an incomplete tail;
// set last_line_may_be_partial = false for files known to be complete.
//
// Lookup: later lines win. When ranges overlap (code freed and the space reused), an address
// resolves to the entry from the latest line that covers it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

struct PerfMapEntry {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
  size_t line = 0;  // 1-based line number in the file

  bool operator==(const PerfMapEntry&) const = default;
};

struct PerfMapParseOptions {
  bool strict = false;                   // fail on the first malformed line instead of skipping it
  bool last_line_may_be_partial = true;  // see "A last line without '\n'" above
  size_t first_line_number = 1;          // when parsing a continuation of a growing file
  size_t max_issues = 100;               // how many malformed-line descriptions to keep
};

struct PerfMapParseResult {
  std::vector<PerfMapEntry> entries;  // in file order
  size_t malformed_lines = 0;         // all of them, even past max_issues
  std::vector<std::string> issues;    // "<source>:<line>: <why>: '<excerpt>'"
  // Bytes of `text` parsed; an unterminated last line held back as incomplete is not included.
  uint64_t consumed_bytes = 0;
  bool incomplete_tail = false;
  size_t next_line_number = 1;  // the line number of text[consumed_bytes]
};

absl::StatusOr<PerfMapParseResult> ParsePerfMap(std::string_view text, std::string_view source,
                                                const PerfMapParseOptions& options = {});

// Address -> entry, with later entries overriding earlier ones where they overlap. Kept as a set of
// disjoint segments (start -> last address, entry index), so a lookup is one upper_bound.
class PerfMap {
 public:
  // Entries added later win over earlier ones (and over earlier Add calls). Zero-size entries
  // cover no address and are only kept in entries().
  void Add(const std::vector<PerfMapEntry>& entries);
  void Add(PerfMapEntry entry);

  std::optional<PerfMapEntry> Lookup(uint64_t addr) const;
  const std::vector<PerfMapEntry>& entries() const { return entries_; }
  size_t segment_count() const { return segments_.size(); }

 private:
  struct Segment {
    uint64_t last;  // inclusive, so a range ending at 2^64 needs no overflow
    size_t entry;
  };
  std::vector<PerfMapEntry> entries_;
  std::map<uint64_t, Segment> segments_;  // keyed by first address; disjoint
};

}  // namespace symdex::ingest
