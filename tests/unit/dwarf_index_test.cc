#include "server/debuginfo/dwarf/dwarf_index.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include <dwarf.h>
#include <sys/mman.h>

#include "server/debuginfo/dwarf/libdw_util.h"
#include "server/debuginfo/dwarf/source_path.h"
#include "server/debuginfo/files/debug_finder.h"
#include "server/debuginfo/worker/worker_protocol.h"
#include "tests/unit/dwarf_rows.h"
#include "tests/unit/kernel_fixture.h"

namespace symdex::debuginfo {
namespace {

using symdex::testing::KernelFixture;
using symdex::testing::RunCommand;

std::vector<const DwarfFunction*> Named(const DwarfIndex& idx, const std::string& name) {
  std::vector<const DwarfFunction*> out;
  for (const auto& f : idx.functions) {
    if (f.name == name) out.push_back(&f);
  }
  std::sort(out.begin(), out.end(), [&](auto* a, auto* b) { return idx.units[a->cu].name < idx.units[b->cu].name; });
  return out;
}

// nm's view of a symbol: value by name (first occurrence order).
std::vector<std::pair<std::string, uint64_t>> NmText(const std::string& path) {
  auto r = RunCommand("nm '" + path + "'");
  std::vector<std::pair<std::string, uint64_t>> out;
  std::istringstream in(r.out);
  std::string addr, type, name;
  while (in >> addr >> type >> name) {
    // _etext (the fixture links it, as every kernel has it) labels the end of text, no function.
    if ((type == "t" || type == "T") && name != "_etext") out.emplace_back(name, std::stoull(addr, nullptr, 16));
  }
  return out;
}

// gcc's DWARF 4 and 5, clang's DWARF 5 (its own forms, no .debug_aranges, no hot/cold split).
class DwarfIndexTest : public ::testing::TestWithParam<symdex::testing::Toolchain> {
 protected:
  void SetUp() override {
    if (!GetParam().Installed()) GTEST_SKIP() << GetParam().cc << " not installed";
    fixture_ = std::make_unique<KernelFixture>(GetParam());
  }
  bool clang() const { return std::string_view(GetParam().cc).starts_with("clang"); }
  const KernelFixture& fx() const { return *fixture_; }
  std::unique_ptr<KernelFixture> fixture_;
};

TEST_P(DwarfIndexTest, LinkedImageFunctionsUnitsAndDeclarations) {
  auto idx = IndexDwarfFile(fx().vmlinux, {.jobs = 2});
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_FALSE(idx->relocatable);
  auto id = ReadFileBuildId(fx().vmlinux);
  ASSERT_TRUE(id.ok() && id->has_value());
  EXPECT_EQ(idx->build_id, **id);

  // Two static name_show, told apart by CU and declaration line.
  auto ns = Named(*idx, "name_show");
  ASSERT_EQ(ns.size(), 2u);
  EXPECT_EQ(idx->units[ns[0]->cu].name, "drivers/a/a.c");
  EXPECT_EQ(idx->units[ns[1]->cu].name, "drivers/b/b.c");
  EXPECT_EQ(idx->files[ns[0]->decl_file], "drivers/a/a.c");
  EXPECT_EQ(ns[0]->decl_line, static_cast<uint32_t>(fx().Line("drivers/a/a.c", "name_show")));
  EXPECT_EQ(ns[1]->decl_line, static_cast<uint32_t>(fx().Line("drivers/b/b.c", "name_show")));
  // a.c's copy has a hot range and a .cold range (gcc splits it; clang keeps one piece).
  EXPECT_EQ(ns[0]->ranges.size(), clang() ? 1u : 2u);

  // The header inline: same file:line in two CUs, flagged as out-of-line copies where the
  // compiler says it was declared inline (gcc: DW_INL_declared_inlined; clang records
  // DW_INL_inlined for every function with an abstract instance, declared inline or not).
  auto hh = Named(*idx, "hdr_helper");
  ASSERT_EQ(hh.size(), 2u);
  for (auto* f : hh) {
    EXPECT_EQ(idx->files[f->decl_file], "include/linux/common.h");
    EXPECT_EQ(f->decl_line, static_cast<uint32_t>(fx().Line("include/linux/common.h", "hdr_helper")));
    EXPECT_EQ(f->inline_copy, !clang());
  }
  EXPECT_NE(hh[0]->cu, hh[1]->cu);

  // The #included .c: same declaration, different compilation units.
  auto lb = Named(*idx, "load_binary");
  ASSERT_EQ(lb.size(), 2u);
  EXPECT_EQ(idx->units[lb[0]->cu].name, "fs/binfmt.c");
  EXPECT_EQ(idx->units[lb[1]->cu].name, "fs/compat.c");
  EXPECT_EQ(idx->files[lb[0]->decl_file], "fs/binfmt.c");
  EXPECT_EQ(idx->files[lb[1]->decl_file], "fs/binfmt.c");
  EXPECT_EQ(lb[0]->decl_line, lb[1]->decl_line);

  // Entry pcs are the nm addresses of the symbols.
  auto nm = NmText(fx().vmlinux);
  for (const auto& [name, addr] : nm) {
    if (name != "name_show" && name != "load_binary" && name != "hdr_helper") continue;
    bool found = std::any_of(
        idx->functions.begin(), idx->functions.end(),
        [&, &name = name, &addr = addr](const DwarfFunction& f) { return f.name == name && f.entry == addr; });
    EXPECT_TRUE(found) << name << " at " << std::hex << addr;
  }
  // The build directory is kept as DWARF has it; shown paths are source-tree relative.
  EXPECT_NE(idx->units[ns[0]->cu].comp_dir.find("reproducible-path/linux"), std::string::npos);
  for (const auto& f : idx->files) EXPECT_EQ(f.find("reproducible-path"), std::string::npos) << f;
}

TEST_P(DwarfIndexTest, SymbolLinesAgreeWithLlvmSymbolizer) {
  auto idx = IndexDwarfFile(fx().vmlinux, {.jobs = 2});
  ASSERT_TRUE(idx.ok()) << idx.status();
  auto nm = NmText(fx().vmlinux);
  ASSERT_GE(nm.size(), 8u);
  std::string input;
  for (const auto& [_, a] : nm) input += fmt::format("{:#x}\n", a);
  auto r = RunCommand("printf '" + input + "' | llvm-symbolizer-14 --obj='" + fx().vmlinux + "' --no-inlines");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream out(r.out);
  std::string fn, loc, blank;
  for (const auto& [name, addr] : nm) {
    std::getline(out, fn);
    std::getline(out, loc);
    std::getline(out, blank);
    // loc = /abs/path/file.c:LINE:COL
    size_t c2 = loc.rfind(':'), c1 = loc.rfind(':', c2 - 1);
    int line = std::stoi(loc.substr(c1 + 1, c2 - c1 - 1));
    std::string file = SourceTreeRelative(loc.substr(0, c1), "");
    auto it = std::find_if(idx->symbol_lines.begin(), idx->symbol_lines.end(),
                           [&addr = addr](const DwarfSymbolLine& l) { return l.addr == addr; });
    ASSERT_NE(it, idx->symbol_lines.end()) << name;
    EXPECT_EQ(it->line, static_cast<uint32_t>(line)) << name << " " << loc;
    EXPECT_EQ(idx->files[it->file], file) << name << " " << loc;
  }
}

// Bounded memory (BoundedDwarf) must not change a row: recycling every handle after each unit
// (and dropping the file's pages each time) gives the index a single unbounded handle gives.
TEST_P(DwarfIndexTest, RecyclingTheLibdwHandleAfterEveryUnitChangesNothing) {
  auto unbounded = IndexDwarfFile(fx().vmlinux, {.jobs = 1, .handle_budget = UINT64_MAX});
  auto one_unit = IndexDwarfFile(fx().vmlinux, {.jobs = 1, .handle_budget = 1});
  auto two_threads = IndexDwarfFile(fx().vmlinux, {.jobs = 2, .handle_budget = 1});
  ASSERT_TRUE(unbounded.ok() && one_unit.ok() && two_threads.ok());
  ASSERT_GE(unbounded->units.size(), 3u);
  EXPECT_FALSE(unbounded->symbol_lines.empty());
  EXPECT_EQ(symdex::testing::EncodedRows(*one_unit), symdex::testing::EncodedRows(*unbounded));
  EXPECT_EQ(symdex::testing::EncodedRows(*two_threads), symdex::testing::EncodedRows(*unbounded));
}

// The line tables (decl files, entry lines, symbol lines) read by ReadLineTable or by libdw:
// the same index, byte for byte.
TEST_P(DwarfIndexTest, TheSameIndexFromEitherLineReader) {
  size_t fast_units = 0, libdw_units = 99;
  auto fast = IndexDwarfFile(fx().vmlinux, {.jobs = 2, .units_fast_lines = &fast_units});
  ::setenv("SYMDEX_LINE_READER", "libdw", 1);
  auto libdw = IndexDwarfFile(fx().vmlinux, {.jobs = 2, .units_fast_lines = &libdw_units});
  ::unsetenv("SYMDEX_LINE_READER");
  ASSERT_TRUE(fast.ok() && libdw.ok());
  EXPECT_EQ(fast_units, fast->units.size());  // every unit took the fast path
  EXPECT_EQ(libdw_units, 0u);
  EXPECT_FALSE(fast->symbol_lines.empty());
  EXPECT_EQ(symdex::testing::EncodedRows(*fast), symdex::testing::EncodedRows(*libdw));
}

TEST_P(DwarfIndexTest, BoundedDwarfRecyclesOnlyPastItsBudgetAndStaysReadable) {
  BoundedDwarf h;
  ASSERT_TRUE(h.Open(fx().vmlinux, 100).ok());
  std::vector<Dwarf_Off> units;
  for (const UnitSpan& span : UnitSizes(h)) units.push_back(span.die);
  ASSERT_GE(units.size(), 3u);
  h.SetUnits(units);
  auto name_of_last = [&] {
    h.PrepareUnits();
    Dwarf_Die cu;
    if (dwarf_offdie(h.dwarf(), units.back(), &cu) == nullptr) return std::string("(unreadable)");
    const char* n = dwarf_diename(&cu);
    return std::string(n ? n : "(no name)");
  };
  const std::string before = name_of_last();
  EXPECT_NE(before, "(unreadable)");
  auto r = h.Read(99);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(h.recycles(), 0u);
  r = h.Read(1);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_EQ(h.recycles(), 1u);
  EXPECT_EQ(name_of_last(), before);  // a new handle, the file's pages read again
  h.DropPages();
  EXPECT_EQ(name_of_last(), before);
}

// Compressed debug sections (CONFIG_DEBUG_INFO_COMPRESSED, objcopy --compress-debug-sections):
// libdw decompresses them by rewriting section headers, which must not happen in symdex's
// read-only mapping. Such a file is read through libelf's own mapping, with the same answers.
TEST_P(DwarfIndexTest, CompressedDebugSectionsAreReadThroughLibelfWithTheSameAnswers) {
  const std::string z = fx().dir / "vmlinux.zlib";
  ASSERT_EQ(RunCommand("objcopy --compress-debug-sections=zlib '" + fx().vmlinux + "' '" + z + "'").exit_code, 0);
  ASSERT_NE(RunCommand("readelf -SW '" + z + "' | grep -E 'debug_info .* C '").out, "") << "not compressed";
  BoundedDwarf plain, compressed;
  ASSERT_TRUE(plain.Open(fx().vmlinux, 1).ok());
  ASSERT_TRUE(compressed.Open(z, 1).ok());
  EXPECT_TRUE(plain.drops_pages());
  EXPECT_FALSE(compressed.drops_pages());
  auto want = IndexDwarfFile(fx().vmlinux, {.jobs = 1, .handle_budget = 1});
  auto got = IndexDwarfFile(z, {.jobs = 2, .handle_budget = 1});
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(symdex::testing::EncodedRows(*got), symdex::testing::EncodedRows(*want));
}

TEST_P(DwarfIndexTest, RelocatableModuleUsesSectionOffsets) {
  auto idx = IndexDwarfFile(fx().module);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_TRUE(idx->relocatable);
  EXPECT_EQ(idx->reader, "symdex (relocated by symdex)");  // libdwfl's answers: relocated_elf_test.cc
  ASSERT_TRUE(idx->build_id.has_value());
  auto ns = Named(*idx, "name_show");
  ASSERT_EQ(ns.size(), 2u);
  auto nm = NmText(fx().module);  // ET_REL: nm prints section offsets
  for (const auto* f : ns) {
    ASSERT_NE(f->entry_section, kNoSection);
    EXPECT_EQ(idx->sections[f->entry_section], ".text");
    bool found = std::any_of(nm.begin(), nm.end(),
                             [&](const auto& s) { return s.first == "name_show" && s.second == f->entry; });
    EXPECT_TRUE(found) << std::hex << f->entry;
  }
  // gcc's .cold part lives in .text.unlikely (clang does not split the function).
  bool cold = std::any_of(ns[0]->ranges.begin(), ns[0]->ranges.end(),
                          [&](const AddrRange& r) { return idx->sections[r.section] == ".text.unlikely"; });
  EXPECT_EQ(cold, !clang());
  EXPECT_FALSE(idx->symbol_lines.empty());
}

TEST(DwarfIndexErrorTest, NotElfAndNoDwarf) {
  symdex::testing::TempDir d;
  symdex::testing::WriteFile(d / "junk", "not an elf");
  auto r = IndexDwarfFile(d / "junk");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("not an ELF"), std::string::npos);
  symdex::testing::CompileObject("int f(int x) { return x; }", d / "nodebug.o", "-O2 -g0");
  EXPECT_FALSE(IndexDwarfFile(d / "nodebug.o").ok());
  EXPECT_FALSE(IndexDwarfFile(d / "missing").ok());
}

INSTANTIATE_TEST_SUITE_P(Toolchains, DwarfIndexTest,
                         ::testing::Values(symdex::testing::Toolchain{4, "gcc"}, symdex::testing::Toolchain{5, "gcc"},
                                           symdex::testing::Toolchain{5, "clang-14"}),
                         [](const auto& info) { return info.param.Name(); });

TEST(SourcePathTest, StripsBuildPrefixes) {
  EXPECT_EQ(SourceTreeRelative("/build/reproducible-path/linux-6.1.192/arch/x86/kernel/head_64.S",
                               "/build/reproducible-path/linux-6.1.192/debian/build/build_amd64_none_cloud-amd64"),
            "arch/x86/kernel/head_64.S");
  EXPECT_EQ(SourceTreeRelative("debian/build/build_amd64_none_cloud-amd64/arch/x86/events/amd/core.c",
                               "debian/build/build_amd64_none_cloud-amd64"),
            "arch/x86/events/amd/core.c");
  EXPECT_EQ(SourceTreeRelative("/build/linux/arch/x86/kernel/../../x86/xen/xen-head.S", ""), "arch/x86/xen/xen-head.S");
  EXPECT_EQ(SourceTreeRelative("drivers/pnp/card.c", "/anything"), "drivers/pnp/card.c");
  // A prefix that itself contains a top-level directory name: comp_dir ancestry wins.
  EXPECT_EQ(SourceTreeRelative("/home/me/kernel/src/linux/fs/open.c", "/home/me/kernel/src/linux"), "fs/open.c");
  EXPECT_EQ(SourceTreeRelative("/usr/include/stdio.h", ""), "usr/include/stdio.h");
  EXPECT_EQ(NormalizeLexically("a/./b/../c"), "a/c");
  EXPECT_EQ(NormalizeLexically("/x/../../y"), "/y");
  EXPECT_EQ(NormalizeLexically("../a"), "../a");
}

}  // namespace
}  // namespace symdex::debuginfo
