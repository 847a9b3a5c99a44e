#include "server/ingest/elf_symbols.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "server/common/file_util.h"
#include "tests/unit/test_util.h"

namespace symdex::ingest {
namespace {

using symdex::testing::CompileObject;
using symdex::testing::RunCommand;
using symdex::testing::TempDir;

// A stand-in for a kernel module: static functions sharing names with other files, code in
// .init.text/.exit.text, data/bss/rodata, a weak function, .modinfo and a build-ID note.
constexpr char kModuleSource[] = R"(
static int counter;
static const char table[] = "rodata";
int global_data = 3;
__attribute__((noinline)) static int name_show(int x) { return x * 7 + counter; }
__attribute__((noinline)) int exported_fn(int x) { return name_show(x) + table[x & 3]; }
__attribute__((weak)) int weak_fn(void) { return 1; }
__attribute__((section(".init.text"), noinline)) int init_module(void) { return exported_fn(1); }
__attribute__((section(".exit.text"), noinline)) void cleanup_module(void) { counter = 0; }
static const char modinfo_name[] __attribute__((section(".modinfo"), used, aligned(1))) = "license=GPL\0name=fake_mod";
__asm__(".section .note.gnu.build-id,\"a\",@note\n"
        ".long 4\n.long 20\n.long 3\n.asciz \"GNU\"\n"
        ".byte 0xde,0xad,0xbe,0xef,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\n"
        ".previous\n");
)";

std::multiset<std::pair<std::string, char>> NmSymbols(const std::string& path) {
  auto r = RunCommand("nm '" + path + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::multiset<std::pair<std::string, char>> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (!(f >> addr >> type >> name)) continue;  // undefined symbols have no address
    out.emplace(name, type[0]);
  }
  return out;
}

TEST(ElfSymbolsTest, MatchesNmOnACompiledModuleObject) {
  TempDir d;
  CompileObject(kModuleSource, d / "fake_mod.ko");
  auto image = ReadFileBounded(d / "fake_mod.ko");
  ASSERT_TRUE(image.ok());
  auto tab = ReadElfSymbols(*image);
  ASSERT_TRUE(tab.ok()) << tab.status();
  EXPECT_TRUE(tab->relocatable);
  EXPECT_EQ(tab->modinfo_name, "fake_mod");
  ASSERT_TRUE(tab->build_id.has_value());
  EXPECT_EQ(tab->build_id->ToHex(), "deadbeef0102030405060708090a0b0c0d0e0f10");

  std::multiset<std::pair<std::string, char>> ours;
  for (const auto& s : tab->symbols) ours.emplace(s.name, s.type);
  EXPECT_EQ(ours, NmSymbols(d / "fake_mod.ko"));

  auto find = [&](const std::string& n) {
    auto it = std::find_if(tab->symbols.begin(), tab->symbols.end(), [&](const ElfSymbol& s) { return s.name == n; });
    EXPECT_NE(it, tab->symbols.end()) << n;
    return *it;
  };
  EXPECT_EQ(find("name_show").type, 't');
  EXPECT_EQ(find("name_show").section, ".text");
  EXPECT_GT(find("name_show").size, 0u);
  EXPECT_EQ(find("exported_fn").type, 'T');
  EXPECT_EQ(find("init_module").section, ".init.text");
  EXPECT_EQ(find("cleanup_module").section, ".exit.text");
  EXPECT_EQ(find("weak_fn").type, 'W');
  EXPECT_EQ(find("counter").type, 'b');
  EXPECT_EQ(find("global_data").type, 'D');
  EXPECT_EQ(find("table").type, 'r');
}

TEST(ElfSymbolsTest, CorruptInputsGiveErrorsNotCrashes) {
  std::string junk = "this is not an ELF file at all";
  EXPECT_FALSE(ReadElfSymbols(junk).ok());

  TempDir d;
  CompileObject(kModuleSource, d / "m.o");
  auto image = ReadFileBounded(d / "m.o");
  ASSERT_TRUE(image.ok());
  for (size_t cut : {size_t{16}, size_t{64}, image->size() / 2, image->size() - 1}) {
    std::string truncated = image->substr(0, cut);
    auto r = ReadElfSymbols(truncated);  // must not crash; may fail
    if (r.ok()) {
      EXPECT_LE(r->symbols.size(), 20u);
    }
  }
  // Cut anywhere after the ELF header: truncated, never "stripped" (the cure differs: fetch the
  // file again, not an unstripped one).
  for (size_t cut : {size_t{64}, size_t{200}, image->size() / 2, image->size() - 1}) {
    std::string truncated = image->substr(0, cut);
    auto r = ReadElfSymbols(truncated);
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_NE(std::string(r.status().message()).find("truncated"), std::string::npos) << cut << ": " << r.status();
    EXPECT_EQ(std::string(r.status().message()).find("stripped"), std::string::npos) << cut << ": " << r.status();
  }
  ASSERT_EQ(RunCommand("strip -o '" + (d / "stripped.o") + "' '" + (d / "m.o") + "'").exit_code, 0);
  auto stripped = ReadFileBounded(d / "stripped.o");
  auto r = ReadElfSymbols(*stripped);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("no symbol table"), std::string::npos);
}

}  // namespace
}  // namespace symdex::ingest
