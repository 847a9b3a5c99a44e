// The DIE scanner (die_scanner.h) against its oracle, libdw: the DWARF index and the address map
// of the fixture kernel (DWARF 4 and 5) and of the Debian vmlinux (when the corpus is fetched)
// are the same bytes whether the scanner or libdw read the DIEs — and the scanner did read every
// unit (a scanner that declined everything would pass the equality trivially).
#include "server/debuginfo/die_scanner.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "server/common/sanitizer.h"
#include "server/debuginfo/addr_map.h"
#include "server/debuginfo/dwarf_index.h"
#include "server/debuginfo/worker_protocol.h"
#include "tests/unit/kernel_fixture.h"

namespace symdex::debuginfo {
namespace {

using ScanClock = std::chrono::steady_clock;

double Seconds(ScanClock::time_point a, ScanClock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

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
  EXPECT_GE(scan.index->functions.size(), 5u);
  EXPECT_EQ(scan.index->functions.size(), libdw.index->functions.size());
  EXPECT_EQ(scan.index->variables.size(), libdw.index->variables.size());
  EXPECT_TRUE(EncodeDwarfIndex(*scan.index) == EncodeDwarfIndex(*libdw.index)) << path;
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

class DieScannerTest : public ::testing::TestWithParam<int> {};

TEST_P(DieScannerTest, TheFixtureKernelsIndexIsTheSameAsLibdws) {
  symdex::testing::KernelFixture fx(GetParam());
  ExpectSameIndex(fx.vmlinux, 1);
  ExpectSameIndex(fx.vmlinux, 2);
}

TEST_P(DieScannerTest, TheFixtureKernelsAddressMapIsTheSameAsLibdws) {
  symdex::testing::KernelFixture fx(GetParam());
  ExpectSameMap(fx.vmlinux, 1);
  ExpectSameMap(fx.vmlinux, 2);
}

INSTANTIATE_TEST_SUITE_P(Dwarf, DieScannerTest, ::testing::Values(4, 5));

TEST(DieScannerCorpusTest, TheDebianDwarfIndexIsTheSameAsLibdws) {
  const std::string vmlinux = ScannerCorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "two whole-kernel indexes: the release build runs this";
  ExpectSameIndex(vmlinux, 2);
}

TEST(DieScannerCorpusTest, TheDebianAddressMapIsTheSameAsLibdws) {
  const std::string vmlinux = ScannerCorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "two whole-kernel maps: the release build runs this";
  ExpectSameMap(vmlinux, 2);
}

}  // namespace
}  // namespace symdex::debuginfo
