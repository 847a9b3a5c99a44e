// Writes the `jitted-<pid>-<code_index>.so` ELF file perf's genelf.c (jit_write_elf) makes for one
// jitdump CODE_LOAD, with a build-ID of the caller's choice, plus DWARF line info when the load
// had DEBUG_INFO. Pure: bytes out, no I/O.
//
// Layout (ELF64, the dump's byte order is not needed: only x86-64/aarch64 little-endian hosts):
//   0x00  Elf64_Ehdr           ET_DYN, e_entry = 0x80, e_machine from the dump
//   0x40  Elf64_Phdr[1]        PT_LOAD R+X, offset = vaddr = 0x80, filesz = memsz = code size,
//                              align 8 -- exactly genelf's one program header (a second one,
//                              e.g. PT_NOTE, would not fit before .text at 0x80)
//   0x80  .text                the code (SHF_ALLOC|SHF_EXECINSTR, sh_addr 0x80, align 16)
//         .shstrtab
//         .symtab              null symbol + one STT_FUNC/STB_LOCAL, st_shndx 1, st_value 0x80
//         .strtab              "\0" name "\0"
//         .note.gnu.build-id   "GNU\0", NT_GNU_BUILD_ID, the chosen 20 (or 16+4) bytes
//         .debug_line          DWARF 2 line program, one sequence [0x80, 0x80 + size)   } only
//         .debug_info          one DWARF 2 CU (name, stmt_list, low/high pc) with one   } with
//                              DW_TAG_subprogram (the function name, its pc range)      } lines
//         .debug_abbrev                                                                 }
//         .debug_aranges       the CU's range (elfutils 0.188 finds CUs only through it)    }
//   section headers (8-aligned) at the end.
// perf's genelf_debug.c emits an empty file table and DW_LNE_define_file per file, and a CU with
// only DW_AT_stmt_list; here the files are in the header's file table (DW_LNE_define_file is
// gone from DWARF 5 and not every reader handles it) and the CU has a pc range and a subprogram,
// so llvm-symbolizer and eu-addr2line find both the function and the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/jit_records.h"
#include "server/common/status.h"

namespace symdex::jit {

inline constexpr uint64_t kJitElfTextOffset = 0x80;  // GEN_ELF_TEXT_OFFSET on ELF64

struct JitElfInput {
  uint16_t machine = 62;  // EM_X86_64
  std::string_view name;
  std::string_view code;
  BuildId build_id;
  std::vector<JitCodeLine> lines;  // any order; entries outside the code are dropped
};

// The machines the layout above is right for (EM_X86_64, EM_AARCH64: little-endian ELF64).
inline bool JitElfSupportsMachine(uint32_t e_machine) { return e_machine == 62 || e_machine == 183; }

// Errors: a build-ID that is not 1..64 bytes, a name with a NUL byte.
absl::StatusOr<std::string> WriteJitElf(const JitElfInput& in);

}  // namespace symdex::jit
