#include "server/debuginfo/files/code_file.h"

#include <algorithm>

#include "server/common/strings.h"

namespace symdex::debuginfo {
namespace {
constexpr uint32_t kRelocPc32 = 2;      // R_X86_64_PC32
constexpr uint32_t kRelocPlt32 = 4;     // R_X86_64_PLT32: what calls to functions use since binutils 2.31
constexpr uint32_t kRelocJump26 = 282;  // R_AARCH64_JUMP26
constexpr uint32_t kRelocCall26 = 283;  // R_AARCH64_CALL26: a BL's
}  // namespace

absl::StatusOr<std::unique_ptr<CodeFile>> CodeFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile map, MappedFile::MapPrivate(path));
  std::unique_ptr<CodeFile> f(new CodeFile(std::move(map)));
  InitLibelf();
  std::span<char> bytes = f->map_.bytes();
  f->elf_.reset(elf_memory(bytes.data(), bytes.size()));
  if (!f->elf_ || elf_kind(f->elf_.get()) != ELF_K_ELF) return LibelfError(StrCat(path, ": not an ELF file"));
  GElf_Ehdr eh;
  if (gelf_getehdr(f->elf_.get(), &eh) == nullptr) return LibelfError(path);
  if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) {
    return absl::InvalidArgumentError(
        StrCat(path, ": machine ", eh.e_machine, ", neither x86-64 nor AArch64: its calls are not read"));
  }
  f->relocatable_ = eh.e_type == ET_REL;
  f->machine_ = eh.e_machine;
  size_t shstrndx = 0, count = 0;
  if (elf_getshdrstrndx(f->elf_.get(), &shstrndx) != 0 || elf_getshdrnum(f->elf_.get(), &count) != 0) {
    return LibelfError(path);
  }
  f->sections_.resize(count);
  for (size_t i = 1; i < count; ++i) {
    Elf_Scn* scn = elf_getscn(f->elf_.get(), i);
    GElf_Shdr sh;
    if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr) continue;
    Section& s = f->sections_[i];
    const char* name = elf_strptr(f->elf_.get(), shstrndx, sh.sh_name);
    s.name = name ? name : "";
    s.index = i;
    s.addr = sh.sh_addr;
    s.size = sh.sh_size;
    s.offset = sh.sh_offset;
    s.code = (sh.sh_flags & SHF_EXECINSTR) && sh.sh_type == SHT_PROGBITS && sh.sh_offset <= bytes.size() &&
             sh.sh_size <= bytes.size() - sh.sh_offset;
    if (sh.sh_type == SHT_SYMTAB) f->symtab_ = i;
  }
  return f;
}

const std::vector<CodeFile::Reloc>& CodeFile::RelocsFor(size_t section_index) {
  auto [it, fresh] = relocs_.try_emplace(section_index);
  if (!fresh) return it->second;
  std::vector<Reloc>& out = it->second;
  for (size_t i = 1; i < sections_.size(); ++i) {
    Elf_Scn* scn = elf_getscn(elf_.get(), i);
    GElf_Shdr sh;
    if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type != SHT_RELA || sh.sh_info != section_index || sh.sh_link != symtab_) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const size_t n = data && sh.sh_entsize ? data->d_size / sh.sh_entsize : 0;
    for (size_t k = 0; k < n; ++k) {
      GElf_Rela r;
      if (gelf_getrela(data, static_cast<int>(k), &r) == nullptr) break;
      out.push_back({r.r_offset, static_cast<uint32_t>(GELF_R_SYM(r.r_info)),
                     static_cast<uint32_t>(GELF_R_TYPE(r.r_info)), r.r_addend});
    }
  }
  std::sort(out.begin(), out.end(), [](const Reloc& a, const Reloc& b) { return a.offset < b.offset; });
  return out;
}

absl::StatusOr<std::pair<const CodeFile::Section*, uint64_t>> CodeFile::CodeAt(std::string_view section, uint64_t at,
                                                                               bool ending) const {
  for (const Section& s : sections_) {
    if (!s.code || (relocatable_ && s.name != section)) continue;
    const uint64_t base = relocatable_ ? 0 : s.addr;
    if (at < base) continue;
    const uint64_t pos = at - base;
    // Code ending at a linked section's first address is the section before's; a relocatable
    // section is named, so its offset 0 is its own either way.
    if (ending ? pos <= s.size && (pos > 0 || relocatable_) : pos < s.size) return std::make_pair(&s, pos);
  }
  return absl::NotFoundError(relocatable_ ? StrCat("no code of section ", section, " in the file")
                                          : StrCat("address 0x", fmt::format("{:x}", at), " is in no code section"));
}

absl::StatusOr<std::span<const uint8_t>> CodeFile::Code(std::string_view section, uint64_t at, uint64_t len) const {
  ASSIGN_OR_RETURN(auto found, CodeAt(section, at, /*ending=*/false));
  const auto [sec, pos] = found;
  const auto* code = reinterpret_cast<const uint8_t*>(map_.bytes().data() + sec->offset);
  return std::span<const uint8_t>(code + pos, static_cast<size_t>(std::min(len, sec->size - pos)));
}

absl::StatusOr<std::optional<CallSite>> CodeFile::CallBefore(std::string_view section, uint64_t at) {
  ASSIGN_OR_RETURN(auto found, CodeAt(section, at, /*ending=*/true));
  const auto [sec, pos] = found;
  const auto* code = reinterpret_cast<const uint8_t*>(map_.bytes().data() + sec->offset);
  std::optional<ingest::CallInsn> insn;
  if (machine_ == EM_AARCH64) {
    if (pos < 4 || pos % 4 != 0) return std::optional<CallSite>();
    uint32_t word = 0;
    for (int i = 3; i >= 0; --i) word = word << 8 | code[pos - 4 + static_cast<uint64_t>(i)];
    insn = ingest::A64CallEndingAt(word);
  } else {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(pos, ingest::kMaxCallLength));
    insn = ingest::CallEndingAt({code + pos - n, n});
  }
  if (!insn) return std::optional<CallSite>();
  CallSite c;
  c.insn = *insn;
  if (!insn->direct) return std::optional<CallSite>(std::move(c));
  if (!relocatable_) {
    c.target = at + static_cast<uint64_t>(static_cast<int64_t>(insn->rel32));
    return std::optional<CallSite>(std::move(c));
  }
  // A module's call operand is 0 until it is relocated: the relocation names the callee. It
  // applies to the operand: x86-64's rel32 is the call's last 4 bytes, AArch64's imm26 is the BL.
  const std::vector<Reloc>& rel = RelocsFor(sec->index);
  auto it = std::lower_bound(rel.begin(), rel.end(), at - 4, [](const Reloc& r, uint64_t o) { return r.offset < o; });
  const bool a64 = machine_ == EM_AARCH64;
  if (it == rel.end() || it->offset != at - 4 ||
      (a64 ? it->type != kRelocCall26 && it->type != kRelocJump26
           : it->type != kRelocPc32 && it->type != kRelocPlt32)) {
    return std::optional<CallSite>(std::move(c));
  }
  Elf_Scn* st = elf_getscn(elf_.get(), symtab_);
  GElf_Shdr st_sh;
  Elf_Data* data = st ? elf_getdata(st, nullptr) : nullptr;
  GElf_Sym sym;
  if (data == nullptr || gelf_getshdr(st, &st_sh) == nullptr ||
      gelf_getsym(data, static_cast<int>(it->sym), &sym) == nullptr) {
    return std::optional<CallSite>(std::move(c));
  }
  const char* name = elf_strptr(elf_.get(), st_sh.sh_link, sym.st_name);
  // x86-64: S + A - P is the operand; the callee is P + 4 + operand = S + A + 4. AArch64: the
  // callee is S + A.
  const int64_t a4 = it->addend + (a64 ? 0 : 4);
  if (sym.st_shndx == SHN_UNDEF) {
    if (a4 == 0 && name != nullptr) c.target_symbol = name;
  } else if (sym.st_shndx < sections_.size() && sym.st_shndx != SHN_ABS) {
    c.target_section = sections_[sym.st_shndx].name;
    c.target = sym.st_value + static_cast<uint64_t>(a4);
    if (GELF_ST_TYPE(sym.st_info) != STT_SECTION && name != nullptr) c.target_symbol = name;
  }
  return std::optional<CallSite>(std::move(c));
}

}  // namespace symdex::debuginfo
