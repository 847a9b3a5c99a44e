// Fuzzes the kernel-log scanner (`symdex decode` reads logs people paste): any bytes give a log or
// an error, and every frame keeps the invariants the decoder relies on.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/kernel_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto log = symdex::ingest::ScanKernelLog(text);
  if (!log.ok()) return 0;
  for (size_t i = 0; i < log->frames.size(); ++i) {
    const auto& f = log->frames[i];
    if (f.line >= log->lines.size()) __builtin_trap();
    if (f.begin >= f.end || f.end > log->lines[f.line].size()) __builtin_trap();
    if (f.caller && (*f.caller <= i || *f.caller >= log->frames.size())) __builtin_trap();
    if (f.caller && log->frames[*f.caller].trace != f.trace) __builtin_trap();
    if (f.trace >= log->traces) __builtin_trap();
    if (f.frame.symbol.empty() && !f.frame.address) __builtin_trap();
    if (i > 0 && log->frames[i - 1].line >= f.line) __builtin_trap();
    // What the decoder hands the frames query must read back as the same frame.
    auto back = symdex::ingest::ParseFrameText(f.normalized);
    if (!back.ok() || back->symbol != f.frame.symbol || back->address != f.frame.address) __builtin_trap();
    if (!f.frame.symbol.empty() && back->offset != f.frame.offset) __builtin_trap();
  }
  return 0;
}
