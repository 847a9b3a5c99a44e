#include "server/jit/jit_elf.h"

#include <elf.h>

#include <bit>

#include <algorithm>
#include <cstring>
#include <map>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"

namespace symdex::jit {
namespace {

// Little-endian appends (the only byte order written; see the header).
void Put(std::string& s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i) & 0xff));
}
void Align(std::string& s, size_t a) { s.append((a - s.size() % a) % a, '\0'); }
template <typename T>
void Append(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// DWARF 2 line program over [text, text + size).
std::string DebugLine(const std::vector<JitCodeLine>& lines, uint64_t size, std::vector<std::string>* files) {
  std::map<std::string, uint64_t> file_index;  // 1-based
  for (const JitCodeLine& l : lines) {
    if (!file_index.count(l.file)) {
      files->push_back(l.file);
      file_index[l.file] = files->size();
    }
  }
  std::string hdr;                       // from minimum_instruction_length to the end of the file table
  hdr.push_back(1);                      // minimum_instruction_length
  hdr.push_back(1);                      // default_is_stmt
  hdr.push_back(static_cast<char>(-5));  // line_base
  hdr.push_back(14);                     // line_range
  hdr.push_back(13);                     // opcode_base
  const char kLengths[12] = {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
  hdr.append(kLengths, sizeof kLengths);
  hdr.push_back(0);  // no include directories
  for (const std::string& f : *files) {
    hdr += f;
    hdr.push_back(0);
    AppendUleb(hdr, 0);  // directory
    AppendUleb(hdr, 0);  // mtime
    AppendUleb(hdr, 0);  // length
  }
  hdr.push_back(0);

  std::string prog;
  prog.push_back(0);  // extended opcode
  AppendUleb(prog, 9);
  prog.push_back(2);  // DW_LNE_set_address
  Put(prog, kJitElfTextOffset, 8);
  uint64_t pc = 0, file = 1;
  int64_t line = 1;
  uint32_t column = 0;
  for (const JitCodeLine& l : lines) {
    uint64_t f = file_index[l.file];
    if (f != file) {
      prog.push_back(4);  // DW_LNS_set_file
      AppendUleb(prog, f);
      file = f;
    }
    if (l.column != column) {
      prog.push_back(5);  // DW_LNS_set_column
      AppendUleb(prog, l.column);
      column = l.column;
    }
    if (static_cast<int64_t>(l.line) != line) {
      prog.push_back(3);  // DW_LNS_advance_line
      AppendSleb(prog, static_cast<int64_t>(l.line) - line);
      line = l.line;
    }
    if (l.offset != pc) {
      prog.push_back(2);  // DW_LNS_advance_pc
      AppendUleb(prog, l.offset - pc);
      pc = l.offset;
    }
    prog.push_back(1);  // DW_LNS_copy
  }
  if (size > pc) {
    prog.push_back(2);
    AppendUleb(prog, size - pc);
  }
  prog.push_back(0);  // DW_LNE_end_sequence
  AppendUleb(prog, 1);
  prog.push_back(1);

  std::string out;
  Put(out, 2 + 4 + hdr.size() + prog.size(), 4);  // unit_length
  Put(out, 2, 2);                                 // version
  Put(out, hdr.size(), 4);                        // header_length
  out += hdr;
  out += prog;
  return out;
}

// Lines inside the code, sorted by offset (stable: the producer's order for equal offsets), one
// row per offset (the last one written wins, as in a line program).
std::vector<JitCodeLine> LineRows(const std::vector<JitCodeLine>& given, uint64_t size) {
  std::vector<JitCodeLine> lines;
  for (const JitCodeLine& l : given) {
    if (l.offset < size && l.line > 0) lines.push_back(l);
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const JitCodeLine& a, const JitCodeLine& b) { return a.offset < b.offset; });
  std::vector<JitCodeLine> rows;
  for (const JitCodeLine& l : lines) {
    if (!rows.empty() && rows.back().offset == l.offset) {
      rows.back() = l;
    } else {
      rows.push_back(l);
    }
  }
  return rows;
}

// The .note.gnu.build-id section's bytes.
std::string BuildIdNote(std::string_view raw) {
  std::string note;
  Put(note, 4, 4);
  Put(note, raw.size(), 4);
  Put(note, NT_GNU_BUILD_ID, 4);
  note.append("GNU\0", 4);
  note += raw;
  Align(note, 4);
  return note;
}

// One compile unit with one subprogram: their abbreviations.
std::string DebugAbbrev() {
  std::string abbrev;
  AppendUleb(abbrev, 1);
  AppendUleb(abbrev, 0x11);  // DW_TAG_compile_unit
  abbrev.push_back(1);       // DW_CHILDREN_yes
  for (auto [at, form] : {std::pair{0x03, 0x08}, {0x1b, 0x08}, {0x10, 0x06}, {0x11, 0x01}, {0x12, 0x01}}) {
    // DW_AT_name string, DW_AT_comp_dir string, DW_AT_stmt_list data4, DW_AT_low_pc addr,
    // DW_AT_high_pc addr
    AppendUleb(abbrev, at);
    AppendUleb(abbrev, form);
  }
  abbrev.append(2, '\0');
  AppendUleb(abbrev, 2);
  AppendUleb(abbrev, 0x2e);  // DW_TAG_subprogram
  abbrev.push_back(0);       // DW_CHILDREN_no
  for (auto [at, form] : {std::pair{0x03, 0x08}, {0x11, 0x01}, {0x12, 0x01}}) {
    AppendUleb(abbrev, at);
    AppendUleb(abbrev, form);
  }
  abbrev.append(2, '\0');
  abbrev.push_back(0);  // end of abbreviations

  return abbrev;
}

// The compile unit (named `file`, its lines at offset 0 of .debug_line) and its function `name`,
// both over [kJitElfTextOffset, + size).
std::string DebugInfo(const std::string& file, std::string_view name, uint64_t size) {
  std::string dies;
  AppendUleb(dies, 1);
  dies += file;
  dies.push_back(0);
  // An empty comp_dir: JIT file names ("node:internal/util", URLs) are not paths to resolve,
  // and without one libdw prints "(null)" before relative names.
  dies.push_back(0);
  Put(dies, 0, 4);  // stmt_list: offset 0 in .debug_line
  Put(dies, kJitElfTextOffset, 8);
  Put(dies, kJitElfTextOffset + size, 8);
  AppendUleb(dies, 2);
  dies += name;
  dies.push_back(0);
  Put(dies, kJitElfTextOffset, 8);
  Put(dies, kJitElfTextOffset + size, 8);
  dies.push_back(0);  // end of the CU's children
  std::string info;
  Put(info, 2 + 4 + 1 + dies.size(), 4);  // unit_length
  Put(info, 2, 2);                        // version
  Put(info, 0, 4);                        // debug_abbrev_offset
  info.push_back(8);                      // address_size
  info += dies;
  return info;
}

// The address range of the compile unit.
std::string DebugAranges(uint64_t size) {
  std::string aranges;
  Put(aranges, 2 + 4 + 1 + 1 + 4 + 16 + 16, 4);  // unit_length
  Put(aranges, 2, 2);                            // version
  Put(aranges, 0, 4);                            // debug_info_offset
  aranges.push_back(8);                          // address_size
  aranges.push_back(0);                          // segment_size
  aranges.append(4, '\0');                       // pad the header to 2 * address_size
  Put(aranges, kJitElfTextOffset, 8);
  Put(aranges, size, 8);
  aranges.append(16, '\0');  // terminator
  return aranges;
}

// The ELF header and the one program header (the code's PT_LOAD) at the start of `out`.
void WriteHeaders(std::string& out, uint64_t shoff, size_t sections, uint16_t machine, uint64_t size) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh.e_type = ET_DYN;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_entry = kJitElfTextOffset;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_shoff = shoff;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(sections);
  eh.e_shstrndx = 2;
  std::memcpy(out.data(), &eh, sizeof eh);
  Elf64_Phdr ph{};
  ph.p_type = PT_LOAD;
  ph.p_flags = PF_R | PF_X;
  ph.p_offset = kJitElfTextOffset;
  ph.p_vaddr = kJitElfTextOffset;
  ph.p_paddr = kJitElfTextOffset;
  ph.p_filesz = size;
  ph.p_memsz = size;
  ph.p_align = 8;
  std::memcpy(out.data() + sizeof eh, &ph, sizeof ph);
}

}  // namespace

absl::StatusOr<std::string> WriteJitElf(const JitElfInput& in) {
  static_assert(std::endian::native == std::endian::little, "the ELF headers are copied from host structs");
  if (in.build_id.raw().empty() || in.build_id.raw().size() > 64) {
    return absl::InvalidArgumentError(StrCat("build-ID of ", in.build_id.raw().size(), " bytes"));
  }
  if (in.name.find('\0') != std::string_view::npos)
    return absl::InvalidArgumentError("function name contains a NUL byte");
  const uint64_t size = in.code.size();

  const std::vector<JitCodeLine> rows = LineRows(in.lines, size);
  const bool debug = !rows.empty();

  // Section names.
  std::string shstrtab(1, '\0');
  auto add_name = [&](std::string_view n) {
    uint32_t off = static_cast<uint32_t>(shstrtab.size());
    shstrtab += n;
    shstrtab.push_back('\0');
    return off;
  };
  const uint32_t n_text = add_name(".text"), n_shstr = add_name(".shstrtab"), n_sym = add_name(".symtab"),
                 n_str = add_name(".strtab"), n_note = add_name(".note.gnu.build-id");
  uint32_t n_line = 0, n_info = 0, n_abbrev = 0, n_aranges = 0;
  if (debug) {
    n_line = add_name(".debug_line");
    n_info = add_name(".debug_info");
    n_abbrev = add_name(".debug_abbrev");
    n_aranges = add_name(".debug_aranges");
  }

  std::string out(kJitElfTextOffset, '\0');
  std::vector<Elf64_Shdr> sh(1, Elf64_Shdr{});
  auto section = [&](uint32_t name, uint32_t type, uint64_t flags, uint64_t addr, size_t align, std::string_view data,
                     uint32_t link = 0, uint32_t info = 0, uint64_t entsize = 0) {
    Align(out, align);
    Elf64_Shdr s{};
    s.sh_name = name;
    s.sh_type = type;
    s.sh_flags = flags;
    s.sh_addr = addr;
    s.sh_offset = out.size();
    s.sh_size = data.size();
    s.sh_link = link;
    s.sh_info = info;
    s.sh_addralign = align;
    s.sh_entsize = entsize;
    out += data;
    sh.push_back(s);
  };

  section(n_text, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, kJitElfTextOffset, 16, in.code);  // [1]
  section(n_shstr, SHT_STRTAB, 0, 0, 1, shstrtab);                                           // [2]
  std::string symtab;
  Append(symtab, Elf64_Sym{});
  Elf64_Sym fn{};
  fn.st_name = 1;
  fn.st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
  fn.st_other = STV_DEFAULT;
  fn.st_shndx = 1;
  fn.st_value = kJitElfTextOffset;
  fn.st_size = size;
  Append(symtab, fn);
  std::string strtab = StrCat(std::string(1, '\0'), in.name, std::string(1, '\0'));
  // sh_info of a symtab: one past the last local symbol.
  section(n_sym, SHT_SYMTAB, 0, 0, 8, symtab, /*link=*/4, /*info=*/2, sizeof(Elf64_Sym));  // [3]
  section(n_str, SHT_STRTAB, 0, 0, 1, strtab);                                             // [4]
  section(n_note, SHT_NOTE, 0, 0, 4, BuildIdNote(in.build_id.raw()));                      // [5]
  if (debug) {
    std::vector<std::string> files;
    std::string line_section = DebugLine(rows, size, &files);
    section(n_line, SHT_PROGBITS, 0, 0, 1, line_section);
    section(n_info, SHT_PROGBITS, 0, 0, 1, DebugInfo(files.front(), in.name, size));
    section(n_abbrev, SHT_PROGBITS, 0, 0, 1, DebugAbbrev());
    // elfutils (0.188) finds a CU for an address only through .debug_aranges.
    section(n_aranges, SHT_PROGBITS, 0, 0, 1, DebugAranges(size));
  }
  Align(out, 8);
  const uint64_t shoff = out.size();
  for (const Elf64_Shdr& s : sh) Append(out, s);

  WriteHeaders(out, shoff, sh.size(), in.machine, size);
  return out;
}

}  // namespace symdex::jit
