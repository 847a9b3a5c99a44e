#include "server/common/build_id.h"

#include "server/common/hex.h"

namespace symdex {
std::optional<BuildId> BuildId::FromHex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  std::string raw;
  raw.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexDigitValue(hex[i]), lo = HexDigitValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw.push_back(static_cast<char>(hi << 4 | lo));
  }
  return BuildId(std::move(raw));
}

std::string BuildId::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw_.size() * 2);
  for (unsigned char c : raw_) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

}  // namespace symdex
