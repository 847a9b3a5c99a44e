// Hostile address-map files (a damaged or forged <db>-addrmaps/BUILD-ID.addrmap): the header
// checks, then lookups at addresses the input itself points at (its aranges and spans) and a
// few fixed ones. Nothing may be read outside the input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "server/debuginfo/symbolize/addr_map.h"

using namespace symdex::debuginfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> words((size + 7) / 8);  // mmap alignment
  if (size) std::memcpy(words.data(), data, size);
  std::string_view bytes(reinterpret_cast<const char*>(words.data()), size);
  auto map = AddrMap::FromBytes(bytes);
  if (!map.ok()) return 0;
  std::vector<uint64_t> probes = {0, 1, 0x401000, 0xffffffff81000000, UINT64_MAX};
  // Addresses stored in the input: every 8-byte word (bounded), and its neighbours.
  for (size_t i = 0; i < words.size() && i < 4096; i += 3) {
    probes.push_back(words[i]);
    probes.push_back(words[i] + 1);
  }
  for (uint64_t a : probes) (void)map->FramesAt(a);
  (void)map->BuildIdHex();
  return 0;
}
