// The ELF symbol table of a debug file on disk (a debug vmlinux of ~600 MB, a module's .ko):
// the file is mapped, not read, so only the pages libelf touches (headers, .symtab, .strtab,
// notes) are loaded; the parsing itself is ingest::ReadElfSymbols (pure, bounds-checked).
#pragma once

#include <string>

#include "server/common/status.h"
#include "server/ingest/elf_symbols.h"

namespace symdex::debuginfo {

absl::StatusOr<ingest::ElfSymbolTable> ReadSymtabFile(const std::string& path);

}  // namespace symdex::debuginfo
