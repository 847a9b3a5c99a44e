#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/proc_modules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)symdex::ingest::ParseProcModules(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  return 0;
}
