// Whether machine code ends in a call instruction at a given point: a return address on a
// kernel stack follows the call that pushed it (x86-64) or set the link register (AArch64).
// Pure: bytes in, the call out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace symdex::ingest {

inline constexpr size_t kMaxCallLength = 8;  // [REX] FF /2 with SIB and disp32 is 7; 8 with a prefix

struct CallInsn {
  size_t length = 0;    // bytes before the return address
  bool direct = false;  // E8 rel32 / BL imm26: its target is the return address + rel32
  int32_t rel32 = 0;    // direct only
};

// `before` = the bytes just before a return address (the last byte is the one right before it;
// up to kMaxCallLength). The call that ends exactly there: E8 rel32, or FF /2 (call *r/m64) in
// any addressing form, with an optional REX prefix. A direct call is preferred when both decode
// (its opcode is the stronger evidence). nullopt when no call ends there.
std::optional<CallInsn> CallEndingAt(std::span<const uint8_t> before);

// AArch64: the instruction that ends at a return address (its 4 bytes, little-endian as in the
// file) when it is a call: BL imm26 (direct), BLR Xn or BLRAA/BLRAAZ/BLRAB/BLRABZ (indirect).
// nullopt for anything else (a B, a RET, data).
std::optional<CallInsn> A64CallEndingAt(uint32_t insn);

}  // namespace symdex::ingest
