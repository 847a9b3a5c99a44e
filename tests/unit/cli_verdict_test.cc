// Probe verdicts as a user of the `symdex` binary meets them, on a compiled miniature kernel
// (tests/unit/probe_fixture.h) indexed offline: `which` and `resolve --json` carry the verdict,
// `dups --traceable` filters by it, `kprobe` refuses what the kernel would refuse (exit 4,
// --force prints it anyway), and `ftrace-index`'s fallback counts only the copies ftrace lists.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::ProbeFixture;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

class CliVerdictTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { fx_ = new ProbeFixture(); }
  static void TearDownTestSuite() {
    delete fx_;
    fx_ = nullptr;
  }
  void SetUp() override {
    CommandResult r = Index("");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  CommandResult Index(const std::string& extra) {
    return Symdex("index --system-map '" + fx_->system_map + "' --modules-dir '" + fx_->modules_dir +
                  "' --debug-dir '" + fx_->debug_dir + "' --no-debuginfod --no-addr-map -q " + extra);
  }
  CommandResult Symdex(const std::string& args) {
    return RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (dir_ / "index.db") + "' " +
                      args);
  }
  // name -> module -> verdict json, for a name's instances.
  std::map<std::string, json> Verdicts(const std::string& name) {
    CommandResult r = Symdex("--json which " + name);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::map<std::string, json> out;
    const json j = json::parse(r.out);
    for (const auto& in : j["instances"]) {
      std::string key = in["module"].get<std::string>();
      if (in["dwarf"].is_object()) key += ":" + in["dwarf"]["cu"].get<std::string>();
      out[key] = in["verdict"];
    }
    return out;
  }

  static ProbeFixture* fx_;
  TempDir dir_;
};
ProbeFixture* CliVerdictTest::fx_ = nullptr;

TEST_F(CliVerdictTest, EveryKindOfVerdictFromTheKernelsOwnTables) {
  // Both copies of dup_fn, in vmlinux and in the module: the -pg one is traceable, the other's
  // whole compilation unit has no fentry call.
  auto dup = Verdicts("dup_fn");
  ASSERT_EQ(dup.size(), 4u) << json(dup).dump();
  for (const char* owner : {"vmlinux", "probe_mod"}) {
    const json& traced = dup.at(std::string(owner) + ":kernel/traced.c");
    EXPECT_EQ(traced["kind"], "traceable");
    EXPECT_TRUE(traced["kprobe"].get<bool>());
    EXPECT_TRUE(traced["ftrace"].get<bool>());
    const json& untraced = dup.at(std::string(owner) + ":kernel/trace/untraced.c");
    EXPECT_EQ(untraced["kind"], "no-fentry");
    EXPECT_FALSE(untraced["kprobe"].get<bool>());
    EXPECT_FALSE(untraced["ftrace"].get<bool>());
    EXPECT_NE(untraced["reason"].get<std::string>().find("compilation unit"), std::string::npos) << untraced;
  }
  auto one = [&](const std::string& name, const std::string& module) {
    for (auto& [k, v] : Verdicts(name)) {
      if (k.starts_with(module)) return v;
    }
    return json();
  };
  EXPECT_EQ(one("quiet_fn", "vmlinux")["kind"], "no-fentry");
  EXPECT_EQ(one("quiet_fn", "probe_mod")["kind"], "no-fentry");
  json blocked = one("blocked_fn", "vmlinux");
  EXPECT_EQ(blocked["kind"], "blacklisted");
  EXPECT_FALSE(blocked["kprobe"].get<bool>());
  EXPECT_TRUE(blocked["ftrace"].get<bool>());  // ftrace may trace what kprobes may not
  EXPECT_EQ(one("blocked_fn", "probe_mod")["kind"], "blacklisted");
  EXPECT_EQ(one("boot_fn", "vmlinux")["kind"], "init");
  EXPECT_EQ(one("boot_fn", "probe_mod")["kind"], "init");
  EXPECT_EQ(one("raw_fn", "vmlinux")["kind"], "blacklisted");
  EXPECT_EQ(one("raw_fn", "probe_mod")["kind"], "blacklisted");

  CommandResult text = Symdex("which dup_fn");
  EXPECT_NE(text.out.find("VERDICT"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("no-fentry"), std::string::npos) << text.out;
}

TEST_F(CliVerdictTest, KprobeRefusesWhatTheKernelWouldAndForcePrintsIt) {
  CommandResult ok = Symdex("kprobe -n 'vmlinux:dup_fn#traced.c'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(ok.out.starts_with("p:")) << ok.out;

  CommandResult no = Symdex("kprobe -n 'vmlinux:dup_fn#untraced.c'");
  EXPECT_EQ(no.exit_code, 4) << no.out << no.err;
  EXPECT_TRUE(no.out.empty()) << no.out;
  EXPECT_NE(no.err.find("would refuse"), std::string::npos) << no.err;
  EXPECT_NE(no.err.find("--force"), std::string::npos) << no.err;

  CommandResult forced = Symdex("kprobe -n --force 'vmlinux:dup_fn#untraced.c'");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(forced.out.starts_with("p:")) << forced.out;

  CommandResult init = Symdex("--json kprobe -n vmlinux:boot_fn");
  EXPECT_EQ(init.exit_code, 4);
  json j = json::parse(init.out);
  EXPECT_EQ(j["status"], "refused");
  EXPECT_EQ(j["instance"]["verdict"]["kind"], "init");

  CommandResult resolved = Symdex("--json resolve 'probe_mod:blocked_fn'");
  ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
  EXPECT_EQ(json::parse(resolved.out)["results"][0]["instance"]["verdict"]["kind"], "blacklisted");
  EXPECT_EQ(resolved.out, json::parse(resolved.out).dump(2) + "\n");  // an element at a time, as one document
}

TEST_F(CliVerdictTest, KernelConfigDecidesAboutFunctionsWithoutFentry) {
  WriteFile(dir_ / "config", "CONFIG_KPROBES=y\nCONFIG_KPROBE_EVENTS_ON_NOTRACE=y\n");
  ASSERT_EQ(Index("--kernel-config '" + (dir_ / "config") + "'").exit_code, 0);
  CommandResult r = Symdex("kprobe -n vmlinux:quiet_fn");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // ... but not about init text or the blacklist.
  EXPECT_EQ(Symdex("kprobe -n vmlinux:boot_fn").exit_code, 4);
  EXPECT_EQ(Symdex("kprobe -n vmlinux:blocked_fn").exit_code, 4);

  // Dynamic ftrace without the option: the notrace check applies (Debian's x86-64 config) ...
  WriteFile(dir_ / "debian",
            "CONFIG_DYNAMIC_FTRACE=y\nCONFIG_KPROBES_ON_FTRACE=y\n# CONFIG_KPROBE_EVENTS_ON_NOTRACE is not set\n");
  ASSERT_EQ(Index("--kernel-config '" + (dir_ / "debian") + "'").exit_code, 0);
  EXPECT_EQ(Symdex("kprobe -n vmlinux:quiet_fn").exit_code, 4);
  // ... also where kprobes do not use ftrace (Debian's arm64 config: the check is
  // trace_kprobe.c's, under CONFIG_DYNAMIC_FTRACE alone).
  WriteFile(dir_ / "arm64", "CONFIG_DYNAMIC_FTRACE=y\n# CONFIG_KPROBES_ON_FTRACE is not set\n");
  ASSERT_EQ(Index("--kernel-config '" + (dir_ / "arm64") + "'").exit_code, 0);
  EXPECT_EQ(Symdex("kprobe -n vmlinux:quiet_fn").exit_code, 4);
  // A kernel without dynamic ftrace has no such check.
  WriteFile(dir_ / "noftrace", "CONFIG_KPROBES=y\n# CONFIG_DYNAMIC_FTRACE is not set\n");
  ASSERT_EQ(Index("--kernel-config '" + (dir_ / "noftrace") + "'").exit_code, 0);
  EXPECT_EQ(Symdex("kprobe -n vmlinux:quiet_fn").exit_code, 0);

  WriteFile(dir_ / "notconfig", "hello\n");
  CommandResult bad = Index("--kernel-config '" + (dir_ / "notconfig") + "'");
  EXPECT_EQ(bad.exit_code, 3) << bad.err;
  EXPECT_NE(bad.err.find("not a kernel config"), std::string::npos) << bad.err;
}

TEST_F(CliVerdictTest, KernelConfigDecidesWhetherKprobeMultiLinksExist) {
  WriteFile(dir_ / "nofprobe", "CONFIG_KPROBES=y\nCONFIG_DYNAMIC_FTRACE=y\n# CONFIG_FPROBE is not set\n");
  ASSERT_EQ(Index("--kernel-config '" + (dir_ / "nofprobe") + "'").exit_code, 0);
  EXPECT_EQ(json::parse(Symdex("--json status").out)["targets"][0]["fprobe"], false);
  CommandResult refused = Symdex("kprobe -n --format kprobe_multi vmlinux:traced_entry");
  EXPECT_EQ(refused.exit_code, 4) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("without CONFIG_FPROBE"), std::string::npos) << refused.err;

  WriteFile(dir_ / "fprobe", "CONFIG_KPROBES=y\nCONFIG_DYNAMIC_FTRACE=y\nCONFIG_FPROBE=y\n");
  ASSERT_EQ(Index("--kernel-config '" + (dir_ / "fprobe") + "'").exit_code, 0);
  EXPECT_EQ(json::parse(Symdex("--json status").out)["targets"][0]["fprobe"], true);
  // With fprobes, what is left is the copy's own form: traced_entry is in the module too, so it is
  // named by its address, which an offline kernel does not have.
  CommandResult offline = Symdex("kprobe -n --format kprobe_multi vmlinux:traced_entry");
  EXPECT_EQ(offline.exit_code, 4) << offline.out << offline.err;
  EXPECT_EQ(offline.err.find("CONFIG_FPROBE"), std::string::npos) << offline.err;
  EXPECT_NE(offline.err.find("by its address"), std::string::npos) << offline.err;
}

TEST_F(CliVerdictTest, DupsTraceableListsOnlyWhatKprobeEventsAccept) {
  CommandResult all = Symdex("--json dups");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  CommandResult tr = Symdex("--json dups --traceable");
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  size_t all_n = 0, tr_n = 0;
  const json jall = json::parse(all.out), jtr = json::parse(tr.out);
  for (const auto& g : jall["duplicates"]) all_n += g["instances"].size();
  for (const auto& g : jtr["duplicates"]) {
    for (const auto& in : g["instances"]) {
      EXPECT_TRUE(in["verdict"]["kprobe"].get<bool>()) << in;
      ++tr_n;
    }
    // counts stay over every copy: the kernel's name lookup sees them all
    EXPECT_GE(g["instances"][0]["same_name_total"].get<int>(), 2);
  }
  EXPECT_GT(tr_n, 0u);
  EXPECT_LT(tr_n, all_n);
}

TEST_F(CliVerdictTest, FtraceIndexCountsOnlyTheCopiesFtraceLists) {
  // available_filter_functions as this kernel prints it: only functions with an fentry call
  // at their entry, in address order, and no available_filter_functions_addrs (before 6.5).
  const std::string tracefs = dir_ / "tracing";
  WriteFile(tracefs + "/available_filter_functions",
            "dup_fn\nblocked_fn\ntraced_entry\ndup_fn [probe_mod]\nblocked_fn [probe_mod]\n"
            "traced_entry [probe_mod]\n");
  CommandResult r = Symdex("--json ftrace-index --tracefs '" + tracefs + "' 'vmlinux:dup_fn#traced.c'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["index"], 1);
  EXPECT_NE(j["method"].get<std::string>().find("ftrace lists"), std::string::npos);
  r = Symdex("ftrace-index --tracefs '" + tracefs + "' 'probe_mod:dup_fn#traced.c'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "4\n");
  // the copy ftrace does not list: refused with the reason
  r = Symdex("ftrace-index --tracefs '" + tracefs + "' 'vmlinux:dup_fn#untraced.c'");
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("ftrace does not list"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace symdex
