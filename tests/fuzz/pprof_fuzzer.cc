// Fuzzes the pprof reader and writer (`symdex pprof` reads profiles from anywhere): any bytes give
// a profile or an error, and a profile rewritten with lines for every location reads back with
// the same locations, each holding the lines given.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/pprof_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto p = symdex::ingest::ParsePprof(bytes);
  if (!p.ok()) return 0;
  std::map<uint64_t, std::vector<symdex::ingest::PprofFrame>> lines;
  for (const auto& l : p->locations) lines[l.id] = {{"f", "f", "a.c", 1, 2, 3}, {"g", "g", "b.c", 0, 4, 0}};
  std::vector<uint64_t> maps;
  for (const auto& m : p->mappings) maps.push_back(m.id);
  std::string out = symdex::ingest::RewritePprof(bytes, *p, lines, maps);
  auto back = symdex::ingest::ParsePprof(out);
  if (!back.ok()) __builtin_trap();
  if (back->locations.size() != p->locations.size() || back->mappings.size() != p->mappings.size()) __builtin_trap();
  for (size_t i = 0; i < back->locations.size(); ++i) {
    // Locations sharing an id all get the lines of that id.
    if (back->locations[i].lines != 2) __builtin_trap();
  }
  if (back->strings.size() < p->strings.size()) __builtin_trap();
  return 0;
}
