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

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// A module name as the kernel prints it inside "[...]": non-empty, no blanks or control bytes.
bool IsModuleName(std::string_view m) {
  if (m.empty()) return false;
  for (char c : m) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '[' || c == ']') return false;
  }
  return true;
}

// NAME[<blank>[MODULE]] after the type: the name and the module ("" = vmlinux), or why not.
// The kernel's module form is NAME\t[MODULE], the name being every byte before that tab;
// nm's and a hand-written file's are blank-separated fields, the name one of them.
const char* SplitNameAndModule(std::string_view rest, std::string_view& name, std::string_view& module) {
  rest = TrimBlanks(rest);
  if (rest.empty()) return "missing symbol name";
  if (rest.back() == ']') {
    const size_t open = rest.rfind('[');
    if (open == 0) return "missing symbol name";
    // A ']' with no '[' before it is the name's own last byte, not a tag.
    if (open != std::string_view::npos && IsBlank(rest[open - 1])) {
      module = rest.substr(open + 1, rest.size() - open - 2);
      if (!IsModuleName(module)) return "expected a [module] tag after the name";
      // s_show's "%s\t[%s]": every byte before the tab is the name's, blanks too; with blanks
      // for the tab (a copy that expanded it), those before the tag are not.
      name = rest[open - 1] == '\t' ? rest.substr(0, open - 1) : TrimBlanks(rest.substr(0, open));
      if (name.empty()) return "missing symbol name";
      return nullptr;
    }
  }
  // No module tag at the end: one that does not close, or the name is the one field left.
  const size_t last_blank = rest.find_last_of(" \t");
  if (last_blank != std::string_view::npos && rest[last_blank + 1] == '[') return "the [module] tag does not close";
  std::string_view fields = rest;
  name = NextField(fields);
  std::string_view next = NextField(fields);
  if (next.empty()) return nullptr;
  if (next.front() != '[') return "expected a [module] tag after the name";
  return next.back() == ']' ? "unexpected text after the module tag" : "expected a [module] tag after the name";
}

// Every line of `text` into `out`; with `dropped` (a System.map), the lines scripts/kallsyms
// drops are counted there instead.
absl::Status ParseLines(std::string_view text, std::string_view source, std::vector<KernelSymbol>& out,
                        std::vector<DroppedSymbols>* dropped) {
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

    KernelSymbol sym;
    auto a = ParseHex(addr, HexPrefix::kNone);
    if (!a) return fail("address is not 1-16 hex digits");
    sym.addr = *a;
    if (type.empty()) return fail("missing symbol type");
    if (type.size() != 1 || !std::isalpha(static_cast<unsigned char>(type[0]))) {
      return fail("symbol type is not a single letter");
    }
    sym.type = type[0];
    // One blank after the type (the kernel's one space; nm's or a file's run of them).
    size_t skip = 0;
    while (skip < rest.size() && IsBlank(rest[skip])) ++skip;
    rest.remove_prefix(skip);
    std::string_view name, module;
    if (const char* why = SplitNameAndModule(rest, name, module)) return fail(why);
    if (name.find('\0') != std::string_view::npos) return fail("symbol name contains a NUL byte");
    if (dropped != nullptr && module.empty()) {
      if (const char* rule = KallsymsIgnoreRule(name, sym.type)) {
        CountDropped(*dropped, rule);
        continue;
      }
    }
    sym.name = std::string(name);
    sym.module = std::string(module);
    out.push_back(std::move(sym));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<KernelSymbol>> ParseKallsyms(std::string_view text, std::string_view source) {
  std::vector<KernelSymbol> out;
  RETURN_IF_ERROR(ParseLines(text, source, out, nullptr));
  return out;
}

absl::StatusOr<SystemMapSymbols> ParseSystemMap(std::string_view text, std::string_view source) {
  SystemMapSymbols out;
  RETURN_IF_ERROR(ParseLines(text, source, out.symbols, &out.dropped));
  return out;
}

size_t SystemMapSymbols::DroppedTotal() const { return symdex::DroppedTotal(dropped); }

const char* KallsymsIgnoreRule(std::string_view name, char type) {
  // scripts/kallsyms.c (6.1) is_ignored_symbol, in its order; scripts/mksysmap has already left
  // out what System.map never lists (types a N U w, names starting with $ or .L, __crc_, ...).
  static constexpr std::string_view kNames[] = {
      "kallsyms_addresses",   "kallsyms_offsets",     "kallsyms_relative_base",
      "kallsyms_num_syms",    "kallsyms_names",       "kallsyms_markers",
      "kallsyms_token_table", "kallsyms_token_index", "kallsyms_seqs_of_names",
      "_SDA_BASE_",           "_SDA2_BASE_"};
  struct Prefix {
    std::string_view prefix;
    const char* rule;
  };
  static constexpr Prefix kPrefixes[] = {{"__efistub_", "arm64 EFI stub aliases (__efistub_)"},
                                         {"__kvm_nvhe_$", "arm64 hypervisor mapping symbols (__kvm_nvhe_$)"},
                                         {"__kvm_nvhe_.L", "arm64 hypervisor local labels (__kvm_nvhe_.L)"},
                                         {"__AArch64ADRPThunk_", "linker thunks"},
                                         {"__ARMV5PILongThunk_", "linker thunks"},
                                         {"__ARMV7PILongThunk_", "linker thunks"},
                                         {"__ThumbV7PILongThunk_", "linker thunks"},
                                         {"__LA25Thunk_", "linker thunks"},
                                         {"__microLA25Thunk_", "linker thunks"},
                                         {"__kcfi_typeid_", "CFI type identifiers (__kcfi_typeid_)"}};
  static constexpr std::string_view kSuffixes[] = {"_from_arm", "_from_thumb", "_veneer"};
  static constexpr std::string_view kInside[] = {".long_branch.", ".plt_branch."};
  for (std::string_view n : kNames) {
    if (name == n) return "the kallsyms tables' own symbols";
  }
  for (const Prefix& p : kPrefixes) {
    if (name.starts_with(p.prefix)) return p.rule;
  }
  for (std::string_view s : kSuffixes) {
    if (name.ends_with(s)) return "arm veneers";
  }
  for (std::string_view m : kInside) {
    if (name.find(m) != std::string_view::npos) return "ppc branch stubs";
  }
  if (type == 'U' || type == 'u') return "undefined symbols";
  if (type == 'N' || type == 'n') return "debugging symbols";
  if (type == 'A' || type == 'a') {
    for (std::string_view keep :
         {"__kernel_syscall_via_break", "__kernel_syscall_via_epc", "__kernel_sigtramp", "__gp"}) {
      if (name == keep) return nullptr;
    }
    return "absolute symbols";
  }
  return nullptr;
}

const char* MksysmapIgnoreRule(std::string_view name, char type) {
  if (type == 'a' || type == 'N' || type == 'U' || type == 'w') return "symbols System.map never lists (nm a N U w)";
  if (name.starts_with("$")) return kMappingSymbolsRule;
  if (name.starts_with(".L")) return kLocalLabelsRule;
  for (std::string_view p : {"__crc_", "__kstrtab_", "__kstrtabns_"}) {
    if (name.starts_with(p)) return "export table entries (__crc_, __kstrtab_)";
  }
  if (name == "L0") return kLocalLabelsRule;
  return nullptr;
}

const char* ModuleSymbolIgnoreRule(std::string_view name) {
  // 6.12 include/linux/module_symbol.h is_mapping_symbol: ".L" and "L0" prefixes, any "$".
  if (name.starts_with(".L") || name.starts_with("L0")) return kLocalLabelsRule;
  if (name.starts_with("$")) return kMappingSymbolsRule;
  return nullptr;
}

bool IsMappingSymbol(std::string_view name) { return ModuleSymbolIgnoreRule(name) != nullptr; }

bool AllAddressesZero(const std::vector<KernelSymbol>& symbols) {
  if (symbols.empty()) return false;
  for (const auto& s : symbols) {
    if (s.addr != 0) return false;
  }
  return true;
}

bool IsPseudoModule(std::string_view module) { return module == "bpf" || module.starts_with("__builtin__"); }

}  // namespace symdex::ingest
