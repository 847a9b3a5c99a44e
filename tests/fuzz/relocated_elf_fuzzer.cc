// Hostile module files through symdex's relocator (relocated_elf.h), in memory: refused with a
// FailedPrecondition that says why, or relocated into a copy of the input's size — never a read
// or a write outside the input. The layout's lookup then answers at and around every section's
// bounds. Seeds: small gcc-built objects with DWARF 5 for x86-64 and AArch64
// (tests/fuzz/corpus/relocated_elf/).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/debuginfo/dwarf/relocated_elf.h"

using namespace symdex::debuginfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = RelocateImage(in, "fuzz.ko");
  if (!r.ok()) {
    if (r.status().code() != absl::StatusCode::kFailedPrecondition) __builtin_trap();
    return 0;
  }
  if (r->bytes.size() != size) __builtin_trap();
  const auto& sections = r->layout.sections();
  for (size_t i = 0; i < sections.size(); ++i) {
    if (i > 0 && sections[i - 1].start > sections[i].start) __builtin_trap();  // sorted by start
    for (uint64_t a : {sections[i].start, sections[i].end, sections[i].start - 1, sections[i].end + 1}) {
      uint64_t offset = 0;
      if (auto at = r->layout.Find(a, &offset)) {
        if (*at >= sections.size() || a - sections[*at].start != offset) __builtin_trap();
      }
    }
  }
  return 0;
}
