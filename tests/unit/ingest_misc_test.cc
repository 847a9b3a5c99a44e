#include <gtest/gtest.h>

#include <cstring>

#include "server/common/build_id.h"
#include "server/ingest/elf_notes.h"
#include "server/ingest/proc_modules.h"
#include "tests/unit/test_util.h"

namespace symdex::ingest {
namespace {

TEST(ProcModulesTest, ParsesLiveAndHiddenAddresses) {
  constexpr char kText[] = R"(uio_pdrv_genirq 16384 0 - Live 0xffffffffc0a10000
uio 24576 1 uio_pdrv_genirq, Live 0xffffffffc0a00000 (E)
ext4 999424 1 mbcache,jbd2, Live 0x0000000000000000
)";
  auto mods = ParseProcModules(kText, "/proc/modules");
  ASSERT_TRUE(mods.ok()) << mods.status();
  ASSERT_EQ(mods->size(), 3u);
  EXPECT_EQ((*mods)[0].name, "uio_pdrv_genirq");
  EXPECT_EQ((*mods)[0].size, 16384u);
  EXPECT_EQ((*mods)[0].addr, 0xffffffffc0a10000u);
  EXPECT_TRUE((*mods)[0].deps.empty());
  EXPECT_EQ((*mods)[1].deps, std::vector<std::string>{"uio_pdrv_genirq"});
  EXPECT_EQ((*mods)[2].deps, (std::vector<std::string>{"mbcache", "jbd2"}));
  EXPECT_EQ((*mods)[2].addr, 0u);
}

TEST(ProcModulesTest, RejectsShortLinesWithLineNumber) {
  auto mods = ParseProcModules("a 1 0 - Live 0x10\nb 2 0 -\n", "/proc/modules");
  ASSERT_FALSE(mods.ok());
  EXPECT_NE(std::string(mods.status().message()).find("/proc/modules:2:"), std::string::npos);
  EXPECT_FALSE(ParseProcModules("a x 0 - Live 0x10\n", "m").ok());
  EXPECT_FALSE(ParseProcModules("a 1 0 - Live 0xZZ\n", "m").ok());
}

using symdex::testing::ElfNote;
constexpr auto Note = ElfNote;

TEST(ElfNotesTest, FindsGnuBuildIdAfterOtherNotes) {
  const std::string id_bytes("\x24\xa3\x59\x8f\xd7\x00\x11\x4d\x0a\x1b\x1a\x48\x71\xba\xdc\xee\x75\xd0\xac\xac", 20);
  std::string blob = Note(6, std::string_view("Linux\0", 6), "abcd") + Note(3, std::string_view("Xen\0", 4), "zz") +
                     Note(3, std::string_view("GNU\0", 4), id_bytes);
  auto id = FindGnuBuildId(blob);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(id->has_value());
  EXPECT_EQ((*id)->ToHex(), "24a3598fd700114d0a1b1a4871badcee75d0acac");
}

TEST(ElfNotesTest, NoBuildIdAndTruncatedNotes) {
  auto none = FindGnuBuildId(Note(6, std::string_view("Linux\0", 6), "x"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  std::string blob = Note(3, std::string_view("GNU\0", 4), std::string(20, 'a'));
  blob.resize(blob.size() - 5);
  EXPECT_FALSE(FindGnuBuildId(blob).ok());
  // A huge descsz must not be trusted.
  std::string hostile = Note(3, std::string_view("GNU\0", 4), "abcd");
  uint32_t big = 0xfffffff0u;
  std::memcpy(hostile.data() + 4, &big, 4);
  EXPECT_FALSE(FindGnuBuildId(hostile).ok());
}

TEST(BuildIdTest, HexRoundTrip) {
  auto id = BuildId::FromHex("24A3598fd700");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->ToHex(), "24a3598fd700");
  EXPECT_EQ(id->raw().size(), 6u);
  EXPECT_FALSE(BuildId::FromHex("abc").has_value());
  EXPECT_FALSE(BuildId::FromHex("zz").has_value());
  EXPECT_FALSE(BuildId::FromHex("").has_value());
}

}  // namespace
}  // namespace symdex::ingest
