#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/elf_notes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto id = symdex::ingest::FindGnuBuildId(std::string_view(reinterpret_cast<const char*>(data), size));
  if (id.ok() && id->has_value() && (*id)->raw().size() > size) __builtin_trap();
  return 0;
}
