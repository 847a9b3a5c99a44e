// An arm64 kernel indexed on this x86-64 machine (tests/unit/arm64_fixture.h, compiled at test
// time as arm64's kernel is), as a user of the `symdex` binary meets it: symbols joined to their
// functions across the patchable-entry NOPs, verdicts from arm64's tables (ftrace sites from
// R_AARCH64_RELATIVE addends and __patchable_function_entries, .idmap.text blacklisted), probes
// written against _stext, and a stack decoded by the BL before a return address.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/unit/arm64_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::Arm64Fixture;
using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

// One miniature kernel per entry layout (the parameter: -fpatchable-function-entry's argument),
// made and indexed once, on the first test that asks for it.
struct Arm64Index {
  explicit Arm64Index(const std::string& patchable) : fx(patchable) {}
  Arm64Fixture fx;
  TempDir db;
};

class CliArm64Test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static auto* made = new std::map<std::string, std::unique_ptr<Arm64Index>>();
    std::unique_ptr<Arm64Index>& slot = (*made)[GetParam()];
    if (!slot) {
      slot = std::make_unique<Arm64Index>(GetParam());
      fx_ = &slot->fx;
      db_ = &slot->db;
      CommandResult r = Symdex("index --system-map '" + fx_->system_map + "' --modules-dir '" + fx_->modules_dir +
                               "' --debug-dir '" + fx_->debug_dir + "' --no-debuginfod --no-addr-map -q");
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    fx_ = &slot->fx;
    db_ = &slot->db;
  }
  CommandResult Symdex(const std::string& args) const {
    return RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (*db_ / "index.db") + "' " +
                      args);
  }
  // The instances of `name` by "MODULE:FILE" (the file of their DWARF entry line).
  std::map<std::string, json> Instances(const std::string& name) const {
    CommandResult r = Symdex("--json which " + name);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::map<std::string, json> out;
    const json j = json::parse(r.out);
    for (const auto& in : j["instances"]) {
      std::string file = in["dwarf"].is_object() ? in["dwarf"]["file"].get<std::string>() : "-";
      out[in["module"].get<std::string>() + ":" + file] = in;
    }
    return out;
  }
  static uint64_t Addr(const json& in) { return std::stoull(in["address"].get<std::string>(), nullptr, 16); }

  Arm64Fixture* fx_ = nullptr;
  TempDir* db_ = nullptr;
};

// 6.1's layout (-fpatchable-function-entry=2) and 6.12's CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS
// (=4,2: the record two NOPs before the symbol).
INSTANTIATE_TEST_SUITE_P(Layouts, CliArm64Test, ::testing::Values("2", "4,2"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "2" ? std::string("PatchableEntry2") : std::string("CallOps");
                         });

TEST_P(CliArm64Test, SymbolsJoinTheirFunctionsAcrossThePatchableEntry) {
  auto dup = Instances("dup_fn");
  ASSERT_EQ(dup.size(), 4u) << "two copies in vmlinux, two in the module";
  for (const char* key : {"vmlinux:kernel/traced.c", "vmlinux:kernel/trace/untraced.c", "arm64_mod:kernel/traced.c",
                          "arm64_mod:kernel/trace/untraced.c"}) {
    ASSERT_TRUE(dup.count(key)) << key;
    const json& d = dup[key]["dwarf"];
    EXPECT_EQ(d["function"], "dup_fn") << key << ": not joined to its DW_TAG_subprogram";
    EXPECT_EQ(d["line"], 1) << key << ": the entry line (not the NOPs' rows)";
    EXPECT_EQ(d["decl_line"], 1) << key;
  }
  // The NOPs' rows belong to the function before: traced_entry's line must not be quiet_fn's or
  // blocked_fn's last one.
  auto entry = Instances("traced_entry");
  ASSERT_EQ(entry.count("vmlinux:kernel/traced.c"), 1u);
  EXPECT_EQ(entry["vmlinux:kernel/traced.c"]["dwarf"]["line"], 8);
  EXPECT_EQ(entry["vmlinux:kernel/traced.c"]["dwarf"]["function"], "traced_entry");
  // An address inside the NOPs is the function's (kallsyms says so, and so does addr).
  CommandResult a = Symdex("--json addr " + fmt::format("{:#x}", Addr(entry["vmlinux:kernel/traced.c"]) + 4));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const json at = json::parse(a.out)["results"][0];
  EXPECT_EQ(at["symbol"], "traced_entry") << a.out;
  EXPECT_EQ(at["offset"], 4) << a.out;
  ASSERT_EQ(at["frames"].size(), 1u) << a.out;
  EXPECT_EQ(at["frames"][0]["function"], "traced_entry") << a.out;
  EXPECT_EQ(at["frames"][0]["line"], 8) << "its first instruction's line, not the rows of the function before: "
                                        << a.out;
}

TEST_P(CliArm64Test, VerdictsFromArm64sOwnTables) {
  auto dup = Instances("dup_fn");
  EXPECT_EQ(dup["vmlinux:kernel/traced.c"]["verdict"]["kind"], "traceable");
  EXPECT_EQ(dup["vmlinux:kernel/trace/untraced.c"]["verdict"]["kind"], "no-fentry");
  EXPECT_EQ(dup["arm64_mod:kernel/traced.c"]["verdict"]["kind"], "traceable") << "__patchable_function_entries";
  EXPECT_EQ(dup["arm64_mod:kernel/trace/untraced.c"]["verdict"]["kind"], "no-fentry");
  EXPECT_EQ(Instances("quiet_fn")["vmlinux:kernel/traced.c"]["verdict"]["kind"], "no-fentry") << "notrace";
  EXPECT_EQ(Instances("blocked_fn")["vmlinux:kernel/traced.c"]["verdict"]["kind"], "blacklisted")
      << "the _kprobe_blacklist entry is an R_AARCH64_RELATIVE addend";
  EXPECT_EQ(Instances("idmap_fn")["vmlinux:kernel/traced.c"]["verdict"]["kind"], "blacklisted") << ".idmap.text";
  EXPECT_EQ(Instances("boot_fn")["vmlinux:kernel/traced.c"]["verdict"]["kind"], "init");
}

TEST_P(CliArm64Test, ProbesAreWrittenAgainstStext) {
  CommandResult st = Symdex("--json status");
  ASSERT_EQ(st.exit_code, 0) << st.err;
  const json t = json::parse(st.out)["targets"][0];
  EXPECT_EQ(t["text_anchor"], "_stext") << "arm64's kallsyms lists no _text";
  const uint64_t stext = std::stoull(t["anchor_addr"].get<std::string>(), nullptr, 16);
  auto dup = Instances("dup_fn");
  const json& traced = dup["vmlinux:kernel/traced.c"];
  const std::string probe = fmt::format("_stext+{}", Addr(traced) - stext);
  EXPECT_EQ(traced["probe"], probe);
  CommandResult k = Symdex("kprobe -n -e t/a vmlinux:dup_fn@kernel/traced.c");
  EXPECT_EQ(k.exit_code, 0) << k.err;
  EXPECT_EQ(k.out, "p:t/a " + probe + "\n");
  CommandResult back = Symdex("--json resolve " + probe);
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(json::parse(back.out)["results"][0]["instance"]["dwarf"]["file"], "kernel/traced.c") << back.out;
}

TEST_P(CliArm64Test, DecodePinsTheCopyTheCallerBranchedTo) {
  // An arm64 WARN in dup_fn, called by traced_entry: the BL before traced_entry's return address
  // lands on traced.c's copy. With 6.1's layout the size does not tell the copies apart; with
  // CALL_OPS kallsyms' size of traced.c's copy takes in the two NOPs before the next function.
  const std::string size = fmt::format("{:#x}", Instances("dup_fn")["vmlinux:kernel/traced.c"]["size"].get<uint64_t>());
  if (GetParam() == "2")
    EXPECT_EQ(size,
              fmt::format("{:#x}", Instances("dup_fn")["vmlinux:kernel/trace/untraced.c"]["size"].get<uint64_t>()));
  const std::string log = fmt::format(
      "[    1.000000] WARNING: CPU: 0 PID: 1 at kernel/traced.c:1 dup_fn+0x8/{1}\n"
      "[    1.000000] Modules linked in: arm64_mod\n"
      "[    1.000000] CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.1.0-arm64-fixture #1\n"
      "[    1.000000] pstate: 60400005 (nZCv daif +PAN -UAO -TCO -DIT -SSBS BTYPE=--)\n"
      "[    1.000001] pc : dup_fn+0x8/{1}\n"
      "[    1.000002] lr : traced_entry+{0:#x}/0x80\n"
      "[    1.000003] sp : ffff80000a0dbc40\n"
      "[    1.000004] Call trace:\n"
      "[    1.000005]  dup_fn+0x8/{1}\n"
      "[    1.000006]  traced_entry+{0:#x}/0x80\n",
      fx_->traced_entry_ret, size);
  testing::WriteFile(*db_ / "warn.txt", log);
  CommandResult r = Symdex("--json decode '" + (*db_ / "warn.txt") + "'");
  ASSERT_EQ(r.exit_code, 0) << "every frame pinned\n" << r.out << r.err;
  const json j = json::parse(r.out);
  size_t dup_frames = 0;
  for (const auto& f : j["frames"]) {
    if (!f["text"].get<std::string>().starts_with("dup_fn")) continue;
    ++dup_frames;
    ASSERT_TRUE(f["spec"].is_string()) << f.dump();
    EXPECT_EQ(f["spec"], "vmlinux:dup_fn@traced.c") << f.dump();
  }
  EXPECT_EQ(dup_frames, 3u) << "the WARNING line, pc and the Call trace's first frame: " << r.out;
}

TEST_P(CliArm64Test, DecodeOfMoreFramesThanOneRequestHoldsKeepsEachStackWhole) {
  // 13,200 reports of the same WARN (66,000 frames, over the 65,536 of one frames request): the log
  // is answered in requests cut between stacks, each frame pinned by its caller as in one report.
  const std::string size = fmt::format("{:#x}", Instances("dup_fn")["vmlinux:kernel/traced.c"]["size"].get<uint64_t>());
  const std::string report = fmt::format(
      "[    1.000000] WARNING: CPU: 0 PID: 1 at kernel/traced.c:1 dup_fn+0x8/{1}\n"
      "[    1.000001] pc : dup_fn+0x8/{1}\n"
      "[    1.000002] lr : traced_entry+{0:#x}/0x80\n"
      "[    1.000004] Call trace:\n"
      "[    1.000005]  dup_fn+0x8/{1}\n"
      "[    1.000006]  traced_entry+{0:#x}/0x80\n"
      "[    1.000007] ---[ end trace 0000000000000000 ]---\n",
      fx_->traced_entry_ret, size);
  std::string log;
  constexpr int kReports = 13200;
  for (int i = 0; i < kReports; ++i) log += report;
  testing::WriteFile(*db_ / "warns.txt", log);
  CommandResult r = Symdex("--json decode '" + (*db_ / "warns.txt") + "'");
  ASSERT_EQ(r.exit_code, 0) << "every frame pinned\n" << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["frames"].size(), size_t{kReports} * 5) << r.err;
  size_t dup_frames = 0;
  for (const auto& f : j["frames"]) {
    if (!f["text"].get<std::string>().starts_with("dup_fn")) continue;
    ++dup_frames;
    ASSERT_EQ(f["spec"], "vmlinux:dup_fn@traced.c") << f.dump();
  }
  EXPECT_EQ(dup_frames, size_t{kReports} * 3);
  EXPECT_EQ(j["pinned"], kReports * 5);
}

}  // namespace
}  // namespace symdex
