#include "server/debuginfo/files/code_file.h"

#include <algorithm>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"
#include "server/ingest/x86_insn.h"

namespace symdex::debuginfo {
namespace {
constexpr uint32_t kRelocPc32 = 2;        // R_X86_64_PC32
constexpr uint32_t kRelocPlt32 = 4;       // R_X86_64_PLT32: what calls to functions use since binutils 2.31
constexpr uint32_t kRelocTstBr14 = 279;   // R_AARCH64_TSTBR14: a TBZ/TBNZ's
constexpr uint32_t kRelocCondBr19 = 280;  // R_AARCH64_CONDBR19: a B.cond's, CBZ/CBNZ's
constexpr uint32_t kRelocJump26 = 282;    // R_AARCH64_JUMP26
constexpr uint32_t kRelocCall26 = 283;    // R_AARCH64_CALL26: a BL's
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
    insn = ingest::A64CallEndingAt(LoadLittle<uint32_t>(code + pos - 4));
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
  const bool a64 = machine_ == EM_AARCH64;
  const Reloc* r = a64 ? RelocAt(sec->index, at - 4, {kRelocCall26, kRelocJump26})
                       : RelocAt(sec->index, at - 4, {kRelocPc32, kRelocPlt32});
  // x86-64: S + A - P is the operand; the callee is P + 4 + operand = S + A + 4. AArch64: the
  // callee is S + A.
  std::optional<RelocDest> dest = r ? DestOf(*r, a64 ? 0 : 4) : std::nullopt;
  if (!dest) return std::optional<CallSite>(std::move(c));
  if (dest->section == 0) {
    c.target_symbol = std::move(dest->symbol);
  } else {
    c.target_section = sections_[dest->section].name;
    c.target = dest->offset;
    c.target_symbol = std::move(dest->symbol);
  }
  return std::optional<CallSite>(std::move(c));
}

const CodeFile::Reloc* CodeFile::RelocAt(size_t section_index, uint64_t offset, std::initializer_list<uint32_t> types) {
  const std::vector<Reloc>& rel = RelocsFor(section_index);
  auto it = std::lower_bound(rel.begin(), rel.end(), offset, [](const Reloc& r, uint64_t o) { return r.offset < o; });
  if (it == rel.end() || it->offset != offset) return nullptr;
  return std::find(types.begin(), types.end(), it->type) != types.end() ? &*it : nullptr;
}

std::optional<CodeFile::RelocDest> CodeFile::DestOf(const Reloc& r, int64_t extra) {
  Elf_Scn* st = elf_getscn(elf_.get(), symtab_);
  GElf_Shdr st_sh;
  Elf_Data* data = st ? elf_getdata(st, nullptr) : nullptr;
  GElf_Sym sym;
  if (data == nullptr || gelf_getshdr(st, &st_sh) == nullptr ||
      gelf_getsym(data, static_cast<int>(r.sym), &sym) == nullptr) {
    return std::nullopt;
  }
  const char* name = elf_strptr(elf_.get(), st_sh.sh_link, sym.st_name);
  const int64_t a = r.addend + extra;
  RelocDest d;
  if (sym.st_shndx == SHN_UNDEF) {
    if (a != 0 || name == nullptr) return std::nullopt;
    d.symbol = name;
    return d;
  }
  if (sym.st_shndx >= sections_.size() || sym.st_shndx == SHN_ABS) return std::nullopt;
  d.section = sym.st_shndx;
  d.offset = sym.st_value + static_cast<uint64_t>(a);
  if (GELF_ST_TYPE(sym.st_info) != STT_SECTION && name != nullptr) d.symbol = name;
  return d;
}

std::map<size_t, std::vector<uint64_t>> CodeFile::FunctionStarts() {
  std::map<size_t, std::vector<uint64_t>> out;
  for (const Section& s : sections_) {
    if (s.code) out[s.index].push_back(0);  // code before its first symbol is decoded too
  }
  Elf_Scn* st = symtab_ ? elf_getscn(elf_.get(), symtab_) : nullptr;
  GElf_Shdr sh;
  Elf_Data* data = st ? elf_getdata(st, nullptr) : nullptr;
  const size_t n = data && st && gelf_getshdr(st, &sh) != nullptr && sh.sh_entsize ? data->d_size / sh.sh_entsize : 0;
  for (size_t k = 1; k < n; ++k) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(k), &sym) == nullptr) break;
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx >= sections_.size()) continue;
    const Section& s = sections_[sym.st_shndx];
    if (!s.code) continue;
    const uint64_t base = relocatable_ ? 0 : s.addr;
    if (sym.st_value < base || sym.st_value - base >= s.size) continue;
    out[s.index].push_back(sym.st_value - base);
  }
  for (auto& [index, starts] : out) {
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  }
  return out;
}

absl::StatusOr<std::vector<Branch>> CodeFile::BranchesTo(std::string_view section, uint64_t to) {
  const bool a64 = machine_ == EM_AARCH64;
  std::vector<Branch> out;
  for (const auto& entry : FunctionStarts()) {
    const size_t index = entry.first;  // not a structured binding: the lambda below captures it
    const std::vector<uint64_t>& starts = entry.second;
    const Section& s = sections_[index];
    const uint64_t base = relocatable_ ? 0 : s.addr;
    const auto* code = reinterpret_cast<const uint8_t*>(map_.bytes().data() + s.offset);
    // Where a branch at `pos` of `len` bytes goes when it lands in this file: this section plus
    // its displacement, or (a module) what the relocation on its operand says.
    auto lands_on_to = [&](uint64_t pos, const ingest::DirectBranch& b, size_t len) {
      if (relocatable_) {
        const Reloc* r = a64 ? RelocAt(index, pos, {kRelocCall26, kRelocJump26, kRelocCondBr19, kRelocTstBr14})
                             : RelocAt(index, pos + b.operand, {kRelocPc32, kRelocPlt32});
        if (r != nullptr) {
          // x86-64: S + A - P is the operand at P; the branch goes to P + (len - operand) + operand.
          std::optional<RelocDest> d = DestOf(*r, a64 ? 0 : static_cast<int64_t>(len - b.operand));
          return d && d->section != 0 && sections_[d->section].name == section && d->offset == to;
        }
        if (s.name != section) return false;
      }
      return base + pos + static_cast<uint64_t>(b.target) == to;
    };
    for (size_t i = 0; i < starts.size(); ++i) {
      const uint64_t end = i + 1 < starts.size() ? starts[i + 1] : s.size;
      uint64_t pos = starts[i];
      if (a64) pos = (pos + 3) & ~uint64_t{3};
      while (pos < end) {
        size_t len = 4;
        std::optional<ingest::DirectBranch> b;
        if (a64) {
          if (end - pos < 4) break;
          b = ingest::A64DirectBranch(LoadLittle<uint32_t>(code + pos));
        } else {
          const size_t avail = static_cast<size_t>(std::min<uint64_t>(s.size - pos, ingest::kMaxX86InsnLength));
          std::optional<size_t> n = ingest::X86InsnLength({code + pos, avail});
          if (!n) {  // no instruction here (data, or a 32-bit byte): on with the next byte
            ++pos;
            continue;
          }
          len = *n;
          b = ingest::X86DirectBranch({code + pos, len});
        }
        if (b && lands_on_to(pos, *b, len)) out.push_back({s.name, base + pos, b->call});
        pos += len;
      }
    }
  }
  return out;
}

}  // namespace symdex::debuginfo
