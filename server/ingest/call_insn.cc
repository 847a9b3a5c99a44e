#include "server/ingest/call_insn.h"

#include "server/common/byte_reader.h"

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
    c.rel32 = LoadLittle<int32_t>(&before[n - 4]);
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

std::optional<CallInsn> A64CallEndingAt(uint32_t insn) {
  CallInsn c;
  c.length = 4;
  if ((insn & 0xfc000000u) == 0x94000000u) {  // BL: imm26 words from the BL itself
    int32_t imm26 = static_cast<int32_t>(insn << 6) >> 6;
    c.direct = true;
    c.rel32 = imm26 * 4 - 4;  // from the return address, which is the BL + 4
    return c;
  }
  if ((insn & 0xfffffc1fu) == 0xd63f0000u) return c;  // BLR Xn
  // BLRAA/BLRAB Xn, Xm and BLRAAZ/BLRABZ Xn (pointer authentication).
  if ((insn & 0xfefff800u) == 0xd63f0800u) return c;
  return std::nullopt;
}

std::optional<DirectBranch> X86DirectBranch(std::span<const uint8_t> insn) {
  size_t p = 0;
  while (p < insn.size() && (insn[p] == 0x2e || insn[p] == 0x3e || insn[p] == 0xf2)) ++p;
  if (p >= insn.size()) return std::nullopt;
  const uint8_t op = insn[p];
  DirectBranch b;
  size_t width = 0;
  if (op == 0xe8 || op == 0xe9) {
    b.call = op == 0xe8;
    b.operand = p + 1;
    width = 4;
  } else if (op == 0xeb || (op >= 0x70 && op <= 0x7f)) {
    b.operand = p + 1;
    width = 1;
  } else if (op == 0x0f && p + 1 < insn.size() && insn[p + 1] >= 0x80 && insn[p + 1] <= 0x8f) {
    b.operand = p + 2;
    width = 4;
  } else {
    return std::nullopt;
  }
  // The displacement ends the instruction: anything else is not this encoding.
  if (b.operand + width != insn.size()) return std::nullopt;
  int64_t disp = 0;
  if (width == 1) {
    disp = static_cast<int8_t>(insn[b.operand]);
  } else {
    disp = LoadLittle<int32_t>(&insn[b.operand]);
  }
  b.target = static_cast<int64_t>(insn.size()) + disp;
  return b;
}

std::optional<DirectBranch> A64DirectBranch(uint32_t insn) {
  DirectBranch b;
  auto sext = [](uint32_t v, int bits) {
    return static_cast<int64_t>(static_cast<int32_t>(v << (32 - bits)) >> (32 - bits));
  };
  if ((insn & 0x7c000000u) == 0x14000000u) {  // B (0) / BL (1) imm26
    b.call = (insn >> 31) != 0;
    b.target = sext(insn & 0x03ffffffu, 26) * 4;
  } else if ((insn & 0xff000010u) == 0x54000000u) {  // B.cond imm19
    b.target = sext((insn >> 5) & 0x7ffffu, 19) * 4;
  } else if ((insn & 0x7e000000u) == 0x34000000u) {  // CBZ / CBNZ imm19
    b.target = sext((insn >> 5) & 0x7ffffu, 19) * 4;
  } else if ((insn & 0x7e000000u) == 0x36000000u) {  // TBZ / TBNZ imm14
    b.target = sext((insn >> 5) & 0x3fffu, 14) * 4;
  } else {
    return std::nullopt;
  }
  return b;
}

}  // namespace symdex::ingest
