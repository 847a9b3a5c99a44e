#include "server/ingest/elf_symbols.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <memory>

#include "server/common/elf_handle.h"
#include "server/common/strings.h"
#include "server/ingest/elf_notes.h"
#include "server/ingest/kernel_release.h"

namespace symdex::ingest {
namespace {

char SectionLetter(const GElf_Shdr& sh) {
  if (sh.sh_flags & SHF_EXECINSTR) return 'T';
  if (!(sh.sh_flags & SHF_ALLOC)) return 'N';
  if (sh.sh_type == SHT_NOBITS) return 'B';
  if (!(sh.sh_flags & SHF_WRITE)) return 'R';
  return 'D';
}

char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view SectionData(Elf_Scn* scn, const GElf_Shdr& sh) {
  if (sh.sh_type == SHT_NOBITS) return {};
  Elf_Data* d = elf_getdata(scn, nullptr);
  if (d == nullptr || d->d_buf == nullptr) return {};
  return {static_cast<const char*>(d->d_buf), d->d_size};
}

}  // namespace

absl::StatusOr<ElfSymbolTable> ReadElfSymbols(std::string& image) { return ReadElfSymbols(image.data(), image.size()); }

absl::StatusOr<ElfSymbolTable> ReadElfSymbols(char* image, size_t image_size) {
  InitLibelf();
  ElfPtr elf(elf_memory(image, image_size));
  if (!elf) return LibelfError("not an ELF file");
  if (elf_kind(elf.get()) != ELF_K_ELF) return absl::InvalidArgumentError("not an ELF file");
  GElf_Ehdr eh;
  if (gelf_getehdr(elf.get(), &eh) == nullptr) return LibelfError("bad ELF header");
  size_t shstrndx;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) return LibelfError("bad section header table");

  ElfSymbolTable out;
  out.relocatable = eh.e_type == ET_REL;

  size_t nsections = 0;
  if (elf_getshdrnum(elf.get(), &nsections) != 0) return LibelfError("bad section count");
  // A file cut short loses its section headers first (the linker writes them last); libelf
  // then shows no sections at all, which would read as "stripped". Say what it is.
  // The raw header's count: libelf reports 0 sections when their headers are out of the file.
  // (e_shnum 0 with e_shoff set is extended numbering: at least header 0 must be there.)
  const uint64_t size = image_size;
  const uint64_t headers = eh.e_shnum != 0 ? eh.e_shnum : (eh.e_shoff != 0 ? 1 : 0);
  if (eh.e_shoff > size || headers > (size - eh.e_shoff) / std::max<uint64_t>(eh.e_shentsize, 1)) {
    return absl::InvalidArgumentError(StrCat("section headers beyond the end of the file (", headers,
                                             " headers at offset ", eh.e_shoff, ", file is ", size,
                                             " bytes): truncated or corrupt"));
  }
  std::vector<std::string> section_names(nsections);
  std::vector<char> section_letters(nsections, '?');
  Elf_Scn* symtab = nullptr;
  GElf_Shdr symtab_hdr{};

  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) return LibelfError("bad section header");
    size_t idx = elf_ndxscn(scn);
    const char* nm = elf_strptr(elf.get(), shstrndx, sh.sh_name);
    if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) {
      return absl::InvalidArgumentError(StrCat("section ", nm ? nm : "?", " extends beyond the end of the file (", size,
                                               " bytes): truncated or corrupt"));
    }
    if (idx < nsections) {
      section_names[idx] = nm ? nm : "";
      section_letters[idx] = SectionLetter(sh);
    }
    if (sh.sh_type == SHT_SYMTAB) {
      symtab = scn;
      symtab_hdr = sh;
    } else if (sh.sh_type == SHT_NOTE && !out.build_id) {
      auto id = FindGnuBuildId(SectionData(scn, sh));
      if (id.ok() && id->has_value()) out.build_id = **id;
    } else if (nm && std::string_view(nm) == ".modinfo") {
      const std::string_view modinfo = SectionData(scn, sh);
      out.modinfo_name = ModinfoValue(modinfo, "name");
      out.modinfo_vermagic = ModinfoValue(modinfo, "vermagic");
    }
  }
  if (symtab == nullptr) return absl::InvalidArgumentError("no symbol table (.symtab): stripped?");

  Elf_Data* data = elf_getdata(symtab, nullptr);
  if (data == nullptr) return LibelfError("cannot read .symtab");
  if (symtab_hdr.sh_entsize == 0) return absl::InvalidArgumentError(".symtab has entry size 0");
  size_t count = symtab_hdr.sh_size / symtab_hdr.sh_entsize;
  out.symbols.reserve(count);
  for (size_t i = 1; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) return LibelfError("bad symbol entry");
    int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE) continue;
    const char* name = elf_strptr(elf.get(), symtab_hdr.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;

    ElfSymbol s;
    s.name = name;
    s.value = sym.st_value;
    s.size = sym.st_size;
    s.function = type == STT_FUNC || type == STT_GNU_IFUNC;
    char letter;
    if (sym.st_shndx == SHN_ABS) {
      letter = 'A';
      s.section = "*ABS*";
    } else if (sym.st_shndx == SHN_COMMON) {
      letter = 'C';
      s.section = "*COM*";
    } else if (sym.st_shndx < nsections) {
      letter = section_letters[sym.st_shndx];
      s.section = section_names[sym.st_shndx];
    } else {
      continue;  // SHN_XINDEX and other reserved indices: not in kallsyms either
    }
    if (type == STT_GNU_IFUNC) letter = 'i';
    if (bind == STB_GNU_UNIQUE) letter = 'u';
    if (bind == STB_WEAK) letter = type == STT_OBJECT ? 'V' : 'W';
    if (bind == STB_LOCAL) letter = ToLower(letter);
    s.type = letter;
    out.symbols.push_back(std::move(s));
  }
  return out;
}

}  // namespace symdex::ingest
