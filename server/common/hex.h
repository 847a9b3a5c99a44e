// The one hex-number parser: kernel addresses in kallsyms, /proc/modules, /sys/module/*/sections
// and perf maps, and user-typed addresses. Strict, so that a damaged line is reported rather
// than read as a different address: no sign, no whitespace, no trailing junk, at most 16
// significant-or-not digits (a u64; longer input is refused, not truncated or wrapped).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace symdex {

// Whether a "0x" / "0X" prefix is expected. kallsyms and perf maps print bare digits, sysfs and
// /proc/modules print "0x...", people type either.
enum class HexPrefix {
  kNone,      // bare digits only: "0x10" is refused
  kOptional,  // "0x10", "0X10" and "10" are all 16
  kRequired,  // "0x10" only
};

// The value of one hex digit (either case), or -1.
constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// 1-16 hex digits (after the prefix, as `prefix` says) as a u64; nullopt for anything else:
// empty, a lone "0x", a non-digit anywhere, more than 16 digits.
constexpr std::optional<uint64_t> ParseHex(std::string_view s, HexPrefix prefix = HexPrefix::kOptional) {
  const bool has_prefix = s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (has_prefix && prefix == HexPrefix::kNone) return std::nullopt;
  if (!has_prefix && prefix == HexPrefix::kRequired) return std::nullopt;
  if (has_prefix) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    const int d = HexDigitValue(c);
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace symdex
