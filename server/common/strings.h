// Small string helpers. Debian's abseil is built without std::string_view support, so
// absl::StrCat/StrSplit do not take std::string_view; these do.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/common/hex.h"

namespace symdex {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

inline std::vector<std::string_view> Split(std::string_view s, char sep, bool skip_empty) {
  std::vector<std::string_view> out;
  while (true) {
    size_t p = s.find(sep);
    std::string_view part = s.substr(0, p);
    if (!skip_empty || !part.empty()) out.push_back(part);
    if (p == std::string_view::npos) break;
    s.remove_prefix(p + 1);
  }
  return out;
}

template <typename Range>
std::string StrJoin(const Range& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty() || &p != &*std::begin(parts)) out += sep;
    out += p;
  }
  return out;
}

// A line quoted in an error message: at most `max` characters, unprintable ones as '?'.
inline std::string Excerpt(std::string_view line, size_t max = 80) {
  std::string out;
  for (char c : line.substr(0, max)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (line.size() > max) out += "...";
  return out;
}

// `s` as text output prints it: each control byte (below 0x20, and 0x7f) as "\xNN", every other
// byte as it is. A kernel keeps names with control bytes (a module's "foo\x01"); the index and JSON
// hold them byte-exact, and a terminal never receives one raw.
inline std::string EscapeControl(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// True when `s` holds a control byte (what EscapeControl rewrites).
inline bool HasControlByte(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// A string fmt prints as EscapeControl prints it, copied only when it holds a control byte:
// fmt::format("{:<28}", Escaped{name}).
struct Escaped {
  std::string_view text;
};

inline std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
  return out;
}

inline std::string_view StripWhitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace symdex

template <>
struct fmt::formatter<symdex::Escaped> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(symdex::Escaped e, FormatContext& ctx) const {
    if (!symdex::HasControlByte(e.text)) return fmt::formatter<std::string_view>::format(e.text, ctx);
    const std::string escaped = symdex::EscapeControl(e.text);
    return fmt::formatter<std::string_view>::format(escaped, ctx);
  }
};

// Lets fmt print absl::string_view (Status::message()), which Debian's abseil keeps distinct
// from std::string_view.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  auto format(absl::string_view s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
