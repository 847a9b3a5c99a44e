#include "client/json_text.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace symdex::cli {
namespace {

// Whether `s` is well-formed UTF-8 (as nlohmann's serializer checks it: no overlong forms, no
// surrogates, nothing above U+10FFFF).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

void JsonText::AppendString(std::string_view s, std::string& out) {
  bool plain = true;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) {
      plain = false;
      break;
    }
  }
  if (!plain && !IsUtf8(s)) {
    out += nlohmann::json(std::string(s)).dump();  // throws as the tree's dump would
    return;
  }
  out.push_back('"');
  if (plain) {
    out.append(s);
  } else {
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
          } else {
            out.push_back(ch);
          }
      }
    }
  }
  out.push_back('"');
}

void JsonText::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (levels_.empty()) return;
  Level& l = levels_.back();  // an array element
  out_ += l.members++ ? ",\n" : "\n";
  Indent(levels_.size());
}

JsonText& JsonText::Key(std::string_view key) {
  Level& l = levels_.back();
  out_ += l.members++ ? ",\n" : "\n";
  Indent(levels_.size());
  AppendString(key, out_);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonText& JsonText::Open(char c) {
  BeforeValue();
  out_.push_back(c);
  levels_.push_back({c == '[', 0});
  return *this;
}

JsonText& JsonText::Close(char c) {
  const bool empty = levels_.back().members == 0;
  levels_.pop_back();
  if (!empty) {
    out_.push_back('\n');
    Indent(levels_.size());
  }
  out_.push_back(c);
  return *this;
}

JsonText& JsonText::String(std::string_view s) {
  BeforeValue();
  AppendString(s, out_);
  return *this;
}

JsonText& JsonText::Int(int64_t v) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", v);
  return *this;
}

JsonText& JsonText::UInt(uint64_t v) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", v);
  return *this;
}

JsonText& JsonText::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

}  // namespace symdex::cli
