// Modules relocated by symdex (relocated_elf.h) against libdwfl, their oracle: the section layout
// and the relocated DWARF bytes of each module are libdwfl's, and the DWARF index and the address
// map symdex's readers make of the copy are those the libdwfl path makes — on the fixture kernel's
// module (gcc DWARF 4 and 5, clang DWARF 5) and on Debian's amd64 and arm64 modules when the -dbg
// corpus is fetched. Then hostile files: each refused with a message naming what is wrong, and a
// module symdex declines is read by libdwfl as before.
#include "server/debuginfo/dwarf/relocated_elf.h"

#include <elf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/dwarf/libdw_util.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "tests/unit/dwarf_rows.h"
#include "tests/unit/kernel_fixture.h"
#include "tests/unit/test_util.h"

namespace symdex::debuginfo {
namespace {

using symdex::testing::Slurp;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

constexpr char kSymdexReader[] = "symdex (relocated by symdex)";

// Sets SYMDEX_MODULES_VIA=libdwfl for its lifetime: the libdwfl path, the oracle.
struct ViaLibdwfl {
  ViaLibdwfl() { ::setenv("SYMDEX_MODULES_VIA", "libdwfl", 1); }
  ~ViaLibdwfl() { ::unsetenv("SYMDEX_MODULES_VIA"); }
};

// Everything the two paths must agree on for one module; `what` names it in failures.
void ExpectLibdwflAnswers(const std::string& path, const std::string& what) {
  SCOPED_TRACE(what);
  // The layout: libdwfl's sections, addresses and order, and its address lookup.
  auto copy = RelocatedElf::Make(path);
  ASSERT_TRUE(copy.ok()) << copy.status();
  RelocatedDwarf rd;
  ASSERT_TRUE(OpenRelocated(path, rd).ok());
  std::vector<std::pair<std::string, uint64_t>> mine;
  for (const LaidOutSection& s : copy->layout().sections()) mine.emplace_back(s.name, s.start);
  auto theirs = rd.SectionBases();
  for (auto& [name, base] : theirs) base -= rd.bias;
  EXPECT_EQ(mine, theirs);
  std::vector<uint64_t> probes = {0, 0x10000, UINT64_MAX};
  for (const LaidOutSection& s : copy->layout().sections()) {
    for (uint64_t a : {s.start, s.start + 1, s.end, s.end + 1, s.start - 1, (s.start + s.end) / 2}) probes.push_back(a);
  }
  for (uint64_t a : probes) {
    uint64_t offset = 0;
    const auto at = copy->layout().Find(a, &offset);
    Dwarf_Addr d = a + rd.bias;
    const int idx = dwfl_module_relocate_address(rd.mod, &d);
    ASSERT_EQ(at.has_value(), idx >= 0) << std::hex << a;
    if (at) {
      EXPECT_EQ(*at, static_cast<size_t>(idx)) << std::hex << a;
      EXPECT_EQ(offset, d) << std::hex << a;
    }
  }
  // The DWARF sections, relocated: libdwfl's bytes.
  {
    OpenedDwarf c;
    ASSERT_TRUE(OpenDwarf(copy->path(), c).ok());
    Elf* theirs_elf = dwarf_getelf(rd.dwarf);
    size_t shstrndx = 0, compared = 0;
    ASSERT_EQ(elf_getshdrstrndx(theirs_elf, &shstrndx), 0);
    for (Elf_Scn* scn = elf_nextscn(theirs_elf, nullptr); scn; scn = elf_nextscn(theirs_elf, scn)) {
      GElf_Shdr sh;
      ASSERT_NE(gelf_getshdr(scn, &sh), nullptr);
      const std::string name = elf_strptr(theirs_elf, shstrndx, sh.sh_name);
      if (!name.starts_with(".debug_") || sh.sh_type == SHT_NOBITS) continue;
      Elf_Data* want = elf_rawdata(scn, nullptr);
      Elf_Data* got = elf_rawdata(elf_getscn(c.elf.get(), elf_ndxscn(scn)), nullptr);
      ASSERT_TRUE(want && got) << name;
      ASSERT_EQ(got->d_size, want->d_size) << name;
      EXPECT_EQ(std::memcmp(got->d_buf, want->d_buf, got->d_size), 0) << name;
      ++compared;
    }
    EXPECT_GE(compared, 5u);
  }
  // The index and the map.
  size_t scanned = 0;
  std::vector<std::string> misses;
  auto idx = IndexDwarfFile(path, {.jobs = 1, .units_scanned = &scanned, .scan_misses = &misses});
  auto map = BuildAddrMap(path);  // (an object without a build-ID has none: the same error both ways)
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->reader, kSymdexReader) << (misses.empty() ? "" : misses.front());
  EXPECT_EQ(scanned, idx->units.size());
  EXPECT_TRUE(idx->relocatable);
  ViaLibdwfl via;
  auto want_idx = IndexDwarfFile(path, {.jobs = 1});
  auto want_map = BuildAddrMap(path);
  ASSERT_TRUE(want_idx.ok()) << want_idx.status();
  EXPECT_EQ(want_idx->reader, "libdwfl");
  EXPECT_FALSE(idx->functions.empty());
  EXPECT_EQ(idx->sections, want_idx->sections);
  EXPECT_TRUE(symdex::testing::EncodedRows(*idx) == symdex::testing::EncodedRows(*want_idx)) << "index rows differ";
  ASSERT_EQ(map.status(), want_map.status());
  if (map.ok()) {
    EXPECT_TRUE(*map == *want_map) << "address maps differ";
  }
}

class RelocatedFixtureTest : public ::testing::TestWithParam<symdex::testing::Toolchain> {
 protected:
  void SetUp() override {
    if (!GetParam().Installed()) GTEST_SKIP() << GetParam().cc << " not installed";
    fixture_ = std::make_unique<symdex::testing::KernelFixture>(GetParam());
  }
  std::unique_ptr<symdex::testing::KernelFixture> fixture_;
};

TEST_P(RelocatedFixtureTest, TheModuleReadsAsThroughLibdwfl) { ExpectLibdwflAnswers(fixture_->module, "fake_mod"); }

// The copy is a linked-looking file: ET_EXEC, sections at their layout addresses, symbols at
// theirs; readable by this process and, through /proc/PID/fd, by another of this user.
TEST_P(RelocatedFixtureTest, TheCopyLooksLinked) {
  auto copy = RelocatedElf::Make(fixture_->module);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_GT(copy->relocations(), 0u);
  const std::string bytes = Slurp(copy->SharedPath());
  ASSERT_EQ(bytes.size(), std::filesystem::file_size(fixture_->module));
  EXPECT_EQ(Slurp(copy->path()), bytes);
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  EXPECT_EQ(eh.e_type, ET_EXEC);
  auto nm = symdex::testing::RunCommand("nm '" + copy->SharedPath() + "' | awk '$3 == \"name_show\"'");
  auto text = std::find_if(copy->layout().sections().begin(), copy->layout().sections().end(),
                           [](const LaidOutSection& s) { return s.name == ".text"; });
  ASSERT_NE(text, copy->layout().sections().end());
  EXPECT_GE(text->start, 0x10000u);
  size_t seen = 0;
  for (std::istringstream in(nm.out); in;) {  // each name_show inside .text at its layout address
    std::string addr, type, name;
    if (!(in >> addr >> type >> name)) break;
    ++seen;
    const uint64_t a = std::stoull(addr, nullptr, 16);
    EXPECT_TRUE(a >= text->start && a < text->end) << nm.out;
  }
  EXPECT_EQ(seen, 2u) << nm.out;
}

INSTANTIATE_TEST_SUITE_P(Toolchains, RelocatedFixtureTest,
                         ::testing::Values(symdex::testing::Toolchain{4, "gcc"}, symdex::testing::Toolchain{5, "gcc"},
                                           symdex::testing::Toolchain{5, "clang-14"}),
                         [](const auto& info) { return info.param.Name(); });

// Debian's module debug files: a spread of each architecture's (every Nth by path, and the
// largest), when the -dbg corpus is fetched. tests/bench/relocated_modules.sh compares all.
std::vector<std::string> CorpusModules(const std::string& arch, size_t n) {
  const char* home = std::getenv("HOME");
  const std::filesystem::path dir = std::string(home ? home : "") +
                                    "/.cache/symdex-corpus/linux-image-6.1.0-57-cloud-" + arch +
                                    "-dbg_6.1.192-3/usr/lib/debug/lib/modules";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return {};
  std::vector<std::string> all;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.path().extension() == ".ko") all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < all.size(); i += std::max<size_t>(1, all.size() / n)) out.push_back(all[i]);
  auto largest = std::max_element(all.begin(), all.end(), [](const std::string& a, const std::string& b) {
    return std::filesystem::file_size(a) < std::filesystem::file_size(b);
  });
  if (largest != all.end()) out.push_back(*largest);
  return out;
}

class RelocatedCorpusTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RelocatedCorpusTest, DebianModulesReadAsThroughLibdwfl) {
  const std::vector<std::string> modules = CorpusModules(GetParam(), 10);
  if (modules.empty())
    GTEST_SKIP() << "no Debian " << GetParam() << " -dbg corpus (tests/corpus/fetch-debian-kernel.sh)";
  size_t kept_addresses = 0;
  for (const std::string& m : modules) {
    ExpectLibdwflAnswers(m, m);
    auto copy = RelocatedElf::Make(m);
    ASSERT_TRUE(copy.ok());
    for (const LaidOutSection& s : copy->layout().sections()) kept_addresses += s.start < 0x10000;
  }
  // arm64's __patchable_function_entries keeps its sh_addr (0x60): the case is exercised.
  if (std::string(GetParam()) == "arm64") {
    EXPECT_GT(kept_addresses, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Arches, RelocatedCorpusTest, ::testing::Values("amd64", "arm64"));

// ---- the layout's lookup --------------------------------------------------------------------

TEST(SectionLayoutTest, FindsAsLibdwflDoes) {
  // In section-header order; sorted by start, ties kept in that order.
  SectionLayout l({{".text", 1, 0x10000, 0x10100},
                   {".empty", 2, 0x10100, 0x10100},
                   {".text.unlikely", 3, 0x10100, 0x10180},
                   {"__patchable_function_entries", 4, 0x60, 0x70},
                   {".data", 5, 0x10200, 0x10240}});
  std::vector<std::string> order;
  for (const auto& s : l.sections()) order.push_back(s.name);
  EXPECT_EQ(order,
            (std::vector<std::string>{"__patchable_function_entries", ".text", ".empty", ".text.unlikely", ".data"}));
  auto map = [&](uint64_t a) {
    auto m = l.Map(a);
    return m ? std::string(m->first) + "+" + std::to_string(m->second) : std::string("none");
  };
  EXPECT_EQ(map(0x10000), ".text+0");
  EXPECT_EQ(map(0x100ff), ".text+255");
  EXPECT_EQ(map(0x10100), ".text.unlikely+0");    // .empty holds it, and its end is where the next starts
  EXPECT_EQ(map(0x10180), ".text.unlikely+128");  // an end nothing starts at stays in its section
  EXPECT_EQ(map(0x101ff), "none");                // the gap before .data
  EXPECT_EQ(map(0x10240), ".data+64");            // the end of the last section
  EXPECT_EQ(map(0x10241), "none");
  EXPECT_EQ(map(0x68), "__patchable_function_entries+8");
  EXPECT_EQ(map(0), "none");
  EXPECT_EQ(SectionLayout().Map(0x10000), std::nullopt);
}

// ---- hostile files --------------------------------------------------------------------------

// A small relocatable object with DWARF (this machine's gcc: x86-64 or AArch64), an undefined
// symbol referenced by its code, and the ELF views the mutations below edit.
class HostileModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    symdex::testing::CompileObject(
        "extern int other; int counter = 3;\n"
        "int read_other(int x) { return other + x + counter; }\n",
        dir_ / "m.o", "-O2 -g");
    bytes_ = Slurp(dir_ / "m.o");
    ASSERT_GT(bytes_.size(), sizeof(Elf64_Ehdr));
    std::memcpy(&eh_, bytes_.data(), sizeof eh_);
    ASSERT_EQ(eh_.e_type, ET_REL);
  }

  Elf64_Shdr Header(size_t i) const {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes_.data() + eh_.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  }
  void SetHeader(std::string& b, size_t i, const Elf64_Shdr& sh) const {
    std::memcpy(b.data() + eh_.e_shoff + i * sizeof sh, &sh, sizeof sh);
  }
  std::string NameOf(size_t i) const { return bytes_.data() + Header(eh_.e_shstrndx).sh_offset + Header(i).sh_name; }
  size_t Section(const std::string& name) const {
    for (size_t i = 1; i < eh_.e_shnum; ++i) {
      if (NameOf(i) == name) return i;
    }
    ADD_FAILURE() << "no " << name;
    return 0;
  }
  // Offset in the file of .rela.debug_info's first relocation that is not R_*_NONE.
  uint64_t FirstRelocation() const {
    const Elf64_Shdr sh = Header(Section(".rela.debug_info"));
    for (uint64_t off = sh.sh_offset; off < sh.sh_offset + sh.sh_size; off += sizeof(Elf64_Rela)) {
      Elf64_Rela r;
      std::memcpy(&r, bytes_.data() + off, sizeof r);
      if (ELF64_R_TYPE(r.r_info) != 0) return off;
    }
    ADD_FAILURE() << "no relocation";
    return 0;
  }
  std::string EditRelocation(const std::function<void(Elf64_Rela&)>& edit) const {
    std::string b = bytes_;
    Elf64_Rela r;
    const uint64_t at = FirstRelocation();
    std::memcpy(&r, b.data() + at, sizeof r);
    edit(r);
    std::memcpy(b.data() + at, &r, sizeof r);
    return b;
  }
  // The index of a symbol the object does not define (`other`).
  uint32_t UndefinedSymbol() const {
    const Elf64_Shdr sh = Header(Section(".symtab"));
    for (uint32_t i = 1; i < sh.sh_size / sizeof(Elf64_Sym); ++i) {
      Elf64_Sym s;
      std::memcpy(&s, bytes_.data() + sh.sh_offset + i * sizeof s, sizeof s);
      if (s.st_shndx == SHN_UNDEF) return i;
    }
    ADD_FAILURE() << "no undefined symbol";
    return 0;
  }
  uint32_t WideType() const { return eh_.e_machine == EM_AARCH64 ? R_AARCH64_ABS64 : R_X86_64_64; }
  uint32_t PcRelativeType() const { return eh_.e_machine == EM_AARCH64 ? R_AARCH64_PREL32 : R_X86_64_PC32; }

  // `bytes` refused by the relocator (FailedPrecondition) with `why` in the message.
  void ExpectRefused(const std::string& bytes, const std::string& why) const {
    auto r = RelocateImage(bytes, "hostile.ko");
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_NE(r.status().message().find("hostile.ko: not relocated by symdex ("), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status();
  }

  TempDir dir_;
  std::string bytes_;
  Elf64_Ehdr eh_{};
};

TEST_F(HostileModuleTest, TheObjectItselfIsRelocated) {
  auto r = RelocateImage(bytes_, "m.o");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->relocations, 0u);
  EXPECT_EQ(r->bytes.size(), bytes_.size());
  // Its applied relocations are zeroed in the copy (as libdwfl elides them).
  const Elf64_Shdr rela = Header(Section(".rela.debug_info"));
  EXPECT_EQ(r->bytes.substr(rela.sh_offset, rela.sh_size), std::string(rela.sh_size, '\0'));
}

TEST_F(HostileModuleTest, ATruncatedRelocationSectionIsRefused) {
  std::string b = bytes_;
  const size_t i = Section(".rela.debug_info");
  Elf64_Shdr sh = Header(i);
  sh.sh_size -= 5;
  SetHeader(b, i, sh);
  ExpectRefused(b, "not a whole number of 24-byte entries");
  sh.sh_size = b.size();  // past the end of the file
  SetHeader(b, i, sh);
  ExpectRefused(b, "lies outside the file");
}

TEST_F(HostileModuleTest, ARelocationOutsideItsSectionIsRefused) {
  const uint64_t info_size = Header(Section(".debug_info")).sh_size;
  ExpectRefused(EditRelocation([&](Elf64_Rela& r) { r.r_offset = info_size - 2; }), "outside .debug_info");
  ExpectRefused(EditRelocation([&](Elf64_Rela& r) { r.r_offset = UINT64_MAX - 3; }), "outside .debug_info");
}

TEST_F(HostileModuleTest, AnUnknownRelocationTypeIsRefused) {
  const uint32_t type = PcRelativeType();
  ExpectRefused(EditRelocation([&](Elf64_Rela& r) { r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), type); }),
                "relocation type " + std::to_string(type));
}

TEST_F(HostileModuleTest, ASymbolIndexOutOfRangeIsRefused) {
  const uint32_t type = WideType();
  ExpectRefused(EditRelocation([&](Elf64_Rela& r) { r.r_info = ELF64_R_INFO(0xffffff, type); }),
                "symbol 16777215 out of range");
}

TEST_F(HostileModuleTest, AnUndefinedSymbolIsRefused) {
  const uint32_t sym = UndefinedSymbol(), type = WideType();
  ExpectRefused(EditRelocation([&](Elf64_Rela& r) { r.r_info = ELF64_R_INFO(sym, type); }), "an undefined symbol");
}

TEST_F(HostileModuleTest, OtherFilesAreRefused) {
  std::string b = bytes_;
  reinterpret_cast<Elf64_Ehdr*>(b.data())->e_machine = EM_RISCV;
  ExpectRefused(b, "machine 243");
  b = bytes_;
  reinterpret_cast<Elf64_Ehdr*>(b.data())->e_type = ET_DYN;
  ExpectRefused(b, "not a relocatable file");
  b = bytes_;
  reinterpret_cast<Elf64_Ehdr*>(b.data())->e_shoff = b.size() - 8;
  ExpectRefused(b, "section headers lie outside the file");
  b = bytes_;
  const size_t rela = Section(".rela.debug_info");
  Elf64_Shdr sh = Header(rela);
  sh.sh_type = SHT_REL;
  SetHeader(b, rela, sh);
  ExpectRefused(b, "is SHT_REL");
  b = bytes_;
  sh = Header(rela);
  sh.sh_offset = Header(Section(".debug_info")).sh_offset;  // on top of the section it patches
  sh.sh_size = sizeof(Elf64_Rela);
  SetHeader(b, rela, sh);
  ExpectRefused(b, "overlaps");
  ExpectRefused(bytes_.substr(0, 40), "shorter than an ELF header");
}

// Every prefix of the file, and files with bytes changed at random: refused or relocated, never a
// read outside the input (the sanitizer build checks), and a relocated copy is the input's size.
TEST_F(HostileModuleTest, TruncatedAndDamagedFilesAreHandled) {
  for (size_t n = 0; n < bytes_.size(); ++n) {
    auto r = RelocateImage(std::string_view(bytes_).substr(0, n), "prefix");
    ASSERT_FALSE(r.ok()) << n;  // the section headers come last
  }
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    std::string b = bytes_;
    for (int k = 0; k < 4; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    auto r = RelocateImage(b, "damaged");
    if (r.ok()) {
      EXPECT_EQ(r->bytes.size(), b.size());
    }
  }
}

// A module symdex declines is read through libdwfl: the same index as before, "libdwfl" its reader,
// and why symdex declined among the scanner's misses. (libdwfl skips the relocation type it does
// not know.)
TEST_F(HostileModuleTest, ADeclinedModuleIsReadByLibdwfl) {
  const uint32_t type = PcRelativeType();
  const std::string path = dir_ / "declined.o";
  WriteFile(path, EditRelocation([&](Elf64_Rela& r) { r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), type); }));
  auto made = RelocatedElf::Make(path);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find(path + ": not relocated by symdex"), std::string::npos) << made.status();
  std::vector<std::string> misses;
  auto idx = IndexDwarfFile(path, {.jobs = 1, .scan_misses = &misses});
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->reader, "libdwfl");
  ASSERT_FALSE(misses.empty());
  EXPECT_NE(misses.front().find("relocation type " + std::to_string(type)), std::string::npos) << misses.front();
  ViaLibdwfl via;
  auto want = IndexDwarfFile(path, {.jobs = 1});
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(symdex::testing::EncodedRows(*idx), symdex::testing::EncodedRows(*want));
}

// The undamaged object, both ways: the same index and map.
TEST_F(HostileModuleTest, TheObjectReadsAsThroughLibdwfl) { ExpectLibdwflAnswers(dir_ / "m.o", "m.o"); }

}  // namespace
}  // namespace symdex::debuginfo
