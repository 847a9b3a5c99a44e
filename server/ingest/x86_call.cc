#include "server/ingest/x86_call.h"

#include <cstring>

namespace symdex::ingest {
namespace {

// Length of FF /2 starting at p (after any REX prefix), or 0 when p is not one.
size_t IndirectCallLength(std::span<const uint8_t> p) {
  if (p.size() < 2 || p[0] != 0xff) return 0;
  const uint8_t modrm = p[1];
  const unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
  if (reg != 2) return 0;
  size_t len = 2;
  if (mod == 3) return len;  // call *%reg
  if (rm == 4) {             // SIB
    if (p.size() < 3) return 0;
    const unsigned base = p[2] & 7;
    ++len;
    if (mod == 0 && base == 5) len += 4;
  } else if (mod == 0 && rm == 5) {
    len += 4;  // call *disp32(%rip)
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len;
}

}  // namespace

std::optional<CallInsn> CallEndingAt(std::span<const uint8_t> before) {
  const size_t n = before.size();
  if (n >= 5 && before[n - 5] == 0xe8) {
    CallInsn c;
    c.length = 5;
    c.direct = true;
    std::memcpy(&c.rel32, &before[n - 4], 4);  // little-endian, as x86 stores it
    return c;
  }
  for (size_t len = 2; len <= n && len <= kMaxCallLength; ++len) {
    std::span<const uint8_t> at = before.subspan(n - len);
    if (IndirectCallLength(at) == len) {
      // With its REX prefix (call *%r11 is 41 ff d3), when one is there.
      const bool rex = len < n && len < kMaxCallLength && (before[n - len - 1] & 0xf0) == 0x40;
      return CallInsn{rex ? len + 1 : len, false, 0};
    }
  }
  return std::nullopt;
}

}  // namespace symdex::ingest
