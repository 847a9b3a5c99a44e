#include "server/ingest/frame_text.h"

#include <vector>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

bool IsHexDigit(char c) { return HexDigitValue(c) >= 0; }

bool IsModuleName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;  // MODULE_NAME_LEN is 56
  for (char c : s) {
    if (!IsFrameSymbolChar(c) && c != '-') return false;
  }
  return true;
}

// "name+0xOFF" or "name+0xOFF/0xSIZE", possibly after "PREFIX:" (RIP: 0010:name+0x1c/0x40).
bool ParseSymbolOffset(std::string_view tok, FrameText& out) {
  if (size_t colon = tok.rfind(':'); colon != std::string_view::npos) tok.remove_prefix(colon + 1);
  size_t plus = tok.rfind("+0x");
  if (plus == std::string_view::npos || plus == 0 || plus > kMaxFrameSymbolLength) return false;
  std::string_view name = tok.substr(0, plus);
  for (char c : name) {
    if (!IsFrameSymbolChar(c)) return false;
  }
  std::string_view rest = tok.substr(plus + 1);
  std::string_view off = rest.substr(0, rest.find('/'));
  std::optional<uint64_t> o = ParseHex(off);
  if (!o) return false;
  std::optional<uint64_t> size;
  if (off.size() < rest.size()) {
    size = ParseHex(rest.substr(off.size() + 1));
    if (!size) return false;
  }
  out.symbol = std::string(name);
  out.offset = *o;
  out.size = size;
  return true;
}

// "(drivers/pnp/card.c:188)": CONFIG_KALLSYMS_LINEINFO's source of the frame, after the symbol
// and module. Not a perf DSO ("([kernel.kallsyms])", "(pnp)"): a path, a colon and a line number.
bool ParseSourceAnnotation(std::string_view tok, FrameText& out) {
  if (tok.size() < 5 || !tok.starts_with("(") || !tok.ends_with(")")) return false;
  std::string_view inner = tok.substr(1, tok.size() - 2);
  const size_t colon = inner.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == inner.size()) return false;
  std::string_view file = inner.substr(0, colon), line = inner.substr(colon + 1);
  if (file.size() > kMaxFrameSourceLength || line.size() > 9 || file.starts_with("[")) return false;
  uint32_t n = 0;
  for (char c : line) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  for (char c : file) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '(' || c == ')' || c == 0x7f) return false;
  }
  out.source_file = std::string(file);
  out.source_line = n;
  return true;
}

}  // namespace

absl::StatusOr<FrameText> ParseFrameText(std::string_view line) {
  if (line.size() > kMaxFrameLineLength) {
    return absl::InvalidArgumentError(
        StrCat("frame line is ", line.size(), " bytes; the limit is ", kMaxFrameLineLength));
  }
  std::vector<std::string_view> toks;
  for (std::string_view t : Split(line, ' ', true)) {
    for (std::string_view u : Split(t, '\t', true)) toks.push_back(StripWhitespace(u));
  }
  FrameText out;
  bool have_symbol = false;
  for (size_t i = 0; i < toks.size(); ++i) {
    std::string_view t = toks[i];
    if (t.empty()) continue;
    if (!have_symbol && t == "?") {
      out.unreliable = true;
      continue;
    }
    // [<ffffffff8123abcd>]
    if (t.starts_with("[<") && t.ends_with(">]")) {
      if (!out.address) out.address = ParseHex(t.substr(2, t.size() - 4));
      continue;
    }
    if (!have_symbol && ParseSymbolOffset(t, out)) {
      have_symbol = true;
      // What follows the symbol: [mod], [mod BUILDID], ([kernel.kallsyms]) or (mod) as perf prints.
      if (i + 1 < toks.size()) {
        std::string_view m = toks[i + 1];
        if (m.size() >= 2 && m.starts_with("(") && m.ends_with(")")) {
          std::string_view inner = m.substr(1, m.size() - 2);
          if (inner.size() >= 2 && inner.starts_with("[") && inner.ends_with("]")) {
            inner = inner.substr(1, inner.size() - 2);
          }
          if (inner == "kernel.kallsyms") {
            ++i;
          } else if (IsModuleName(inner)) {
            out.module = std::string(inner);
            ++i;
          }
        } else if (m.starts_with("[") && !m.starts_with("[<")) {
          std::string_view inner = m.substr(1);
          std::string_view id;
          bool closed = inner.ends_with("]");
          if (closed) {
            inner.remove_suffix(1);
          } else if (i + 2 < toks.size() && toks[i + 2].ends_with("]")) {
            id = toks[i + 2].substr(0, toks[i + 2].size() - 1);
            closed = true;
          }
          if (closed && (inner == "kernel.kallsyms" || IsModuleName(inner))) {
            if (inner != "kernel.kallsyms") out.module = std::string(inner);
            bool id_ok = !id.empty() && id.size() % 2 == 0 && id.size() <= 128;
            for (char c : id) id_ok = id_ok && IsHexDigit(c);
            if (id_ok) {
              out.module_build_id.reserve(id.size());
              for (char c : id) out.module_build_id.push_back(static_cast<char>(c | 0x20));
            }
            i += id.empty() ? 1 : 2;
          }
        }
      }
      if (i + 1 < toks.size() && ParseSourceAnnotation(toks[i + 1], out)) ++i;
      continue;
    }
    // A bare address: 0x-prefixed, or 8+ hex digits (a log's "[   12.3456]" is not one).
    if (!out.address && !have_symbol && (t.starts_with("0x") || t.size() >= 8)) {
      if (std::optional<uint64_t> a = ParseHex(t)) out.address = a;
    }
  }
  if (!out.address && !have_symbol) {
    return absl::InvalidArgumentError(
        StrCat("'", Excerpt(line, 80), "' is not a frame: expected an address or symbol+0xOFF[/0xSIZE] [module]"));
  }
  return out;
}

}  // namespace symdex::ingest
