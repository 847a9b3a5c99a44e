// Relocatable kernel modules (ET_REL .ko debug files) made readable as linked files.
//
// A module's DWARF refers to its code through relocations (.rela.debug_info, .rela.debug_line,
// ...) against section symbols: the bytes in the file hold only the addends. libdwfl lays the
// module's sections out at addresses of its own choosing and applies those relocations in
// memory; the DIE scanner and the line reader (die_scanner.h, line_table.h) read linked files
// only. So symdex does what libdwfl does, itself, into a copy:
//
//   layout   libdwfl 0.188's offline layout (__libdwfl_elf_address_range, base 0x10000):
//            SHF_ALLOC sections (NOBITS too) in section-header order, each at the end of the
//            one before rounded up to its sh_addralign (0 counts as 1); a section needing more
//            alignment than the base has moves the base up and starts the layout again; a
//            section whose sh_addr is already set keeps it where the running end is aligned
//            for it (arm64's __patchable_function_entries, sh_addr 0x60, in most modules).
//   relocate each SHT_RELA section whose target is a DWARF section (libebl's list of names):
//            value = symbol value + the layout address of the symbol's section when that
//            section is SHF_ALLOC (0 for STN_UNDEF and non-ALLOC sections, st_value alone for
//            SHN_ABS) + addend, written as 8 or 4 little-endian bytes; R_*_NONE skipped.
//   copy     an unlinked temporary file (as plain_elf.h's) holding the file with those
//            sections relocated, the SHT_RELA sections applied zeroed (R_*_NONE entries, as
//            libdwfl elides what it applied; left as holes, not copied), each SHF_ALLOC
//            section's sh_addr set to its layout address, each symbol of such a section shifted
//            by it, and e_type ET_EXEC: what a linked file looks like to every reader, at the
//            addresses libdwfl would give.
//
// What is relocated is exactly libdwfl's where symdex relocates at all; anything else is
// declined (FailedPrecondition naming the file and the reason; the caller then reads the file
// through libdwfl): a machine other than x86-64 or AArch64, big-endian or 32-bit files, SHT_REL
// or an unknown relocation type against a DWARF section (x86-64: R_X86_64_64 and _32; AArch64:
// R_AARCH64_ABS64 and _32, the only ones Debian's modules use), an undefined, common, TLS or
// extended-index symbol, a symbol table libdwfl refuses (and with it the module's DWARF),
// overlapping sections, a layout libdwfl would bias, and on AArch64 an absolute relocation
// into code (libdwfl relocates code too, and the patchable-entry NOPs read there would be its
// relocated bytes). Every offset and size read from the file is checked against the file before
// use; nothing is allocated from a size the file declares beyond a section the file holds.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"
#include "server/common/unique_fd.h"

namespace symdex::debuginfo {

// SYMDEX_MODULES_VIA=libdwfl in the environment: modules are read through libdwfl as before
// (their index and address map), not relocated by symdex. The whole-corpus comparison's way to
// build both, and an escape hatch.
bool ModulesViaLibdwflForced();

// An SHF_ALLOC section of a module where libdwfl's layout puts it.
struct LaidOutSection {
  std::string name;
  uint32_t index = 0;  // in the section header table
  uint64_t start = 0, end = 0;
};

// The module's sections as dwfl_module_relocate_address sees them: sorted by start (ties in
// section-header order, as glibc's merge sort leaves libdwfl's qsort), looked up by its binary
// search, in which an address equal to a section's end stays in that section unless the next
// section starts there.
class SectionLayout {
 public:
  SectionLayout() = default;
  explicit SectionLayout(std::vector<LaidOutSection> in_header_order);

  const std::vector<LaidOutSection>& sections() const { return sections_; }
  // The index into sections() holding `addr`, and its offset there; nullopt when none does.
  std::optional<size_t> Find(uint64_t addr, uint64_t* offset) const;
  // (section name, offset) of `addr`.
  std::optional<std::pair<std::string_view, uint64_t>> Map(uint64_t addr) const;

 private:
  std::vector<LaidOutSection> sections_;
};

// A region of the file: [begin, end) in file offsets.
struct FileRegion {
  uint64_t begin = 0, end = 0;
};

// What RelocateImage found out before relocating anything: everything checked but the
// relocation entries themselves.
struct RelocationPlan {
  SectionLayout layout;
  // Regions of the file the copy holds new bytes for (ApplyRelocation writes each whole): the
  // ELF header, the section headers, the symbol table, each relocated DWARF section.
  std::vector<FileRegion> rewritten;
  // The SHT_RELA sections applied: zero bytes in the copy (R_*_NONE entries), as libdwfl
  // elides the relocations it has applied.
  std::vector<FileRegion> zeroed;

  // Implementation: what ApplyRelocation reads.
  struct Target {
    uint32_t index = 0;
    std::vector<uint32_t> relas;  // in section-header order
  };
  std::vector<Target> targets;
  std::vector<uint64_t> addresses;  // by section index: the layout address of SHF_ALLOC ones
  uint32_t symtab = 0;
  uint16_t machine = 0;
};

// Reads and checks the ET_REL image `in` (`name` for messages): its headers, its layout, its
// symbol table, which sections are relocated by which. FailedPrecondition when declined.
absl::StatusOr<RelocationPlan> PlanRelocation(std::string_view in, std::string_view name);

// Writes `bytes` at `offset` of the copy.
using ImageWriter = std::function<absl::Status(uint64_t offset, std::string_view bytes)>;

// Applies `plan` to `in`: writes each region of plan.rewritten through `write`. The copy is `in`
// with plan.zeroed zeroed and those writes applied. FailedPrecondition when a relocation entry
// is declined (the copy is then incomplete: discard it). `relocations`, when set, counts the
// relocations applied.
absl::Status ApplyRelocation(const RelocationPlan& plan, std::string_view in, std::string_view name,
                             const ImageWriter& write, uint64_t* relocations = nullptr);

// Both steps over an image in memory: the copy's bytes and the layout.
struct RelocatedImage {
  std::string bytes;
  SectionLayout layout;
  uint64_t relocations = 0;
};
absl::StatusOr<RelocatedImage> RelocateImage(std::string_view in, std::string_view name);

struct RelocatedElfLimits {
  uint64_t max_file = uint64_t{4} << 30;  // the module file, and so its copy
};

class RelocatedElf {
 public:
  // The relocated copy of the ET_REL file `path` (plain: compressed sections already
  // decompressed, plain_elf.h), in an unlinked file under TMPDIR, else /var/tmp, else /tmp.
  // FailedPrecondition when declined (above), NotFound/InvalidArgument when the file cannot be
  // read, ResourceExhausted when there is no room for the copy; each message names `path`.
  static absl::StatusOr<RelocatedElf> Make(const std::string& path, const RelocatedElfLimits& limits = {});

  // The copy to read: /proc/self/fd/N (this process only, while this object lives).
  const std::string& path() const { return path_; }
  // The copy as another process of this user opens it while this object lives (/proc/PID/fd/N).
  std::string SharedPath() const;
  const SectionLayout& layout() const { return layout_; }
  uint64_t relocations() const { return relocations_; }

 private:
  std::string path_;
  SectionLayout layout_;
  uint64_t relocations_ = 0;
  UniqueFd copy_;
};

}  // namespace symdex::debuginfo
