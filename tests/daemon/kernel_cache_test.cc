// fleet::KernelCache on its own (the daemon's --fleet-cache): two kernels known only by build-ID
// in a local debug root — the compiled mini kernel, and a copy of it whose build-ID note says
// another kernel — to see the LRU bound evict the least recently used index (files and all) and
// the negative cache expire.
#include "server/fleet/kernel_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using testing::CommandResult;
using testing::ProbeFixture;
using testing::RunCommand;
using testing::TempDir;
namespace fs = std::filesystem;

// A copy of `file` whose GNU build-ID note's last byte is changed: another "kernel" to the cache.
std::string OtherKernel(const std::string& file, const std::string& id, const std::string& out) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string raw;
  for (size_t i = 0; i < id.size(); i += 2) raw.push_back(static_cast<char>(std::stoi(id.substr(i, 2), nullptr, 16)));
  const size_t at = bytes.find(raw);
  EXPECT_NE(at, std::string::npos);
  bytes[at + raw.size() - 1] = static_cast<char>(bytes[at + raw.size() - 1] ^ 0x5a);
  std::ofstream(out, std::ios::binary) << bytes;
  return testing::ElfBuildIdHex(out);
}

void File(const std::string& root, const std::string& id, const std::string& file) {
  RunCommand("mkdir -p '" + root + "/.build-id/" + id.substr(0, 2) + "' && cp '" + file + "' '" + root + "/.build-id/" +
             id.substr(0, 2) + "/" + id.substr(2) + ".debug'");
}

double Metric(metrics::Registry& r, const std::string& series) {
  const std::string text = r.Render();
  size_t p = text.find("\n" + series + " ");
  return p == std::string::npos ? 0 : std::atof(text.c_str() + p + series.size() + 2);
}

TEST(KernelCacheTest, LeastRecentlyUsedKernelIsEvictedAndFailuresExpire) {
  ProbeFixture fx;
  TempDir dir;
  const std::string a = testing::ElfBuildIdHex(fx.vmlinux);
  const std::string b = OtherKernel(fx.vmlinux, a, dir / "vmlinux-b");
  ASSERT_NE(a, b);
  ASSERT_EQ(b.size(), 40u);
  const std::string root = dir / "dbg";
  File(root, a, fx.vmlinux);
  File(root, b, dir / "vmlinux-b");
  metrics::Registry registry;
  fleet::KernelCacheOptions o;
  o.dir = dir / "cache";
  o.max_bytes = 1;  // room for one kernel at a time: the one just indexed is never the one evicted
  o.negative_seconds = 300;
  // Failures are remembered on a clock the test moves (by `skipped`), not on the time it takes.
  std::atomic<int64_t> skipped_seconds{0};
  o.failure_clock = [&] { return std::chrono::steady_clock::now() + std::chrono::seconds(skipped_seconds.load()); };
  o.finder = DebugFinderOptions{.debug_dirs = {root}, .use_debuginfod = false};
  auto cache = fleet::KernelCache::Create(o, &registry);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(60);

  auto qa = (*cache)->Get(a, {}, later);
  ASSERT_TRUE(qa.ok()) << qa.status().message();
  auto which = (*qa)->Which("", "quiet_fn", true);
  ASSERT_TRUE(which.ok()) << which.status().message();
  EXPECT_EQ(which->target.build_id, a);
  EXPECT_TRUE(fs::exists(o.dir + "/" + a + ".db"));
  // The second kernel pushes the first out, files and all; a caller still holding the first
  // query keeps answering from it.
  auto qb = (*cache)->Get(b, {}, later);
  ASSERT_TRUE(qb.ok()) << qb.status().message();
  EXPECT_TRUE(fs::exists(o.dir + "/" + b + ".db"));
  EXPECT_FALSE(fs::exists(o.dir + "/" + a + ".db"));
  EXPECT_FALSE(fs::exists(o.dir + "/" + a + ".db-addrmaps"));
  EXPECT_EQ(Metric(registry, "symdex_fleet_evictions_total"), 1);
  EXPECT_TRUE((*qa)->Which("", "quiet_fn", true).ok());
  // Asked again, the first is indexed again (and the second evicted).
  ASSERT_TRUE((*cache)->Get(a, {}, later).ok());
  EXPECT_EQ(Metric(registry, "symdex_fleet_index_runs_total{result=\"ok\"}"), 3);
  EXPECT_EQ(Metric(registry, "symdex_fleet_evictions_total"), 2);
  auto state = (*cache)->State();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].build_id, a);
  EXPECT_EQ(state[0].state, "indexed");

  // An unknown kernel: NotFound, remembered, then — its time up — tried again.
  const std::string unknown = "00112233445566778899aabbccddeeff00112233";
  auto u1 = (*cache)->Get(unknown, {}, later);
  ASSERT_EQ(u1.status().code(), absl::StatusCode::kNotFound) << u1.status().message();
  auto u2 = (*cache)->Get(unknown, {}, later);
  EXPECT_NE(u2.status().message().find("remembered"), std::string::npos) << u2.status().message();
  EXPECT_EQ(Metric(registry, "symdex_fleet_index_runs_total{result=\"error\"}"), 1);
  skipped_seconds += 301;
  auto u3 = (*cache)->Get(unknown, {}, later);
  EXPECT_EQ(u3.status().message().find("remembered"), std::string::npos) << u3.status().message();
  EXPECT_EQ(Metric(registry, "symdex_fleet_index_runs_total{result=\"error\"}"), 2);
  // Hostile build-IDs never reach the finder.
  for (const char* bad : {"", "xyz", "abc", "../../etc/passwd"}) {
    auto r = (*cache)->Get(bad, {}, later);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(Metric(registry, "symdex_fleet_index_runs_total{result=\"error\"}"), 2);
}

}  // namespace
}  // namespace symdex
