// The one definition of which kernel symbol types name code. Two sets, on purpose, each kept
// here once (C++ predicate and the SQL list built from the same letters):
//  - text symbols, t/T: what nm calls text; what `status` counts, `symbols` lists and `dups`
//    compares (so the counts match nm and kas_alias);
//  - code symbols, t/T/w/W/i: text plus weak definitions and indirect functions, which also
//    name functions: these are joined to DWARF and can hold an address (`addr`).
#pragma once

#include <string>
#include <string_view>

namespace symdex {

inline constexpr std::string_view kTextSymbolTypes = "tT";
inline constexpr std::string_view kCodeSymbolTypes = "tTwWi";

constexpr bool IsTextSymbolType(char type) { return kTextSymbolTypes.find(type) != std::string_view::npos; }
constexpr bool IsCodeSymbolType(char type) { return kCodeSymbolTypes.find(type) != std::string_view::npos; }

// "('t','T')": the letters as an SQL list, for "type IN <list>".
inline std::string SqlTypeList(std::string_view types) {
  std::string out = "(";
  for (char c : types) {
    if (out.size() > 1) out += ',';
    out += '\'';
    out += c;
    out += '\'';
  }
  return out + ")";
}

}  // namespace symdex
