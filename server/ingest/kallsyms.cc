#include "server/ingest/kallsyms.h"

#include <cctype>
#include <map>

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

// Every line of `text` into `out`; with `dropped` (a System.map), the lines scripts/kallsyms
// drops are counted there instead, before their names are judged.
absl::Status ParseLines(std::string_view text, std::string_view source, std::vector<KernelSymbol>& out,
                        std::map<std::string, size_t>* dropped) {
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
    if (dropped != nullptr && module.empty()) {
      if (const char* rule = KallsymsIgnoreRule(name, sym.type)) {
        ++(*dropped)[rule];
        continue;
      }
    }
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
  std::map<std::string, size_t> dropped;
  RETURN_IF_ERROR(ParseLines(text, source, out.symbols, &dropped));
  out.dropped.assign(dropped.begin(), dropped.end());
  return out;
}

size_t SystemMapSymbols::DroppedTotal() const {
  size_t n = 0;
  for (const auto& [rule, count] : dropped) n += count;
  return n;
}

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
  if (name.starts_with("$")) return "mapping symbols ($x, $d)";
  if (name.starts_with(".L")) return "local labels (.L)";
  for (std::string_view p : {"__crc_", "__kstrtab_", "__kstrtabns_"}) {
    if (name.starts_with(p)) return "export table entries (__crc_, __kstrtab_)";
  }
  if (name == "L0") return "local labels (.L)";
  return nullptr;
}

bool IsMappingSymbol(std::string_view name) {
  if (name.starts_with(".L")) return true;
  return name.size() >= 2 && name[0] == '$' && std::string_view("axtd").find(name[1]) != std::string_view::npos &&
         (name.size() == 2 || name[2] == '.');
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
