// A kernel known only by its vmlinux build-ID: `symdex index --build-id
// HEX` finds the debug vmlinux by build-ID — in a local .build-id tree, or from a real debuginfod
// server — and indexes it as a target (symbols from its .symtab); hostile build-IDs are refused
// with the reason, and a file whose build-ID is not the one asked for is never used.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::ProbeFixture;
using testing::RunCommand;
using testing::TempDir;

class CliBuildIdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fx_ = new ProbeFixture();
    CommandResult r = RunCommand("readelf -n '" + fx_->vmlinux + "' | awk '/Build ID/ {print $3}'");
    build_id_ = r.out.substr(0, r.out.find('\n'));
  }
  static void TearDownTestSuite() {
    delete fx_;
    fx_ = nullptr;
  }
  CommandResult Symdex(const std::string& args, const std::string& env = "") {
    return RunCommand("env -u DEBUGINFOD_URLS " + env + " " + std::string(SYMDEX_BIN) + " --db '" +
                      (dir_ / "index.db") + "' " + args);
  }
  // A debug root holding `file` as ROOT/.build-id/ab/cdef....debug for `id`.
  std::string BuildIdTree(const std::string& name, const std::string& id, const std::string& file) {
    const std::string root = dir_ / name;
    RunCommand("mkdir -p '" + root + "/.build-id/" + id.substr(0, 2) + "' && cp '" + file + "' '" + root +
               "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug'");
    return root;
  }

  static ProbeFixture* fx_;
  static std::string build_id_;
  TempDir dir_;
};
ProbeFixture* CliBuildIdTest::fx_ = nullptr;
std::string CliBuildIdTest::build_id_;

TEST_F(CliBuildIdTest, AKernelKnownByItsBuildIdFromALocalDebugRoot) {
  ASSERT_EQ(build_id_.size(), 40u) << build_id_;
  const std::string root = BuildIdTree("dbg", build_id_, fx_->vmlinux);
  CommandResult r = Symdex("--json index --build-id " + build_id_ + " --debug-dir '" + root + "' --no-debuginfod");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["target"], build_id_);
  EXPECT_EQ(j["build_id"], build_id_);
  // Answers as from any other target: both copies of dup_fn, with DWARF and verdicts.
  CommandResult w = Symdex("--json which dup_fn");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  json jw = json::parse(w.out);
  ASSERT_EQ(jw["count"], 2);
  // Sizes are the kernel's extents, up to the next kallsyms symbol: the same as a target made
  // from the System.map of the same vmlinux gives (not the .symtab's st_size).
  ASSERT_EQ(
      Symdex("index -q --system-map '" + fx_->system_map + "' --debug-dir '" + root + "' --no-debuginfod --name by-map")
          .exit_code,
      0);
  json jm = json::parse(Symdex("--json which -t by-map dup_fn").out);
  std::map<std::string, uint64_t> map_size;
  for (const auto& in : jm["instances"]) map_size[in["address"].get<std::string>()] = in["size"].get<uint64_t>();
  ASSERT_EQ(map_size.size(), 2u) << jm;
  std::set<std::string> cus, kinds;
  for (const auto& in : jw["instances"]) {
    cus.insert(in["dwarf"]["cu"].get<std::string>());
    kinds.insert(in["verdict"]["kind"].get<std::string>());
    EXPECT_FALSE(in["size_exact"].get<bool>()) << in;
    EXPECT_EQ(in["size"].get<uint64_t>(), map_size[in["address"].get<std::string>()]) << in;
  }
  EXPECT_EQ(cus, (std::set<std::string>{"kernel/traced.c", "kernel/trace/untraced.c"}));
  EXPECT_EQ(kinds, (std::set<std::string>{"traceable", "no-fentry"}));
  // --name, and the target is found by it
  ASSERT_EQ(
      Symdex("index -q --build-id " + build_id_ + " --name k1 --debug-dir '" + root + "' --no-debuginfod").exit_code,
      0);
  EXPECT_EQ(Symdex("which -t k1 quiet_fn").exit_code, 0);
  // With two targets, a query names one by its build-ID (upper case too), through every verb.
  EXPECT_EQ(Symdex("which dup_fn").exit_code, 2);
  CommandResult by_id = Symdex("--json which --build-id " + build_id_ + " dup_fn");
  EXPECT_EQ(by_id.exit_code, 0) << by_id.err;
  std::string upper = build_id_;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(Symdex("resolve --build-id " + upper + " 'dup_fn#traced.c'").exit_code, 0);
  CommandResult unknown = Symdex("which --build-id 00112233445566778899aabbccddeeff00112233 dup_fn");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no target has vmlinux build-ID"), std::string::npos) << unknown.err;
  EXPECT_EQ(Symdex("which --build-id zz dup_fn").exit_code, 2);
  EXPECT_EQ(Symdex("which -t k1 --build-id " + build_id_ + " dup_fn").exit_code, 2);  // one or the other
}

TEST_F(CliBuildIdTest, AKernelKnownByItsBuildIdFromARealDebuginfod) {
  const std::string served = dir_ / "served";
  RunCommand("mkdir -p '" + served + "' && cp '" + fx_->vmlinux + "' '" + served + "/'");
  testing::DebuginfodServer server(served);
  ASSERT_TRUE(server.ready()) << "debuginfod did not become ready";
  const std::string env = "DEBUGINFOD_URLS=" + server.url() + " DEBUGINFOD_CACHE_PATH='" + (dir_ / "cache") + "'";
  CommandResult r = Symdex("index -q --build-id " + build_id_, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  CommandResult st = Symdex("--json status");
  json js = json::parse(st.out);
  ASSERT_EQ(js["targets"].size(), 1u);
  EXPECT_NE(js["targets"][0]["source"].get<std::string>().find("(debuginfod)"), std::string::npos) << st.out;
  EXPECT_EQ(Symdex("which boot_fn").exit_code, 0);
}

// A bad copy in debuginfod's client cache (a transfer gone wrong): libdebuginfod returns cached
// files without asking the server, so symdex refuses the copy and removes it; the next index
// fetches the real file.
TEST_F(CliBuildIdTest, ABadCopyInDebuginfodsCacheIsRemovedAndFetchedAgain) {
  const std::string served = dir_ / "served";
  RunCommand("mkdir -p '" + served + "' && cp '" + fx_->vmlinux + "' '" + served + "/'");
  testing::DebuginfodServer server(served);
  ASSERT_TRUE(server.ready()) << "debuginfod did not become ready";
  const std::string cache = dir_ / "cache";
  const std::string bad = cache + "/" + build_id_ + "/debuginfo";
  RunCommand("mkdir -p '" + cache + "/" + build_id_ + "' && head -c 4096 '" + fx_->vmlinux + "' > '" + bad + "'");
  const std::string env = "DEBUGINFOD_URLS=" + server.url() + " DEBUGINFOD_CACHE_PATH='" + cache + "'";
  CommandResult first = Symdex("index -q --build-id " + build_id_, env);
  EXPECT_EQ(first.exit_code, 3) << first.out << first.err;
  EXPECT_NE(first.err.find("removed from debuginfod's cache"), std::string::npos) << first.err;
  EXPECT_FALSE(std::filesystem::exists(bad));
  CommandResult second = Symdex("index -q --build-id " + build_id_, env);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(Symdex("which quiet_fn").exit_code, 0);
}

TEST_F(CliBuildIdTest, HostileBuildIdsAreRefusedWithTheReason) {
  const std::string root = BuildIdTree("dbg", build_id_, fx_->vmlinux);
  for (const char* bad : {"xyz", "abc", "", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef00"}) {
    CommandResult r = Symdex("index --build-id '" + std::string(bad) + "' --debug-dir '" + root + "' --no-debuginfod");
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  CommandResult notfound =
      Symdex("index --build-id 00112233445566778899aabbccddeeff00112233 --debug-dir '" + root + "' --no-debuginfod");
  EXPECT_EQ(notfound.exit_code, 3) << notfound.err;
  EXPECT_NE(notfound.err.find("no vmlinux with build-ID 00112233445566778899aabbccddeeff00112233"), std::string::npos)
      << notfound.err;
  // A file filed under another build-ID (a corrupt or lying tree) is never used.
  const std::string liar = BuildIdTree("liar", "00112233445566778899aabbccddeeff00112233", fx_->vmlinux);
  CommandResult lie =
      Symdex("index --build-id 00112233445566778899aabbccddeeff00112233 --debug-dir '" + liar + "' --no-debuginfod");
  EXPECT_EQ(lie.exit_code, 3) << lie.err;
  EXPECT_NE(lie.err.find("build-id-mismatch"), std::string::npos) << lie.err;
  // Nothing was indexed by any of these.
  EXPECT_EQ(Symdex("which dup_fn").exit_code, 3);
}

}  // namespace
}  // namespace symdex
