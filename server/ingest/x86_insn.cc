#include "server/ingest/x86_insn.h"

#include <array>

namespace symdex::ingest {
namespace {

// Per opcode of a map, what follows it.
enum : uint8_t {
  kNone = 0,      // nothing: the opcode is the instruction (or what follows is fixed below)
  kModRM = 1,     // a ModRM byte (and SIB, displacement)
  kImm8 = 2,      // an 8-bit immediate
  kImmZ = 4,      // a 16/32-bit immediate (2 bytes with the 66 prefix)
  kInvalid = 8,   // no instruction in 64-bit mode
  kPrefix = 16,   // a legacy prefix, REX, or an escape handled before the table
  kGroup3 = 32,   // F6/F7: an immediate only for /0 and /1 (TEST)
  kSpecial = 64,  // a length of its own (moffs, ENTER, RET imm16, MOV r64, imm64)
};

using Table = std::array<uint8_t, 256>;

constexpr Table OneByte() {
  Table t{};
  for (int op = 0; op < 0x40; ++op) {
    switch (op & 7) {
      case 0:
      case 1:
      case 2:
      case 3:
        t[op] = kModRM;
        break;
      case 4:
        t[op] = kImm8;
        break;
      case 5:
        t[op] = kImmZ;
        break;
      default:
        t[op] = kInvalid;
        break;  // push/pop of segments, DAA/DAS/AAA/AAS
    }
  }
  t[0x0F] = kPrefix;  // the 0F maps
  for (int op : {0x26, 0x2E, 0x36, 0x3E}) t[op] = kPrefix;
  for (int op = 0x40; op < 0x50; ++op) t[op] = kPrefix;  // REX
  for (int op = 0x50; op < 0x60; ++op) t[op] = kNone;
  t[0x60] = t[0x61] = kInvalid;
  t[0x62] = kPrefix;  // EVEX
  t[0x63] = kModRM;
  for (int op : {0x64, 0x65, 0x66, 0x67}) t[op] = kPrefix;
  t[0x68] = kImmZ;
  t[0x69] = kModRM | kImmZ;
  t[0x6A] = kImm8;
  t[0x6B] = kModRM | kImm8;
  for (int op = 0x6C; op < 0x70; ++op) t[op] = kNone;
  for (int op = 0x70; op < 0x80; ++op) t[op] = kImm8;  // Jcc rel8
  t[0x80] = kModRM | kImm8;
  t[0x81] = kModRM | kImmZ;
  t[0x82] = kInvalid;
  t[0x83] = kModRM | kImm8;
  for (int op = 0x84; op < 0x90; ++op) t[op] = kModRM;
  for (int op = 0x90; op < 0xA0; ++op) t[op] = kNone;
  t[0x9A] = kInvalid;                                     // far call
  for (int op = 0xA0; op < 0xA4; ++op) t[op] = kSpecial;  // MOV moffs
  for (int op = 0xA4; op < 0xB0; ++op) t[op] = kNone;
  t[0xA8] = kImm8;
  t[0xA9] = kImmZ;
  for (int op = 0xB0; op < 0xB8; ++op) t[op] = kImm8;
  for (int op = 0xB8; op < 0xC0; ++op) t[op] = kSpecial;  // MOV r, imm (imm64 with REX.W)
  t[0xC0] = t[0xC1] = kModRM | kImm8;
  t[0xC2] = kSpecial;  // RET imm16
  t[0xC3] = kNone;
  t[0xC4] = t[0xC5] = kPrefix;  // VEX
  t[0xC6] = kModRM | kImm8;
  t[0xC7] = kModRM | kImmZ;
  t[0xC8] = kSpecial;  // ENTER imm16, imm8
  t[0xC9] = kNone;
  t[0xCA] = kSpecial;  // RET far imm16
  t[0xCB] = t[0xCC] = kNone;
  t[0xCD] = kImm8;
  t[0xCE] = kInvalid;
  t[0xCF] = kNone;
  for (int op = 0xD0; op < 0xD4; ++op) t[op] = kModRM;
  t[0xD4] = t[0xD5] = t[0xD6] = kInvalid;
  t[0xD7] = kNone;
  for (int op = 0xD8; op < 0xE0; ++op) t[op] = kModRM;  // x87
  for (int op = 0xE0; op < 0xE8; ++op) t[op] = kImm8;   // LOOP/JrCXZ rel8, IN/OUT imm8
  t[0xE8] = t[0xE9] = kSpecial;                         // CALL/JMP rel32
  t[0xEA] = kInvalid;
  t[0xEB] = kImm8;
  for (int op = 0xEC; op < 0xF0; ++op) t[op] = kNone;
  for (int op : {0xF0, 0xF2, 0xF3}) t[op] = kPrefix;
  t[0xF1] = t[0xF4] = t[0xF5] = kNone;
  t[0xF6] = t[0xF7] = kModRM | kGroup3;
  for (int op = 0xF8; op < 0xFE; ++op) t[op] = kNone;
  t[0xFE] = t[0xFF] = kModRM;
  return t;
}

constexpr Table TwoByte() {  // 0F xx
  Table t{};
  for (int op = 0; op < 256; ++op) t[op] = kModRM;
  for (int op :
       {0x04, 0x0A, 0x0C, 0x24, 0x25, 0x26, 0x27, 0x36, 0x39, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F, 0x7A, 0x7B, 0xA6, 0xA7}) {
    t[op] = kInvalid;
  }
  for (int op : {0x05, 0x06, 0x07, 0x08, 0x09, 0x0B, 0x0E, 0x30, 0x31, 0x32, 0x33,
                 0x34, 0x35, 0x37, 0x77, 0xA0, 0xA1, 0xA2, 0xA8, 0xA9, 0xAA}) {
    t[op] = kNone;
  }
  t[0x0F] = kModRM | kImm8;     // 3DNow!: the opcode is an imm8 suffix
  t[0x38] = t[0x3A] = kPrefix;  // the three-byte maps
  for (int op = 0x70; op < 0x74; ++op) t[op] = kModRM | kImm8;
  for (int op = 0x80; op < 0x90; ++op) t[op] = kSpecial;  // Jcc rel32
  for (int op : {0xA4, 0xAC, 0xBA, 0xC2, 0xC4, 0xC5, 0xC6}) t[op] = kModRM | kImm8;
  for (int op = 0xC8; op < 0xD0; ++op) t[op] = kNone;  // BSWAP
  return t;
}

constexpr Table kOneByte = OneByte();
constexpr Table kTwoByte = TwoByte();

// Bytes of ModRM, SIB and displacement at `p` (32/64-bit addressing); 0 when `code` ends first.
size_t ModRMLength(std::span<const uint8_t> code, size_t p) {
  if (p >= code.size()) return 0;
  const uint8_t modrm = code[p];
  const unsigned mod = modrm >> 6, rm = modrm & 7;
  if (mod == 3) return 1;
  size_t n = 1;
  if (rm == 4) {  // SIB
    if (p + 1 >= code.size()) return 0;
    ++n;
    if (mod == 0 && (code[p + 1] & 7) == 5) n += 4;  // no base: disp32
  } else if (mod == 0 && rm == 5) {
    n += 4;  // RIP-relative
  }
  if (mod == 1) n += 1;
  if (mod == 2) n += 4;
  return n;
}

// The immediate of a VEX/EVEX instruction: map 3 (0F3A) always; map 1 (0F) as the legacy map.
bool VexImm8(unsigned map, uint8_t op) {
  if (map == 3) return true;
  return map == 1 && (kTwoByte[op] & kImm8) != 0;
}

}  // namespace

std::optional<size_t> X86InsnLength(std::span<const uint8_t> code) {
  if (code.size() > kMaxX86InsnLength) code = code.first(kMaxX86InsnLength);
  size_t p = 0;
  bool opsize = false, addrsize = false, rex_w = false;
  // Legacy prefixes, then at most one REX right before the opcode.
  for (;; ++p) {
    if (p >= code.size()) return std::nullopt;
    const uint8_t b = code[p];
    if (b == 0x66) {
      opsize = true;
    } else if (b == 0x67) {
      addrsize = true;
    } else if (b == 0xF0 || b == 0xF2 || b == 0xF3 || b == 0x26 || b == 0x2E || b == 0x36 || b == 0x3E || b == 0x64 ||
               b == 0x65) {
      // (segment, LOCK, REP)
    } else {
      break;
    }
  }
  if ((code[p] & 0xF0) == 0x40) {
    rex_w = (code[p] & 8) != 0;
    if (++p >= code.size()) return std::nullopt;
  }
  const uint8_t op = code[p];
  auto done = [&](size_t n) -> std::optional<size_t> {
    if (n > code.size()) return std::nullopt;
    return n;
  };

  // VEX (C5: one byte of fields, map 0F; C4: two, map in the first) and EVEX (62: three).
  if (op == 0xC4 || op == 0xC5 || op == 0x62) {
    const size_t fields = op == 0xC5 ? 1 : op == 0xC4 ? 2 : 3;
    if (p + fields + 1 >= code.size()) return std::nullopt;
    const unsigned map = op == 0xC5 ? 1 : code[p + 1] & (op == 0x62 ? 7 : 0x1F);
    p += 1 + fields;
    const uint8_t vop = code[p++];
    if (map == 1 && vop == 0x77) return done(p);  // VZEROUPPER / VZEROALL
    const size_t m = ModRMLength(code, p);
    if (m == 0) return std::nullopt;
    p += m;
    return done(p + (VexImm8(map, vop) ? 1 : 0));
  }

  uint8_t what = 0;
  if (op == 0x0F) {
    if (++p >= code.size()) return std::nullopt;
    const uint8_t op2 = code[p];
    if (op2 == 0x38 || op2 == 0x3A) {
      if (++p >= code.size()) return std::nullopt;
      what = op2 == 0x38 ? kModRM : (kModRM | kImm8);
    } else {
      what = kTwoByte[op2];
      if (what & kSpecial) return done(p + 1 + 4);  // Jcc rel32
    }
  } else {
    what = kOneByte[op];
    if (what & kSpecial) {
      switch (op) {
        case 0xA0:
        case 0xA1:
        case 0xA2:
        case 0xA3:
          return done(p + 1 + (addrsize ? 4 : 8));
        case 0xC2:
        case 0xCA:
          return done(p + 1 + 2);
        case 0xC8:
          return done(p + 1 + 3);
        case 0xE8:
        case 0xE9:
          return done(p + 1 + 4);
        default:  // B8..BF
          return done(p + 1 + (rex_w ? 8 : opsize ? 2 : 4));
      }
    }
    if (what & kPrefix) return std::nullopt;  // a prefix after REX: no instruction
  }
  if (what & kInvalid) return std::nullopt;
  ++p;  // past the opcode
  size_t imm = 0;
  if (what & kModRM) {
    if (p >= code.size()) return std::nullopt;
    const unsigned reg = (code[p] >> 3) & 7;
    const size_t m = ModRMLength(code, p);
    if (m == 0) return std::nullopt;
    p += m;
    if ((what & kGroup3) && reg <= 1) imm = op == 0xF6 ? 1 : (opsize ? 2 : 4);
  }
  if (what & kImm8) imm += 1;
  if (what & kImmZ) imm += opsize ? 2 : 4;
  return done(p + imm);
}

}  // namespace symdex::ingest
