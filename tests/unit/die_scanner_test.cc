// The DIE scanner (die_scanner.h) against its oracle, libdw: the DWARF index and the address map
// of the fixture kernel (DWARF 4 and 5) and of the Debian vmlinux (when the corpus is fetched)
// are the same bytes whether the scanner or libdw read the DIEs — and the scanner did read every
// unit (a scanner that declined everything would pass the equality trivially).
#include "server/debuginfo/dwarf/die_scanner.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "server/common/sanitizer.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/debuginfo/worker/worker_protocol.h"
#include "tests/unit/dwarf_rows.h"
#include "tests/unit/kernel_fixture.h"
#include "tests/unit/test_util.h"

namespace symdex::debuginfo {
namespace {

using ScanClock = std::chrono::steady_clock;

double Seconds(ScanClock::time_point a, ScanClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string ScannerCorpusVmlinux() {
  return symdex::testing::DebianDbgCorpusFile("usr/lib/debug/boot/vmlinux-6.1.0-57-cloud-amd64");
}

// Sets SYMDEX_DIE_READER=libdw for its lifetime.
struct ForceLibdw {
  ForceLibdw() { ::setenv("SYMDEX_DIE_READER", "libdw", 1); }
  ~ForceLibdw() { ::unsetenv("SYMDEX_DIE_READER"); }
};

std::string Misses(const std::vector<std::string>& m) {
  std::string s;
  for (const auto& x : m) s += "\n  " + x;
  return s;
}

struct IndexRun {
  absl::StatusOr<DwarfIndex> index = absl::UnknownError("not run");
  size_t scanned = 0;
  std::vector<std::string> misses;
  double seconds = 0;
};

IndexRun Index(const std::string& path, unsigned jobs, bool libdw) {
  IndexRun r;
  std::optional<ForceLibdw> force;
  if (libdw) force.emplace();
  const auto t0 = ScanClock::now();
  r.index = IndexDwarfFile(path, {.jobs = jobs, .units_scanned = &r.scanned, .scan_misses = &r.misses});
  r.seconds = Seconds(t0, ScanClock::now());
  return r;
}

void ExpectSameIndex(const std::string& path, unsigned jobs) {
  IndexRun scan = Index(path, jobs, false), libdw = Index(path, jobs, true);
  ASSERT_TRUE(scan.index.ok()) << scan.index.status();
  ASSERT_TRUE(libdw.index.ok()) << libdw.index.status();
  EXPECT_EQ(scan.scanned, scan.index->units.size()) << "units the scanner declined:" << Misses(scan.misses);
  EXPECT_EQ(libdw.scanned, 0u);
  EXPECT_EQ(scan.index->reader, "symdex");  // what the index records and `symdex status` shows
  EXPECT_EQ(libdw.index->reader, "libdw");
  EXPECT_GE(scan.index->functions.size(), 5u);
  EXPECT_EQ(scan.index->functions.size(), libdw.index->functions.size());
  EXPECT_EQ(scan.index->variables.size(), libdw.index->variables.size());
  EXPECT_TRUE(symdex::testing::EncodedRows(*scan.index) == symdex::testing::EncodedRows(*libdw.index)) << path;
  std::printf("%s, %u threads: DWARF index by the scanner %.2f s, by libdw %.2f s\n", path.c_str(), jobs, scan.seconds,
              libdw.seconds);
}

// The address map (line rows, function spans, inline trees: every byte) from either reader.
void ExpectSameMap(const std::string& path, unsigned jobs) {
  AddrMapStats scan_stats, libdw_stats;
  const auto t0 = ScanClock::now();
  auto scan = BuildAddrMap(path, jobs, &scan_stats);
  const auto t1 = ScanClock::now();
  absl::StatusOr<std::string> libdw = absl::UnknownError("not run");
  {
    ForceLibdw force;
    libdw = BuildAddrMap(path, jobs, &libdw_stats);
  }
  const auto t2 = ScanClock::now();
  ASSERT_TRUE(scan.ok()) << scan.status();
  ASSERT_TRUE(libdw.ok()) << libdw.status();
  EXPECT_EQ(scan_stats.units_scanned, scan_stats.units);
  EXPECT_EQ(libdw_stats.units_scanned, 0u);
  EXPECT_GT(scan_stats.nodes, 5u);
  EXPECT_TRUE(*scan == *libdw) << path << ": maps differ (" << scan->size() << " vs " << libdw->size() << " bytes)";
  std::printf("%s, %u threads: address map by the scanner %.2f s, by libdw %.2f s\n", path.c_str(), jobs,
              Seconds(t0, t1), Seconds(t1, t2));
}

// The index handed out in parts (DwarfIndexOptions::on_part, as the worker streams it) and
// appended back together is the index made in one piece, byte for byte. Returns the parts.
size_t ExpectPartsMakeTheWhole(const std::string& path, unsigned jobs) {
  const auto whole = IndexDwarfFile(path, {.jobs = jobs});
  EXPECT_TRUE(whole.ok()) << whole.status();
  if (!whole.ok()) return 0;
  DwarfIndex joined;
  size_t parts = 0;
  std::vector<size_t> part_units;
  auto rest = IndexDwarfFile(path, {.jobs = jobs, .on_part = [&](DwarfIndex&& part) {
                                      ++parts;
                                      part_units.push_back(part.units.size());
                                      // Each part's ids already count the parts before it.
                                      EXPECT_TRUE(AppendDwarfIndex(EncodeDwarfIndex(part), joined).ok());
                                    }});
  EXPECT_TRUE(rest.ok()) << rest.status();
  if (!rest.ok()) return parts;
  EXPECT_TRUE(AppendDwarfIndex(EncodeDwarfIndex(*rest), joined).ok());
  EXPECT_FALSE(rest->symbol_lines.empty());  // the lines come with the rest, after every unit
  for (size_t n : part_units) EXPECT_GT(n, 0u);
  EXPECT_EQ(joined.units.size(), whole->units.size());
  EXPECT_EQ(joined.functions.size(), whole->functions.size());
  EXPECT_TRUE(symdex::testing::EncodedRows(joined) == symdex::testing::EncodedRows(*whole))
      << path << ", " << parts << " parts";
  // libdw's reading (the scanner's fallback) hands out no parts, and the same index.
  ::setenv("SYMDEX_DIE_READER", "libdw", 1);
  size_t libdw_parts = 0;
  auto by_libdw = IndexDwarfFile(path, {.jobs = jobs, .on_part = [&](DwarfIndex&&) { ++libdw_parts; }});
  ::unsetenv("SYMDEX_DIE_READER");
  EXPECT_TRUE(by_libdw.ok()) << by_libdw.status();
  EXPECT_EQ(libdw_parts, 0u);
  if (by_libdw.ok()) {
    EXPECT_TRUE(symdex::testing::EncodedRows(*by_libdw) == symdex::testing::EncodedRows(*whole));
  }
  return parts;
}

// gcc's DWARF 4 and 5 as Debian's kernels carry them, clang's DWARF 5 (strx / addrx / rnglistx
// forms, .debug_str_offsets, .debug_addr, DW_OP_addrx, no .debug_aranges).
using symdex::testing::Toolchain;
class DieScannerTest : public ::testing::TestWithParam<Toolchain> {
 protected:
  void SetUp() override {
    if (!GetParam().Installed()) GTEST_SKIP() << GetParam().cc << " not installed";
  }
  std::unique_ptr<symdex::testing::KernelFixture> Fixture() const {
    return std::make_unique<symdex::testing::KernelFixture>(GetParam());
  }
};

TEST_P(DieScannerTest, TheFixtureKernelsIndexInPartsIsTheWholeIndex) {
  const auto fixture = Fixture();
  const symdex::testing::KernelFixture& fx = *fixture;
  const size_t units = IndexDwarfFile(fx.vmlinux, {.jobs = 1})->units.size();
  for (unsigned jobs : {1u, 2u}) {
    const size_t parts = ExpectPartsMakeTheWhole(fx.vmlinux, jobs);
    // A part per eighth of .debug_info, the last kept: as many as the units allow.
    if (units >= 2) {
      EXPECT_GE(parts, 1u) << units << " units";
    }
    EXPECT_LT(parts, std::max<size_t>(units, 1));
  }
}

TEST_P(DieScannerTest, TheFixtureKernelsIndexIsTheSameAsLibdws) {
  const auto fixture = Fixture();
  const symdex::testing::KernelFixture& fx = *fixture;
  ExpectSameIndex(fx.vmlinux, 1);
  ExpectSameIndex(fx.vmlinux, 2);
}

TEST_P(DieScannerTest, TheFixtureKernelsAddressMapIsTheSameAsLibdws) {
  const auto fixture = Fixture();
  const symdex::testing::KernelFixture& fx = *fixture;
  ExpectSameMap(fx.vmlinux, 1);
  ExpectSameMap(fx.vmlinux, 2);
}

INSTANTIATE_TEST_SUITE_P(Dwarf, DieScannerTest,
                         ::testing::Values(Toolchain{4, "gcc"}, Toolchain{5, "gcc"}, Toolchain{5, "clang-14"}),
                         [](const ::testing::TestParamInfo<Toolchain>& i) { return i.param.Name(); });

TEST(DieScannerCorpusTest, TheDebianDwarfIndexIsTheSameAsLibdws) {
  const std::string vmlinux = ScannerCorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "two whole-kernel indexes: the release build runs this";
  ExpectSameIndex(vmlinux, 2);
}

TEST(DieScannerCorpusTest, TheDebianIndexInPartsIsTheWholeIndex) {
  const std::string vmlinux = ScannerCorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "three whole-kernel indexes: the release build runs this";
  EXPECT_GE(ExpectPartsMakeTheWhole(vmlinux, 2), 6u);
}

TEST(DieScannerCorpusTest, TheDebianAddressMapIsTheSameAsLibdws) {
  const std::string vmlinux = ScannerCorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "two whole-kernel maps: the release build runs this";
  ExpectSameMap(vmlinux, 2);
}

// Where `name` lies in the ELF file's bytes (64-bit little-endian: the fixture's), {0, 0} if absent.
std::pair<size_t, size_t> SectionBytes(const std::string& elf, const std::string& name) {
  auto u = [&](size_t off, size_t n) {
    uint64_t v = 0;
    std::memcpy(&v, elf.data() + off, n);
    return static_cast<size_t>(v);
  };
  const size_t shoff = u(0x28, 8), shentsize = u(0x3a, 2), shnum = u(0x3c, 2), shstrndx = u(0x3e, 2);
  const size_t strtab = u(shoff + shstrndx * shentsize + 0x18, 8);
  for (size_t i = 0; i < shnum; ++i) {
    const size_t sh = shoff + i * shentsize;
    if (std::strcmp(elf.c_str() + strtab + u(sh, 4), name.c_str()) == 0) return {u(sh + 0x18, 8), u(sh + 0x20, 8)};
  }
  return {0, 0};
}

// Damaged linked files: whatever the damage, reading with the scanner gives what reading with
// libdw alone gives — the same error, or the same index and the same address map. (The scanner
// declines a unit it cannot read exactly and libdw reads it; a unit the scanner reads where libdw
// would fail or read otherwise shows up here as a difference.)
TEST_P(DieScannerTest, DamagedFilesReadTheSameAsWithLibdwAlone) {
  const auto fixture = Fixture();
  const symdex::testing::KernelFixture& fx = *fixture;
  symdex::testing::TempDir dir;
  const std::string good = symdex::testing::Slurp(fx.vmlinux);
  ASSERT_FALSE(good.empty());
  std::vector<std::string> names = {".debug_info",   ".debug_info",
                                    ".debug_info",   ".debug_info",
                                    ".debug_abbrev", GetParam().dwarf >= 5 ? ".debug_rnglists" : ".debug_ranges",
                                    ".debug_str",    ".debug_line"};
  if (std::string_view(GetParam().cc).starts_with("clang"))
    names.insert(names.end(), {".debug_str_offsets", ".debug_addr"});
  // SYMDEX_DAMAGE_ROUNDS / SYMDEX_DAMAGE_SEED: a longer or different run by hand.
  const char* rounds_env = std::getenv("SYMDEX_DAMAGE_ROUNDS");
  const char* seed_env = std::getenv("SYMDEX_DAMAGE_SEED");
  const int rounds = rounds_env ? std::atoi(rounds_env) : 120;
  std::mt19937 rng((seed_env ? static_cast<unsigned>(std::atoi(seed_env)) : 1234u) + GetParam().dwarf);
  size_t same_error = 0, same_output = 0, damaged_but_read = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::string& name = names[rng() % names.size()];
    const auto [off, size] = SectionBytes(good, name);
    ASSERT_GT(size, 0u) << name;
    std::string bad = good;
    const size_t at = off + rng() % size;
    std::string what;
    switch (rng() % 4) {
      case 0:
        bad[at] = static_cast<char>(rng());
        what = "a random byte";
        break;
      case 1: {
        const size_t n = std::min<size_t>(1 + rng() % 32, off + size - at);
        std::memset(bad.data() + at, 0, n);
        what = "zeros";
        break;
      }
      case 2: {
        const size_t n = std::min<size_t>(1 + rng() % 8, off + size - at);
        for (size_t i = 0; i < n; ++i) bad[at + i] = static_cast<char>(rng());
        what = "random bytes";
        break;
      }
      default:
        bad[at] = static_cast<char>(0xff);
        what = "0xff";
        break;
    }
    const char* keep = std::getenv("SYMDEX_DAMAGE_KEEP");  // where to leave the last copy
    const std::string path = keep ? std::string(keep) : dir / "damaged";
    symdex::testing::WriteFile(path, bad);
    const std::string where = name + " + " + std::to_string(at - off) + " (" + what + ")";
    IndexRun scan = Index(path, 1, false), libdw = Index(path, 1, true);
    ASSERT_EQ(scan.index.ok(), libdw.index.ok())
        << where << ": " << (scan.index.ok() ? libdw.index.status() : scan.index.status());
    if (scan.index.ok()) {
      ASSERT_TRUE(symdex::testing::EncodedRows(*scan.index) == symdex::testing::EncodedRows(*libdw.index)) << where;
      ++same_output;
      if (scan.index->units.size() != scan.scanned) ++damaged_but_read;
    } else {
      ASSERT_EQ(scan.index.status().message(), libdw.index.status().message()) << where;
      ++same_error;
    }
    auto scan_map = BuildAddrMap(path, 1);
    absl::StatusOr<std::string> libdw_map = absl::UnknownError("not run");
    {
      ForceLibdw force;
      libdw_map = BuildAddrMap(path, 1);
    }
    ASSERT_EQ(scan_map.ok(), libdw_map.ok()) << where;
    if (scan_map.ok()) {
      ASSERT_TRUE(*scan_map == *libdw_map) << where << ": address maps differ";
    }
  }
  EXPECT_GT(same_error, 0u);
  EXPECT_GT(same_output, 0u);
  std::printf("%d damaged copies: %zu the same error, %zu the same index and map (%zu of them with units libdw read)\n",
              rounds, same_error, same_output, damaged_but_read);
}

}  // namespace
}  // namespace symdex::debuginfo
