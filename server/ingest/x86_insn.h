// The length of one x86-64 instruction, from its bytes: where the next one starts, which is what a
// kprobe at FUNC+OFFSET must hit (the kernel decodes the function from its start when the probe
// is written, and refuses an offset inside an instruction). Legacy prefixes, REX, the one-byte
// and 0F, 0F38, 0F3A opcode maps, VEX (C4/C5) and EVEX (62) encodings, ModRM, SIB, displacements
// and immediates, as the Intel SDM's opcode tables give them. Pure: bytes in, a length out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace symdex::ingest {

inline constexpr size_t kMaxX86InsnLength = 15;

// The length of the instruction at the start of `code` (64-bit mode); nullopt when `code` ends
// inside it or its bytes are no instruction (an opcode 64-bit mode does not have, more than
// 15 bytes).
std::optional<size_t> X86InsnLength(std::span<const uint8_t> code);

}  // namespace symdex::ingest
