// Prints where each instruction starts when a code region is decoded from its first byte with
// symdex's x86-64 length decoder (ingest/x86_insn.h), one hexadecimal address a line; a byte it
// cannot decode is skipped and counted on stderr. Built and run by x86_decode.sh.
//   x86_decode CODE.bin BASE_HEX
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "server/ingest/x86_insn.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: x86_decode CODE.bin BASE_HEX\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  const std::vector<uint8_t> code((std::istreambuf_iterator<char>(f)), {});
  const unsigned long long base = std::strtoull(argv[2], nullptr, 16);
  size_t undecoded = 0;
  for (size_t p = 0; p < code.size();) {
    std::printf("%llx\n", base + p);
    const auto n = symdex::ingest::X86InsnLength(std::span<const uint8_t>(code).subspan(p));
    if (!n) ++undecoded;
    p += n ? *n : 1;
  }
  std::fprintf(stderr, "undecoded bytes: %zu\n", undecoded);
  return 0;
}
