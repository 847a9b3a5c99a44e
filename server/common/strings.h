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

// Lets fmt print absl::string_view (Status::message()), which Debian's abseil keeps distinct
// from std::string_view.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  auto format(absl::string_view s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
