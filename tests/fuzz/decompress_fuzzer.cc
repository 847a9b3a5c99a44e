// Compressed module data: the output limit must hold whatever the stream claims.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/decompress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  constexpr size_t kLimit = 1 << 20;
  for (auto kind :
       {symdex::ingest::Compression::kXz, symdex::ingest::Compression::kZstd, symdex::ingest::Compression::kGzip}) {
    auto out = symdex::ingest::Decompress(in, kind, kLimit);
    if (out.ok() && out->size() > kLimit) __builtin_trap();
  }
  return 0;
}
