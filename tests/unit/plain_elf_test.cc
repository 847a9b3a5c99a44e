// Debug files with compressed sections (plain_elf.h): objcopy's zlib and zstd copies of the
// fixture kernel (gcc's and clang's DWARF) index and map to the same bytes as the plain file, read
// by symdex's own DIE scanner and line reader (no unit left to libdw); damaged compressed
// sections are refused with a message naming the section, never read as something else.
#include "server/debuginfo/files/plain_elf.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/debuginfo/worker/worker_protocol.h"
#include "tests/unit/dwarf_rows.h"
#include "tests/unit/kernel_fixture.h"
#include "tests/unit/test_util.h"

namespace symdex::debuginfo {
namespace {

using symdex::testing::MustRun;
using symdex::testing::RunCommand;

bool Have(const std::string& tool) { return RunCommand("command -v " + tool + " >/dev/null").exit_code == 0; }

// objcopy's copy of `in` with its debug sections compressed by `how` (zlib or zstd); "" when this
// objcopy cannot (binutils before 2.40 or built without zstd).
std::string Compressed(const std::string& in, const std::string& dir, const std::string& how) {
  const std::string out = dir + "/vmlinux-" + how;
  if (RunCommand("objcopy --compress-debug-sections=" + how + " '" + in + "' '" + out + "'").exit_code != 0) return "";
  return out;
}

struct Variant {
  const char* cc;
  const char* how;
};

class CompressedDebugTest : public ::testing::TestWithParam<Variant> {};

TEST_P(CompressedDebugTest, IndexesAndMapsAsThePlainFile) {
  if (!Have(GetParam().cc)) GTEST_SKIP() << GetParam().cc << " not installed";
  symdex::testing::KernelFixture fx(5, GetParam().cc);
  const std::string copy = Compressed(fx.vmlinux, fx.dir.path(), GetParam().how);
  if (copy.empty()) GTEST_SKIP() << "objcopy cannot compress with " << GetParam().how;
  // The copy's sections are compressed (else the test proves nothing).
  const auto headers = RunCommand("readelf -SW '" + copy + "'");
  ASSERT_NE(headers.out.find(" C "), std::string::npos) << headers.out;

  auto plain_file = PlainElf::Open(copy, 2);
  ASSERT_TRUE(plain_file.ok()) << plain_file.status();
  EXPECT_EQ(plain_file->compression(), GetParam().how);
  EXPECT_GE(plain_file->sections_decompressed(), 4u);  // info, abbrev, line, str at least

  auto plain = IndexDwarfFile(fx.vmlinux, {.jobs = 1});
  size_t scanned = 0;
  std::vector<std::string> misses;
  auto packed = IndexDwarfFile(copy, {.jobs = 2, .units_scanned = &scanned, .scan_misses = &misses});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(scanned, packed->units.size()) << (misses.empty() ? "" : misses[0]);
  EXPECT_GE(packed->functions.size(), 5u);
  EXPECT_EQ(plain->reader, "symdex");
  EXPECT_EQ(packed->reader, std::string("symdex, ") + GetParam().how + " sections decompressed");
  EXPECT_TRUE(symdex::testing::EncodedRows(*plain) == symdex::testing::EncodedRows(*packed));

  AddrMapStats stats;
  auto plain_map = BuildAddrMap(fx.vmlinux, 1);
  auto packed_map = BuildAddrMap(copy, 2, &stats);
  ASSERT_TRUE(plain_map.ok()) << plain_map.status();
  ASSERT_TRUE(packed_map.ok()) << packed_map.status();
  EXPECT_EQ(stats.units_scanned, stats.units);
  EXPECT_TRUE(*plain_map == *packed_map);
}

INSTANTIATE_TEST_SUITE_P(Sections, CompressedDebugTest,
                         ::testing::Values(Variant{"gcc", "zlib"}, Variant{"gcc", "zstd"}, Variant{"clang-14", "zlib"},
                                           Variant{"clang-14", "zstd"}),
                         [](const ::testing::TestParamInfo<Variant>& i) {
                           std::string cc = i.param.cc;
                           std::replace(cc.begin(), cc.end(), '-', '_');
                           return cc + "_" + i.param.how;
                         });

TEST(PlainElfTest, AnUncompressedFileIsReadInPlace) {
  symdex::testing::KernelFixture fx(5);
  auto p = PlainElf::Open(fx.vmlinux);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->path(), fx.vmlinux);
  EXPECT_EQ(p->compression(), "");
}

// A TMPDIR that takes no file (a read-only sandbox's, or a typo) is passed over for /var/tmp.
TEST(PlainElfTest, AnUnwritableTmpdirFallsBack) {
  symdex::testing::KernelFixture fx(5);
  const std::string copy = Compressed(fx.vmlinux, fx.dir.path(), "zlib");
  ASSERT_FALSE(copy.empty());
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", (fx.dir / "no/such/dir").c_str(), 1);
  auto p = PlainElf::Open(copy);
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->compression(), "zlib");
  EXPECT_NE(p->path(), copy);
}

// Where .debug_info's section header and compression header lie in the copy's bytes.
struct InfoSection {
  size_t shdr = 0;  // offset of its Elf64_Shdr
  Elf64_Shdr sh{};
};
InfoSection FindInfo(const std::string& elf) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  Elf64_Shdr strtab;
  std::memcpy(&strtab, elf.data() + eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr), sizeof strtab);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    InfoSection s;
    s.shdr = eh.e_shoff + i * sizeof(Elf64_Shdr);
    std::memcpy(&s.sh, elf.data() + s.shdr, sizeof s.sh);
    if (std::strcmp(elf.data() + strtab.sh_offset + s.sh.sh_name, ".debug_info") == 0) return s;
  }
  return {};
}

TEST(PlainElfTest, DamagedCompressedSectionsAreRefusedByName) {
  symdex::testing::KernelFixture fx(5);
  const std::string copy = Compressed(fx.vmlinux, fx.dir.path(), "zstd");
  if (copy.empty()) GTEST_SKIP() << "objcopy cannot compress with zstd";
  const std::string good = symdex::testing::Slurp(copy);
  const InfoSection info = FindInfo(good);
  ASSERT_NE(info.shdr, 0u);
  ASSERT_NE(info.sh.sh_flags & SHF_COMPRESSED, 0u);
  Elf64_Chdr ch;
  std::memcpy(&ch, good.data() + info.sh.sh_offset, sizeof ch);

  struct Case {
    const char* what;
    std::string bytes;
    const char* says;
  };
  std::vector<Case> cases;
  {
    std::string b = good;  // an algorithm nobody knows
    Elf64_Chdr c = ch;
    c.ch_type = 7;
    std::memcpy(b.data() + info.sh.sh_offset, &c, sizeof c);
    cases.push_back({"unknown algorithm", b, "algorithm 7"});
  }
  {
    std::string b = good;  // more bytes declared than the stream holds
    Elf64_Chdr c = ch;
    c.ch_size += 4096;
    std::memcpy(b.data() + info.sh.sh_offset, &c, sizeof c);
    cases.push_back({"size larger than the stream", b, "its header declares"});
  }
  {
    std::string b = good;  // fewer: the stream would overrun the declared size
    Elf64_Chdr c = ch;
    c.ch_size /= 2;
    std::memcpy(b.data() + info.sh.sh_offset, &c, sizeof c);
    cases.push_back({"size smaller than the stream", b, "exceeds the limit"});
  }
  {
    std::string b = good;  // the stream cut short
    std::memset(b.data() + info.sh.sh_offset + sizeof ch + (info.sh.sh_size - sizeof ch) / 2, 0,
                (info.sh.sh_size - sizeof ch) / 2);
    cases.push_back({"corrupt stream", b, "zstd"});
  }
  {
    std::string b = good;  // a section past the end of the file
    Elf64_Shdr sh = info.sh;
    sh.sh_offset = good.size() + 1;
    std::memcpy(b.data() + info.shdr, &sh, sizeof sh);
    cases.push_back({"section outside the file", b, "outside the file"});
  }
  {
    std::string b = good;  // a size over the limit is refused before anything is written
    Elf64_Chdr c = ch;
    c.ch_size = uint64_t{1} << 40;
    std::memcpy(b.data() + info.sh.sh_offset, &c, sizeof c);
    cases.push_back({"absurd size", b, "over the limit"});
  }
  symdex::testing::TempDir dir;
  for (const Case& c : cases) {
    const std::string path = dir / "damaged";
    symdex::testing::WriteFile(path, c.bytes);
    auto p = PlainElf::Open(path, 2);
    ASSERT_FALSE(p.ok()) << c.what;
    const std::string msg(p.status().message());
    EXPECT_NE(msg.find(path), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.what << ": " << msg;
    // The indexer says the same, about the file it was given.
    auto idx = IndexDwarfFile(path, {.jobs = 1});
    ASSERT_FALSE(idx.ok()) << c.what;
    EXPECT_NE(std::string(idx.status().message()).find(path), std::string::npos) << idx.status();
    EXPECT_EQ(std::string(idx.status().message()).find("/proc/self/fd"), std::string::npos) << idx.status();
  }
}

}  // namespace
}  // namespace symdex::debuginfo
