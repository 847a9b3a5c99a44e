// Fuzzes the /proc/kallsyms + System.map parser: any bytes must give records or an error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/ingest/kallsyms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto syms = symdex::ingest::ParseKallsyms(text, "fuzz");
  if (syms.ok()) {
    for (const auto& s : *syms) {
      // Invariants the store relies on: a name is any bytes but a line's end or a NUL (blanks and
      // control bytes kept, as the kernel writes them); a module name has no blank or control byte.
      if (s.name.empty() || s.name.find_first_of(std::string_view("\n\0", 2)) != std::string::npos) __builtin_trap();
      for (char c : s.module) {
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) __builtin_trap();
      }
      (void)symdex::ingest::ModuleSymbolIgnoreRule(s.name);
    }
    (void)symdex::ingest::AllAddressesZero(*syms);
    auto map = symdex::ingest::ParseSystemMap(text, "fuzz");
    if (map.ok() != syms.ok()) __builtin_trap();  // the same grammar
  }
  return 0;
}
