#include "server/ingest/kprobe_fetch.h"

#include <charconv>
#include <optional>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

absl::Status BadFetch(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(StrCat("fetch arg '", Excerpt(text, 200), "': ", why));
}

absl::Status NotTranslated(std::string_view text, std::string_view what) {
  return absl::FailedPreconditionError(
      StrCat("fetch arg '", Excerpt(text, 200), "': ", what, " has no translation into another tracer's program"));
}

bool IsFetchNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsFetchNameChar(char c) { return IsFetchNameStart(c) || (c >= '0' && c <= '9'); }

// An unsigned number as the kernel's kstrtoul(s, 0) reads it: 0x hex, a leading 0 octal, else
// decimal; the whole of `s`.
std::optional<uint64_t> FetchNumber(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A signed offset "+N" / "-N" (the sign required); nullopt when malformed or past int64.
std::optional<int64_t> SignedOffset(std::string_view s) {
  if (s.size() < 2 || (s[0] != '+' && s[0] != '-')) return std::nullopt;
  auto n = FetchNumber(s.substr(1));
  if (!n || *n > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return s[0] == '-' ? -static_cast<int64_t>(*n) : static_cast<int64_t>(*n);
}

bool IsFetchName(std::string_view s) {
  if (s.empty() || !IsFetchNameStart(s[0])) return false;
  for (char c : s) {
    if (!IsFetchNameChar(c)) return false;
  }
  return true;
}

// A kernel symbol as kprobe_events takes it after '@': a C name, or a name with '.' (a
// compiler's `foo.constprop.0`).
bool IsFetchSymbol(std::string_view s) {
  if (s.empty() || !IsFetchNameStart(s[0])) return false;
  for (char c : s) {
    if (!IsFetchNameChar(c) && c != '.') return false;
  }
  return true;
}

absl::Status ParseType(std::string_view text, std::string_view t, KprobeFetch& out) {
  if (t.find('[') != std::string_view::npos) return NotTranslated(text, "an array type");
  if (t == "string") {
    out.kind = KprobeFetch::Kind::kString;
    return absl::OkStatus();
  }
  if (t == "ustring") {
    out.kind = KprobeFetch::Kind::kUserString;
    return absl::OkStatus();
  }
  if (t == "symbol" || t == "symstr") {
    out.kind = KprobeFetch::Kind::kSymbol;
    out.symstr = t == "symstr";
    out.hex = true;
    return absl::OkStatus();
  }
  auto width = [](std::string_view w) -> unsigned {
    if (w == "8") return 8;
    if (w == "16") return 16;
    if (w == "32") return 32;
    if (w == "64") return 64;
    return 0;
  };
  if (t.size() >= 2 && (t[0] == 'u' || t[0] == 's' || t[0] == 'x')) {
    if (unsigned w = width(t.substr(1))) {
      out.kind = KprobeFetch::Kind::kInteger;
      out.bits = w;
      out.is_signed = t[0] == 's';
      out.hex = t[0] == 'x';
      return absl::OkStatus();
    }
  }
  if (t.size() >= 6 && t[0] == 'b') {
    const size_t at = t.find('@'), slash = t.find('/');
    if (at != std::string_view::npos && slash != std::string_view::npos && at < slash) {
      auto w = FetchNumber(t.substr(1, at - 1));
      auto o = FetchNumber(t.substr(at + 1, slash - at - 1));
      const unsigned c = width(t.substr(slash + 1));
      if (w && o && c && *w >= 1 && *w + *o <= c) {
        out.kind = KprobeFetch::Kind::kBitfield;
        out.bits = c;
        out.bit_width = static_cast<unsigned>(*w);
        out.bit_offset = static_cast<unsigned>(*o);
        out.hex = false;
        return absl::OkStatus();
      }
    }
    return BadFetch(text, StrCat("bitfield type '", Excerpt(t, 40), "': expected bWIDTH@OFFSET/CONTAINER"));
  }
  return BadFetch(text, StrCat("unknown type '", Excerpt(t, 40), "'"));
}

// FETCH at `s`, the reads nested in it appended innermost first.
absl::Status ParseFetch(std::string_view text, std::string_view s, KprobeFetch& out, int depth) {
  if (s.empty()) return BadFetch(text, "nothing to fetch");
  if (s[0] == '+' || s[0] == '-') {
    if (depth >= static_cast<int>(kMaxKprobeFetchReads)) {
      return BadFetch(text, StrCat("more than ", kMaxKprobeFetchReads, " nested reads"));
    }
    const size_t open = s.find('(');
    if (open == std::string_view::npos || s.back() != ')') return BadFetch(text, "expected +OFFS(FETCH)");
    std::string_view off = s.substr(0, open);  // "+8", "-8", "+u8"
    const bool user = off.size() > 1 && off[1] == 'u';
    const std::string signed_text = StrCat(off.substr(0, 1), off.substr(user ? 2 : 1));
    auto o = SignedOffset(signed_text);
    if (!o) return BadFetch(text, StrCat("offset '", Excerpt(s.substr(0, open), 40), "' is not a number"));
    RETURN_IF_ERROR(ParseFetch(text, s.substr(open + 1, s.size() - open - 2), out, depth + 1));
    out.reads.push_back({.offset = *o, .user = user});
    return absl::OkStatus();
  }
  if (s[0] == '%') {
    std::string_view r = s.substr(1);
    if (!IsFetchName(r)) return BadFetch(text, StrCat("register '", Excerpt(r, 40), "' is not a name"));
    out.source = KprobeFetch::Source::kRegister;
    out.reg = std::string(r);
    return absl::OkStatus();
  }
  if (s[0] == '@') {
    std::string_view a = s.substr(1);
    if (auto n = FetchNumber(a)) {
      out.source = KprobeFetch::Source::kAddress;
      out.number = *n;
    } else {
      const size_t sign = a.find_first_of("+-");
      std::string_view sym = a.substr(0, sign);
      if (!IsFetchSymbol(sym))
        return BadFetch(text, StrCat("'@", Excerpt(a, 40), "': expected @SYMBOL[+|-OFFS] or @ADDR"));
      out.source = KprobeFetch::Source::kSymbol;
      out.symbol = std::string(sym);
      if (sign != std::string_view::npos) {
        auto o = SignedOffset(a.substr(sign));
        if (!o) return BadFetch(text, StrCat("'@", Excerpt(a, 40), "': the offset is not a number"));
        out.offset = *o;
      }
    }
    out.reads.push_back({});
    return absl::OkStatus();
  }
  if (s[0] == '\\') {
    std::string_view imm = s.substr(1);
    if (!imm.empty() && imm[0] == '"') return NotTranslated(text, "a string immediate");
    bool negative = !imm.empty() && imm[0] == '-';
    auto n = FetchNumber(negative ? imm.substr(1) : imm);
    if (!n) return BadFetch(text, StrCat("immediate '", Excerpt(imm, 40), "' is not a number"));
    out.source = KprobeFetch::Source::kImmediate;
    out.number = negative ? ~*n + 1 : *n;
    return absl::OkStatus();
  }
  if (s[0] == '$') {
    std::string_view v = s.substr(1);
    if (v == "retval") {
      out.source = KprobeFetch::Source::kRetval;
    } else if (v == "comm") {
      out.source = KprobeFetch::Source::kComm;
    } else if (v == "stack") {
      out.source = KprobeFetch::Source::kStack;
    } else if (v.starts_with("stack") && v.size() > 5 && v[5] >= '0' && v[5] <= '9' && FetchNumber(v.substr(5))) {
      out.source = KprobeFetch::Source::kStackEntry;
      out.number = *FetchNumber(v.substr(5));
    } else if (v.starts_with("arg") && v.size() > 3 && v[3] >= '1' && v[3] <= '9' && FetchNumber(v.substr(3))) {
      out.source = KprobeFetch::Source::kArg;
      out.number = *FetchNumber(v.substr(3));
    } else if (IsFetchName(v)) {
      return NotTranslated(text, StrCat("'$", v, "'"));
    } else {
      return BadFetch(text, StrCat("'$", Excerpt(v, 40), "' is not a fetch variable"));
    }
    return absl::OkStatus();
  }
  if (IsFetchNameStart(s[0])) return NotTranslated(text, "a bare name (a tracepoint field or a BTF argument)");
  return BadFetch(text, StrCat("cannot read '", Excerpt(s, 40), "'"));
}

}  // namespace

absl::StatusOr<KprobeFetch> ParseKprobeFetch(std::string_view text, size_t position) {
  KprobeFetch out;
  out.text = std::string(text);
  std::string_view s = text;
  // NAME= ends at the first '=' when what comes before it is a name.
  if (size_t eq = s.find('='); eq != std::string_view::npos && IsFetchName(s.substr(0, eq))) {
    out.name = std::string(s.substr(0, eq));
    s.remove_prefix(eq + 1);
  } else {
    out.name = StrCat("arg", position);
  }
  // :TYPE after the last ')' (offsets and names hold no ':').
  const size_t close = s.rfind(')');
  const size_t colon = s.find(':', close == std::string_view::npos ? 0 : close);
  std::string_view fetch = s.substr(0, colon);
  RETURN_IF_ERROR(ParseFetch(text, fetch, out, 0));
  if (out.source == KprobeFetch::Source::kComm) out.kind = KprobeFetch::Kind::kString;
  if (colon != std::string_view::npos) {
    std::string_view type = s.substr(colon + 1);
    if (out.source == KprobeFetch::Source::kComm && (type == "string" || type == "ustring")) return out;
    if (out.source == KprobeFetch::Source::kComm) return BadFetch(text, "$comm is a string");
    RETURN_IF_ERROR(ParseType(text, type, out));
  }
  return out;
}

std::vector<std::string> KprobeLineFetchArgs(std::string_view line) {
  std::vector<std::string> words;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ' ' && !quoted) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  if (words.size() <= 2) return {};
  return {words.begin() + 2, words.end()};
}

}  // namespace symdex::ingest
