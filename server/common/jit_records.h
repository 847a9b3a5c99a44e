// The JIT records more than one layer names alike: a process instance as the JIT tables hold it,
// a jitted DSO read from disk and the build-IDs several of them share, and the report of one
// jitdump or perf-map file ingested. Plain values (std and BuildId only): the store writes and
// reads instances, the parsers make DSOs, the ingest fills reports, the query API and the CLI
// hand them out -- one type each, below all of those (store::JitInstanceRow,
// query::JitInstanceInfo and jit::IngestReport are these).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/status.h"

namespace symdex {

// One process instance of the JIT tables: a jitdump (pid, header timestamp) or a pid's perf map.
struct JitInstance {
  int64_t id = 0;
  uint32_t pid = 0;
  uint64_t dump_timestamp = 0;
  uint32_t elf_mach = 0;
  bool big_endian = false;
  std::string path;    // the first source it was read from
  std::string status;  // of the source ingested last
  int64_t loads = 0;
};

// "jitted-<pid>-<code_index>.so", as `perf inject -j` names a jitted DSO.
struct JittedDsoName {
  uint32_t pid = 0;
  uint64_t code_index = 0;
};

// A source line inside one jitted function's code, as a jitted DSO's line table carries it.
struct JitCodeLine {
  uint64_t offset = 0;  // from the start of the code
  uint32_t line = 0;
  uint32_t column = 0;
  std::string file;
};

// A jitted DSO on disk, as read.
struct JittedDso {
  std::string path;
  std::optional<JittedDsoName> name;  // from the file name
  BuildId build_id;                   // the NT_GNU_BUILD_ID note's bytes
  std::string symbol;                 // the first named symbol in .symtab (the function), or empty
  uint64_t file_size = 0;
};

// A build-ID several jitted DSOs carry (tools keyed by build-ID show them as one).
struct SharedDsoId {
  std::string build_id;              // hex
  std::vector<size_t> dsos;          // indexes into the DSOs read, in their order
  std::vector<std::string> symbols;  // the distinct function names they merge, sorted
};

// One jitdump or perf-map file ingested into the JIT tables.
struct JitIngestReport {
  std::string path;
  std::string kind;  // "jitdump" | "perf-map"
  uint32_t pid = 0;
  uint64_t dump_timestamp = 0;  // jitdump only
  uint64_t start_offset = 0;    // where this run started reading
  uint64_t end_offset = 0;      // where the next run will start
  uint64_t file_size = 0;
  uint64_t bytes_read = 0;
  size_t loads = 0, moves = 0, debug_infos = 0, unknown_records = 0;
  size_t rejected_debug_infos = 0;              // DEBUG_INFO records whose entries contradict the record (dropped)
  size_t duplicates = 0;                        // records already in the index (copy of a dump, overlapping reads)
  size_t orphan_moves = 0;                      // CODE_MOVE for a code_index with no CODE_LOAD before it
  size_t map_entries = 0, malformed_lines = 0;  // perf-map only
  // closed (CLOSE seen) | complete | truncated (incomplete tail) | unchanged | error
  std::string status;
  std::string message;  // human-readable detail: truncation offset, error text
  absl::Status error;   // non-ok iff status == "error"
};

}  // namespace symdex
