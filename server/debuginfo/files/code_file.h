// The machine code of a kernel's vmlinux or module file as it was linked — before the kernel
// patched alternatives and static calls at boot — read to check the call before a return
// address (query/frames.cc: which copy of a duplicated name a stack frame is) and to find every
// direct call and jump to one function (query/call_evidence.h: its callers). Debian's -dbg files
// keep their code (PROGBITS .text); files from `objcopy --only-keep-debug` do not (NOBITS), and
// then nothing can be checked: NotFound says so.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/elf_handle.h"
#include "server/common/mapped_file.h"
#include "server/common/status.h"
#include "server/ingest/call_insn.h"

namespace symdex::debuginfo {

struct CallSite {
  ingest::CallInsn insn;
  // A direct call's callee. Linked file: `target` is its address. Relocatable (a module): the
  // relocation of the call's operand says it — `target` is an offset into `target_section` of this
  // file, or the call goes to another file's `target_symbol` (target_section "").
  std::optional<uint64_t> target;
  std::string target_section;
  std::string target_symbol;
};

// A direct call or jump found in a file's code.
struct Branch {
  std::string section;  // the code section holding it (a relocatable file's; a linked file's too)
  uint64_t at = 0;      // its first byte: an address for a linked file, an offset into `section` otherwise
  bool call = false;    // a call; otherwise a jump (a tail call when it leaves its function)
};

class CodeFile {
 public:
  // NotFound / InvalidArgument naming the path: not readable, not ELF, neither x86-64 nor AArch64.
  static absl::StatusOr<std::unique_ptr<CodeFile>> Open(const std::string& path);

  bool relocatable() const { return relocatable_; }

  // The call instruction that ends at `at`: an address for a linked file (`section` ignored), an
  // offset into `section` for a relocatable one. nullopt: no call ends there. NotFound: `at` is in
  // no code section whose bytes the file holds.
  absl::StatusOr<std::optional<CallSite>> CallBefore(std::string_view section, uint64_t at);

  // The code bytes from `at` on, at most `len` of them (fewer at the section's end): `at` an
  // address for a linked file (`section` ignored), an offset into `section` for a relocatable one.
  // NotFound as for CallBefore.
  absl::StatusOr<std::span<const uint8_t>> Code(std::string_view section, uint64_t at, uint64_t len) const;
  uint16_t machine() const { return machine_; }

  // Every direct call and jump in the file's code whose destination is `to` (an address for a
  // linked file, `section` ignored; an offset into `section` for a relocatable one, whose calls
  // say their destination by relocation where they have one). Each function is decoded from its
  // symbol's start (x86-64: instruction by instruction, as the kernel decodes a probe's function),
  // so a branch is never read from the middle of another instruction. A call into another file (an
  // undefined symbol) is not `to`.
  absl::StatusOr<std::vector<Branch>> BranchesTo(std::string_view section, uint64_t to);

 private:
  CodeFile(MappedFile map) : map_(std::move(map)) {}
  struct Section {
    std::string name;
    uint64_t addr = 0, size = 0, offset = 0;
    bool code = false;
    size_t index = 0;
  };
  struct Reloc {
    uint64_t offset;
    uint32_t sym;
    uint32_t type;
    int64_t addend;
  };
  const std::vector<Reloc>& RelocsFor(size_t section_index);
  // The relocation of `section_index` at `offset` of one of `types`, nullptr when none.
  const Reloc* RelocAt(size_t section_index, uint64_t offset, std::initializer_list<uint32_t> types);
  // Where the relocation `r` points plus `extra`: (section index, offset), or an undefined
  // symbol's name (section 0) when `extra` + addend is 0; nullopt when it cannot be read.
  struct RelocDest {
    size_t section = 0;
    uint64_t offset = 0;
    std::string symbol;  // the symbol it names ("" = a section symbol)
  };
  std::optional<RelocDest> DestOf(const Reloc& r, int64_t extra);
  // The function symbols' offsets into each code section, sorted (by section index).
  std::map<size_t, std::vector<uint64_t>> FunctionStarts();
  // The code section holding `at` (as CallBefore and Code take it) and `at`'s offset into it:
  // code ending at `at` when `ending`, starting there otherwise. NotFound naming what is missing.
  absl::StatusOr<std::pair<const Section*, uint64_t>> CodeAt(std::string_view section, uint64_t at, bool ending) const;

  MappedFile map_;
  ElfPtr elf_;
  bool relocatable_ = false;
  uint16_t machine_ = 0;
  std::vector<Section> sections_;
  std::map<size_t, std::vector<Reloc>> relocs_;  // by the section they apply to, sorted by offset
  size_t symtab_ = 0;                            // section index of .symtab (0: none)
};

}  // namespace symdex::debuginfo
