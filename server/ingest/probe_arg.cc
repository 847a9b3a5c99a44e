#include "server/ingest/probe_arg.h"

#include <charconv>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// The C name at the start of `s` (possibly empty).
size_t NameLength(std::string_view s) {
  if (s.empty() || !IsNameStart(s[0])) return 0;
  size_t n = 1;
  while (n < s.size() && IsNameChar(s[n])) ++n;
  return n;
}

absl::Status Bad(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(StrCat("probe argument '", Excerpt(text, 200), "': ", why));
}

bool IsWidthType(std::string_view t) {
  if (t.size() < 2 || (t[0] != 'u' && t[0] != 's' && t[0] != 'x')) return false;
  std::string_view w = t.substr(1);
  return w == "8" || w == "16" || w == "32" || w == "64";
}

// bWIDTH@OFFSET/CONTAINER: CONTAINER one of 8..64, WIDTH >= 1, WIDTH + OFFSET <= CONTAINER.
bool IsBitfieldType(std::string_view t) {
  if (t.size() < 6 || t[0] != 'b') return false;
  auto num = [](std::string_view& s, char end, unsigned& out) {
    const char* first = s.data();
    auto [p, ec] = std::from_chars(first, s.data() + s.size(), out);
    if (ec != std::errc() || p == first) return false;
    s.remove_prefix(static_cast<size_t>(p - first));
    if (end == '\0') return s.empty();
    if (s.empty() || s[0] != end) return false;
    s.remove_prefix(1);
    return true;
  };
  std::string_view s = t.substr(1);
  unsigned width = 0, offset = 0, container = 0;
  if (!num(s, '@', width) || !num(s, '/', offset) || !num(s, '\0', container)) return false;
  if (container != 8 && container != 16 && container != 32 && container != 64) return false;
  return width >= 1 && width + offset <= container;
}

}  // namespace

bool IsCName(std::string_view name) { return !name.empty() && NameLength(name) == name.size(); }

bool IsFetchType(std::string_view type) {
  return IsWidthType(type) || type == "string" || type == "ustring" || type == "symbol" || IsBitfieldType(type);
}

absl::StatusOr<ProbeArg> ParseProbeArg(std::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  if (text.size() > kMaxProbeArgLength) return Bad(text, StrCat("longer than ", kMaxProbeArgLength, " bytes"));
  ProbeArg out;
  out.text = std::string(text);
  std::string_view rest = text;
  if (size_t eq = rest.find('='); eq != std::string_view::npos) {
    std::string_view name = rest.substr(0, eq);
    if (!IsCName(name)) return Bad(text, StrCat("'", Excerpt(name, 80), "' before '=' is not a C name"));
    out.name = std::string(name);
    rest.remove_prefix(eq + 1);
    if (rest.empty()) return Bad(text, "nothing after '='");
  }
  std::string_view expr = rest, type;
  bool typed = false;
  if (size_t colon = rest.find(':'); colon != std::string_view::npos) {
    expr = rest.substr(0, colon);
    type = rest.substr(colon + 1);
    typed = true;
  }
  auto special = [&](std::string_view word, ProbeArg::Kind kind) {
    if (expr != word) return false;
    out.kind = kind;
    out.var = std::string(word);
    return true;
  };
  if (special("$params", ProbeArg::Kind::kParams) || special("$vars", ProbeArg::Kind::kVars)) {
    if (typed) return Bad(text, StrCat(expr, " takes no type: each variable's comes from DWARF"));
    if (!out.name.empty()) return Bad(text, StrCat(expr, " takes no name: each variable is named after itself"));
    return out;
  }
  if (special("$retval", ProbeArg::Kind::kRetval)) {
    if (typed && !IsFetchType(type) && type != "u" && type != "s" && type != "x") {
      return Bad(text, StrCat("'", Excerpt(type, 80), "' is not a type kprobe_events reads"));
    }
    out.type = std::string(type);
    return out;
  }
  const size_t n = NameLength(expr);
  if (n == 0) {  // a register, a memory fetch, a symbol, an immediate, $comm...: the kernel's syntax
    out.kind = ProbeArg::Kind::kRaw;
    out.var = std::string(rest);
    return out;
  }
  out.kind = ProbeArg::Kind::kVariable;
  out.var = std::string(expr.substr(0, n));
  std::string_view f = expr.substr(n);
  while (!f.empty()) {
    if (out.fields.size() == kMaxProbeArgFields) return Bad(text, StrCat("more than ", kMaxProbeArgFields, " fields"));
    ProbeArgField field;
    if (f.starts_with("->") || f[0] == '.') {
      field.arrow = f[0] == '-';
      f.remove_prefix(field.arrow ? 2 : 1);
      const size_t m = NameLength(f);
      if (m == 0) return Bad(text, StrCat("expected a member name after '", field.arrow ? "->" : ".", "'"));
      field.member = std::string(f.substr(0, m));
      f.remove_prefix(m);
    } else if (f[0] == '[') {
      const size_t close = f.find(']');
      if (close == std::string_view::npos) return Bad(text, "'[' without ']'");
      std::string_view digits = f.substr(1, close - 1);
      uint64_t index = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) {
        return Bad(text, StrCat("'[", Excerpt(digits, 40), "]' is not an index (decimal digits)"));
      }
      field.index = index;
      f.remove_prefix(close + 1);
    } else {
      return Bad(text, StrCat("unexpected '", Excerpt(f, 40), "' after '",
                              Excerpt(expr.substr(0, expr.size() - f.size()), 80), "' (expected '->', '.' or '[N]')"));
    }
    out.fields.push_back(std::move(field));
  }
  if (typed) {
    if (type.empty()) return Bad(text, "nothing after ':'");
    if (!IsFetchType(type) && type != "u" && type != "s" && type != "x") {
      return Bad(text, StrCat("'", Excerpt(type, 80),
                              "' is not a type kprobe_events reads (u8..u64, s8..s64, "
                              "x8..x64, u, s, x, string, ustring, symbol, bW@O/C)"));
    }
    out.type = std::string(type);
  }
  return out;
}

absl::StatusOr<std::optional<std::vector<ProbeArg>>> ParseNamedProbeArgs(const std::vector<std::string>& texts) {
  std::vector<ProbeArg> args;
  bool named = false;
  for (const std::string& t : texts) {
    ASSIGN_OR_RETURN(ProbeArg p, ParseProbeArg(t));
    named = named || p.kind != ProbeArg::Kind::kRaw;
    args.push_back(std::move(p));
  }
  if (!named) return std::nullopt;
  return args;
}

}  // namespace symdex::ingest
