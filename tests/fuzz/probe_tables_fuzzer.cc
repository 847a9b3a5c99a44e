// Hostile ELF images (a corrupt vmlinux or .ko) through the probe-table reader: __mcount_loc
// ranges and relocations, the kprobe blacklist, init and noinstr areas.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "server/ingest/probe_tables.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string image(reinterpret_cast<const char*>(data), size);
  (void)symdex::ingest::ReadProbeTables(std::span<char>(image.data(), image.size()));
  return 0;
}
