// Reads the symbol table of an ELF image held in memory (a vmlinux, or a kernel module .ko, i.e.
// ET_REL, whose symbol values are offsets into their section). Uses libelf; every Elf* is
// owned by an RAII handle. Pure: bytes in, records out.
//
// Type letters follow nm(1) so results compare directly with `nm` and with kallsyms:
//   T/t code, D/d data, B/b bss, R/r read-only, A/a absolute, W/V weak (defined), u unique,
//   i ifunc, N other non-alloc. Lower case = local binding. Undefined, section and file
//   symbols are left out, as nm and kallsyms leave them out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/status.h"

namespace symdex::ingest {

struct ElfSymbol {
  std::string name;
  uint64_t value = 0;  // ET_REL: offset in `section`; otherwise a virtual address
  uint64_t size = 0;
  char type = '?';
  std::string section;    // ".text", ".init.text", ... ("*ABS*" for absolute)
  bool function = false;  // STT_FUNC or STT_GNU_IFUNC (the letter does not say: assembly labels are 't' too)
};

struct ElfSymbolTable {
  bool relocatable = false;         // ET_REL (kernel modules)
  std::optional<BuildId> build_id;  // from the first SHT_NOTE holding NT_GNU_BUILD_ID
  std::string modinfo_name;         // "name=" from .modinfo, empty when absent
  std::string modinfo_vermagic;     // "vermagic=" from .modinfo (its first word is the release)
  std::vector<ElfSymbol> symbols;
};

// `image` must stay alive and unmodified during the call; libelf reads it in place.
absl::StatusOr<ElfSymbolTable> ReadElfSymbols(std::string& image);
// The same over `size` bytes at `data` (a private mapping of a large debug file: libelf then
// touches only the headers, the symbol and string tables and the notes).
absl::StatusOr<ElfSymbolTable> ReadElfSymbols(char* data, size_t size);

}  // namespace symdex::ingest
