#include "server/query/spec.h"
#include "server/common/hex.h"

#include <cctype>
#include <charconv>

#include "server/common/strings.h"

namespace symdex::query {
namespace {

std::optional<uint64_t> ParseNumber(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) return ParseHex(s, HexPrefix::kRequired);
  uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$'; }

// A control byte other than a line's blanks: the kernel keeps names with them (a module's
// "foo\x01"), so a spec names them as they are.
bool IsNameControlByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u > 0 && u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f;
}

}  // namespace

bool PathSuffixMatch(std::string_view path, std::string_view suffix) {
  if (suffix.empty()) return true;
  if (suffix.size() > path.size() || !path.ends_with(suffix)) return false;
  return suffix.size() == path.size() || path[path.size() - suffix.size() - 1] == '/';
}

std::string KasAlias(std::string_view file, int64_t line) {
  std::string out;
  for (char c : file) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return StrCat(out, "_", line);
}

absl::StatusOr<Spec> ParseSpec(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("bad spec '", text, "': ", why, " (see 'symdex help specs')"));
  };
  Spec s;
  std::string_view t = text;
  if (t.empty()) return bad("empty");
  if (t.starts_with("0x") || t.starts_with("0X")) {
    auto a = ParseNumber(t);
    if (!a) return bad("address is not hex");
    s.address = a;
    return s;
  }
  // +OFFSET: the last '+' followed by a number, not inside "SECTION+0xHEX" of a WHERE.
  size_t plus = t.rfind('+');
  if (plus != std::string_view::npos) {
    size_t at = t.find('@');
    bool in_where_section = at != std::string_view::npos && plus > at && t.find('#', at) == std::string_view::npos &&
                            t.substr(at + 1, 1) == "." && t.find('+', at) == plus;
    if (!in_where_section) {
      auto off = ParseNumber(t.substr(plus + 1));
      if (!off) return bad("offset after '+' is not a number");
      s.offset = *off;
      t = t.substr(0, plus);
    }
  }
  // One '@' and one '#' at most: a second one is a typo (name_show@@), never a path, and must
  // not be looked up as one (which would answer "not found" for a malformed spec).
  if (size_t at = t.find('@'); at != std::string_view::npos && t.find('@', at + 1) != std::string_view::npos) {
    return bad("more than one '@' (NAME@WHERE takes one)");
  }
  if (size_t h = t.find('#'); h != std::string_view::npos && t.find('#', h + 1) != std::string_view::npos) {
    return bad("more than one '#' (NAME#CU takes one)");
  }
  size_t hash = t.find('#');
  if (hash != std::string_view::npos) {
    s.cu = std::string(t.substr(hash + 1));
    if (s.cu.empty()) return bad("empty compilation unit after '#'");
    t = t.substr(0, hash);
  }
  size_t at = t.find('@');
  std::string_view head = t.substr(0, at);
  if (at != std::string_view::npos) {
    std::string_view where = t.substr(at + 1);
    if (where.empty()) return bad("nothing after '@'");
    if (where.starts_with("0x")) {
      s.at_addr = ParseNumber(where);
      if (!s.at_addr) return bad("address after '@' is not hex");
    } else if (where.starts_with('.') && where.find("+0x") != std::string_view::npos) {
      size_t p = where.find("+0x");
      s.at_section = std::string(where.substr(0, p));
      s.at_addr = ParseNumber(where.substr(p + 1));
      if (!s.at_addr) return bad("section offset is not hex");
    } else {
      size_t colon = where.rfind(':');
      std::string_view path = where;
      if (colon != std::string_view::npos) {
        auto line = ParseNumber(where.substr(colon + 1));
        if (!line) return bad("line after ':' is not a number");
        s.line = static_cast<int64_t>(*line);
        path = where.substr(0, colon);
      }
      if (path.empty()) return bad("empty path before ':'");
      // kas_alias form: no '/' and no '.', ends in _<digits>, and no explicit :LINE.
      size_t us = path.rfind('_');
      bool kas = !s.line && path.find('/') == std::string_view::npos && path.find('.') == std::string_view::npos &&
                 us != std::string_view::npos && us + 1 < path.size() && ParseNumber(path.substr(us + 1));
      if (kas)
        s.kas_alias = std::string(path);
      else
        s.path = std::string(path);
    }
  }
  size_t colon = head.find(':');
  if (colon != std::string_view::npos) {
    s.module = std::string(head.substr(0, colon));
    head = head.substr(colon + 1);
    if (s.module.empty()) return bad("empty module before ':'");
  }
  if (head.empty()) return bad("missing function name");
  for (char c : head) {
    if (!IsIdentChar(c) && !IsNameControlByte(c)) {
      return bad(StrCat("unexpected character '", std::string(1, c), "' in the name"));
    }
  }
  s.name = std::string(head);
  return s;
}

std::string FormatSpec(const Spec& s) {
  if (s.address) return fmt::format("0x{:x}", *s.address);
  std::string out;
  if (!s.module.empty()) out += s.module + ":";
  out += s.name;
  if (s.at_addr) {
    out +=
        s.at_section.empty() ? fmt::format("@0x{:x}", *s.at_addr) : fmt::format("@{}+0x{:x}", s.at_section, *s.at_addr);
  } else if (!s.kas_alias.empty()) {
    out += "@" + s.kas_alias;
  } else if (!s.path.empty()) {
    out += "@" + s.path;
    if (s.line) out += StrCat(":", *s.line);
  }
  if (!s.cu.empty()) out += "#" + s.cu;
  if (s.offset) out += fmt::format("+0x{:x}", s.offset);
  return out;
}

}  // namespace symdex::query
