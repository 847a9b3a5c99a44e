// Hostile BTF (a corrupt .BTF section or /sys/kernel/btf file) through the BTF reader, alone and
// as a module's split BTF over a base's strings taken from the input's first bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest/btf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)symdex::ingest::ReadBtf(in);
  if (!in.empty()) {
    const size_t split = static_cast<uint8_t>(in[0]) % (in.size() + 1);
    (void)symdex::ingest::ReadBtf(in.substr(split), in.substr(0, split));
  }
  return 0;
}
