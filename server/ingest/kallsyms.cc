#include "server/ingest/kallsyms.h"

#include <cctype>

#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Splits off the next blank-separated field; empty when none is left.
std::string_view NextField(std::string_view& rest) {
  size_t i = 0;
  while (i < rest.size() && IsBlank(rest[i])) ++i;
  size_t j = i;
  while (j < rest.size() && !IsBlank(rest[j])) ++j;
  std::string_view field = rest.substr(i, j - i);
  rest.remove_prefix(j);
  return field;
}

}  // namespace

absl::StatusOr<std::vector<KernelSymbol>> ParseKallsyms(std::string_view text, std::string_view source) {
  std::vector<KernelSymbol> out;
  out.reserve(text.size() / 40);
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    auto fail = [&](std::string_view why) {
      return absl::InvalidArgumentError(StrCat(source, ":", line_no, ": ", why, ": '", Excerpt(line), "'"));
    };

    std::string_view rest = line;
    std::string_view addr = NextField(rest);
    if (addr.empty()) continue;  // blank line
    std::string_view type = NextField(rest);
    std::string_view name = NextField(rest);
    std::string_view module = NextField(rest);
    std::string_view extra = NextField(rest);

    KernelSymbol sym;
    auto a = ParseHex(addr, HexPrefix::kNone);
    if (!a) return fail("address is not 1-16 hex digits");
    sym.addr = *a;
    if (type.empty()) return fail("missing symbol type");
    if (type.size() != 1 || !std::isalpha(static_cast<unsigned char>(type[0]))) {
      return fail("symbol type is not a single letter");
    }
    sym.type = type[0];
    if (name.empty()) return fail("missing symbol name");
    for (char c : name) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return fail("symbol name contains a control character");
      }
    }
    sym.name = std::string(name);
    if (!module.empty()) {
      if (module.size() < 3 || module.front() != '[' || module.back() != ']') {
        return fail("expected a [module] tag after the name");
      }
      sym.module = std::string(module.substr(1, module.size() - 2));
    }
    if (!extra.empty()) return fail("unexpected text after the module tag");
    out.push_back(std::move(sym));
  }
  return out;
}

bool AllAddressesZero(const std::vector<KernelSymbol>& symbols) {
  if (symbols.empty()) return false;
  for (const auto& s : symbols) {
    if (s.addr != 0) return false;
  }
  return true;
}

bool IsPseudoModule(std::string_view module) { return module == "bpf" || module.starts_with("__builtin__"); }

}  // namespace symdex::ingest
