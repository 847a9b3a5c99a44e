// What a symbol's ELF symbol table entry says that kallsyms and System.map do not: whether it
// is a function (STT_FUNC / STT_GNU_IFUNC, as opposed to an assembly label, STT_NOTYPE) and
// whether it has a size. These decide which of several symbols at one address names it
// (store::AliasRank), as they do for llvm-symbolizer. Stored per symbol (symbols.elf_facts);
// absent when no ELF symbol table covered the symbol (no debug file, a kallsyms-only symbol).
#pragma once

#include <cstdint>

namespace symdex {

inline constexpr uint8_t kElfSized = 1;     // st_size > 0
inline constexpr uint8_t kElfFunction = 2;  // STT_FUNC or STT_GNU_IFUNC

constexpr uint8_t ElfFacts(bool function, uint64_t size) {
  return static_cast<uint8_t>((size > 0 ? kElfSized : 0) | (function ? kElfFunction : 0));
}

}  // namespace symdex
