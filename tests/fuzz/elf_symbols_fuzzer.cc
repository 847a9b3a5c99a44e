// Hostile ELF images (a corrupt .ko) through libelf and our symbol reader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/ingest/elf_symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string image(reinterpret_cast<const char*>(data), size);
  (void)symdex::ingest::ReadElfSymbols(image);
  return 0;
}
