// Whether machine code ends in a call instruction at a given point: a return address on a
// kernel stack follows the call that pushed it (x86-64) or set the link register (AArch64); and
// where a direct call or jump at an instruction goes (who calls a function: its callers). Pure:
// bytes in, the call or branch out.
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

// A direct call or jump: its destination is in the instruction, relative to it.
struct DirectBranch {
  bool call = false;   // E8 rel32 / BL; otherwise a jump (a tail call when it leaves its function)
  size_t operand = 0;  // where its displacement starts in the instruction (a module's relocation applies there)
  int64_t target = 0;  // the destination, from the instruction's first byte
};

// x86-64: `insn` = one whole instruction (X86InsnLength's bytes). E8 call rel32, E9 jmp rel32,
// EB jmp rel8, 70-7F jcc rel8, 0F 80-8F jcc rel32, after any of the prefixes compilers put on
// branches (2E/3E hints, F2 bnd). nullopt for every other instruction.
std::optional<DirectBranch> X86DirectBranch(std::span<const uint8_t> insn);

// AArch64: BL and B imm26, B.cond, CBZ/CBNZ imm19 and TBZ/TBNZ imm14 (their relocation applies to
// the instruction itself: `operand` is 0). nullopt for every other instruction.
std::optional<DirectBranch> A64DirectBranch(uint32_t insn);

}  // namespace symdex::ingest
