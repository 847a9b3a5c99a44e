// Fuzzes the perf-map parser and lookup table: any bytes must give entries (or, in strict mode,
// an error exactly when a line is malformed), and every lookup must return an entry covering the
// address.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/perf_map.h"

using namespace symdex::ingest;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  PerfMapParseOptions lenient;
  lenient.last_line_may_be_partial = size % 2 == 0;
  auto parsed = ParsePerfMap(text, "fuzz", lenient);
  if (!parsed.ok()) __builtin_trap();  // only strict mode fails
  if (parsed->consumed_bytes > size) __builtin_trap();
  if (parsed->issues.size() > parsed->malformed_lines) __builtin_trap();

  PerfMapParseOptions strict = lenient;
  strict.strict = true;
  auto strict_parsed = ParsePerfMap(text, "fuzz", strict);
  if (strict_parsed.ok() != (parsed->malformed_lines == 0)) __builtin_trap();

  PerfMap map;
  map.Add(parsed->entries);
  for (const auto& e : parsed->entries) {
    if (e.name.empty() || e.name.find('\n') != std::string::npos) __builtin_trap();
    if (e.size == 0) continue;
    for (uint64_t addr : {e.start, e.start + (e.size - 1), e.start + e.size / 2}) {
      auto hit = map.Lookup(addr);
      if (!hit || hit->size == 0 || addr < hit->start || addr - hit->start >= hit->size) __builtin_trap();
      if (hit->line < e.line) __builtin_trap();  // later lines win
    }
  }
  return 0;
}
