// pprof profiles (github.com/google/pprof, proto/profile.proto): read what symbolizing their
// kernel locations needs, and write the profile back with those locations' functions and lines —
// every other field kept byte for byte. Pure: bytes in, bytes out (gzip is the caller's).
//
// The wire format is read by hand (protobuf encoding: varints, length-delimited fields), so a
// hostile profile is bounded data, not a generated parser's allocations: at most
// kMaxPprofBytes, kMaxPprofEntries messages of each kind, kMaxPprofStackDepth frames a sample.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

inline constexpr size_t kMaxPprofBytes = 256u << 20;
inline constexpr size_t kMaxPprofEntries = 1u << 22;
inline constexpr size_t kMaxPprofStackDepth = 4096;

struct PprofMapping {
  uint64_t id = 0;
  uint64_t memory_start = 0, memory_limit = 0, file_offset = 0;
  std::string filename;  // "[kernel.kallsyms]", "/usr/lib/.../libc.so.6", "[nf_tables]", ...
  std::string build_id;  // as the profile spells it (usually hex)
};

struct PprofLocation {
  uint64_t id = 0;
  uint64_t mapping_id = 0;
  uint64_t address = 0;
  size_t lines = 0;     // Line entries it has already
  bool leaf = false;    // the first location of some sample (where it was taken)
  bool caller = false;  // a later location of some sample (a return address)
};

struct PprofProfile {
  std::vector<std::string> strings;  // string_table
  std::vector<PprofMapping> mappings;
  std::vector<PprofLocation> locations;
  uint64_t max_function_id = 0;
  size_t samples = 0;
};

// InvalidArgument naming what is wrong (not a profile, truncated, a limit exceeded).
absl::StatusOr<PprofProfile> ParsePprof(std::string_view bytes);

// What to put into a location: its frames, leaf first (pprof's order: the last Line is the
// function the others were inlined into).
struct PprofFrame {
  std::string name;         // Function.name
  std::string system_name;  // Function.system_name (the linkage name)
  std::string filename;
  int64_t start_line = 0;
  int64_t line = 0;
  int64_t column = 0;
};

// `bytes` (which ParsePprof read) with each location in `lines` given those frames (replacing any
// it had), Function and string_table entries added for them, and every mapping in
// `symbolized_mappings` marked has_functions/has_filenames/has_line_numbers/has_inline_frames.
std::string RewritePprof(std::string_view bytes, const PprofProfile& p,
                         const std::map<uint64_t, std::vector<PprofFrame>>& lines,
                         const std::vector<uint64_t>& symbolized_mappings);

}  // namespace symdex::ingest
