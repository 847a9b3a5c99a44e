// Fuzzes the frame-line parser (frames arrive from other machines): any bytes give a frame or an
// error, and a frame keeps the invariants the query layer relies on.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/frame_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = symdex::ingest::ParseFrameText(text);
  if (f.ok()) {
    if (!f->address && f->symbol.empty()) __builtin_trap();
    if (f->symbol.size() > symdex::ingest::kMaxFrameSymbolLength) __builtin_trap();
    if (f->symbol.find_first_of(" \t\n:+/") != std::string::npos) __builtin_trap();
    if (f->module.find_first_of(" \t\n[]()") != std::string::npos) __builtin_trap();
    if (f->module_build_id.size() % 2 != 0) __builtin_trap();
  }
  return 0;
}
