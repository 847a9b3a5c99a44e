// Fuzzes the /proc/kallsyms + System.map parser: any bytes must give records or an error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/kallsyms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto syms = symdex::ingest::ParseKallsyms(text, "fuzz");
  if (syms.ok()) {
    for (const auto& s : *syms) {
      // Invariants the store relies on.
      if (s.name.empty() || s.name.find_first_of(" \t\n") != std::string::npos) __builtin_trap();
      if (s.module.find_first_of(" \t\n") != std::string::npos) __builtin_trap();
    }
    (void)symdex::ingest::AllAddressesZero(*syms);
  }
  return 0;
}
