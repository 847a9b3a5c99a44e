// Frames from another machine: `symdex frames` against a kernel known by its build-ID,
// with modules by build-ID (the compiled mini kernel of probe_fixture: a vmlinux and a module,
// both with DWARF). Each answer is checked against what the ELF files themselves say (nm for
// addresses, eu-addr2line for lines), and every input form against the exactness rules of
// query/answers.h.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <absl/strings/str_split.h>
#include <nlohmann/json.hpp>

#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::ProbeFixture;
using testing::RunCommand;
using testing::TempDir;

class CliFramesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fx_ = new ProbeFixture();
    dir_ = new TempDir();
    vmlinux_id_ = testing::ElfBuildIdHex(fx_->vmlinux);
    module_id_ = testing::ElfBuildIdHex(fx_->module);
    root_ = *dir_ / "dbg";
    for (const auto& [id, file] : {std::pair{vmlinux_id_, fx_->vmlinux}, std::pair{module_id_, fx_->module}}) {
      RunCommand("mkdir -p '" + root_ + "/.build-id/" + id.substr(0, 2) + "' && cp '" + file + "' '" + root_ +
                 "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug'");
    }
    CommandResult r = Symdex("index -q --build-id " + vmlinux_id_ + " --module-build-id probe_mod=" + module_id_ +
                             " --module-build-id absent_mod=00112233445566778899aabbccddeeff00112233 --debug-dir '" +
                             root_ + "' --no-debuginfod");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete fx_;
  }
  static CommandResult Symdex(const std::string& args) {
    return RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (*dir_ / "index.db") + "' " +
                      args);
  }
  static json Frames(const std::string& args, int want_exit) {
    CommandResult r = Symdex("--json frames --build-id " + vmlinux_id_ + " " + args);
    EXPECT_EQ(r.exit_code, want_exit) << args << "\n" << r.out << r.err;
    try {
      json j = json::parse(r.out);
      // Printed an element at a time (cli_common.h JsonArrayOut), as one document would be.
      EXPECT_EQ(r.out, j.dump(2) + "\n") << args;
      return j;
    } catch (const std::exception& e) {
      ADD_FAILURE() << args << ": " << e.what() << "\n" << r.out << r.err;
      return json::object();
    }
  }

  static ProbeFixture* fx_;
  static TempDir* dir_;
  static std::string vmlinux_id_, module_id_, root_;
};
ProbeFixture* CliFramesTest::fx_ = nullptr;
TempDir* CliFramesTest::dir_ = nullptr;
std::string CliFramesTest::vmlinux_id_, CliFramesTest::module_id_, CliFramesTest::root_;

TEST_F(CliFramesTest, AddressesWithTheHostsTextAreExactAndAgreeWithAddr) {
  const uint64_t text = testing::NmValue(fx_->vmlinux, "_text");
  const uint64_t quiet = testing::NmValue(fx_->vmlinux, "quiet_fn");
  const uint64_t slide = 0x2a00000;
  json j =
      Frames("--kernel-text " + testing::HexAddress(text + slide) + " " + testing::HexAddress(quiet + slide + 1), 0);
  ASSERT_EQ(j["results"].size(), 1u) << j.dump();
  const json& f = j["results"][0];
  EXPECT_EQ(f["symbol"], "quiet_fn");
  EXPECT_EQ(f["offset"], 1);
  EXPECT_EQ(f["module"], "vmlinux");
  EXPECT_EQ(f["basis"], "address");
  EXPECT_TRUE(f["exact"].get<bool>()) << f.dump();
  EXPECT_EQ(f["target_address"], testing::HexAddress(quiet + 1));
  EXPECT_EQ(f["spec"], "vmlinux:quiet_fn");  // the module has a quiet_fn too
  // The same frames `symdex addr` gives for the link-time address on this target.
  CommandResult a = Symdex("--json addr --build-id " + vmlinux_id_ + " " + testing::HexAddress(quiet + 1));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  json ja = json::parse(a.out);
  EXPECT_EQ(a.out, ja.dump(2) + "\n");  // printed an element at a time, as one document
  EXPECT_EQ(f["frames"], ja["results"][0]["frames"]);
  EXPECT_EQ(f["frames"][0]["file"], "kernel/traced.c");
  // The KASLR offset says the same.
  json k = Frames("--kaslr-offset " + testing::HexAddress(slide) + " " + testing::HexAddress(quiet + slide + 1), 0);
  EXPECT_EQ(k["results"][0]["frames"], f["frames"]);
  // Without _text: taken as link-time, and said to be a guess; the slid address is in nothing.
  json guess = Frames(testing::HexAddress(quiet + 1), 0);
  EXPECT_FALSE(guess["results"][0]["exact"].get<bool>());
  EXPECT_NE(guess["results"][0]["note"].get<std::string>().find("KASLR"), std::string::npos);
  Frames(testing::HexAddress(quiet + slide + 1), 1);
}

TEST_F(CliFramesTest, SymbolOffsetLinesAreExactOnlyWhenTheNameIsUnique) {
  json u = Frames("'quiet_fn+0x1/0x10'", 0);
  EXPECT_EQ(u["results"][0]["symbol"], "quiet_fn");
  EXPECT_EQ(u["results"][0]["basis"], "symbol+offset");
  EXPECT_TRUE(u["results"][0]["exact"].get<bool>());
  // Two static dup_fn in vmlinux: no answer, the two specs to choose from.
  json d = Frames("'? dup_fn+0x1/0x10'", 2);
  EXPECT_FALSE(d["results"][0].contains("symbol"));
  EXPECT_EQ(d["results"][0]["candidates"].size(), 2u) << d.dump();
  // With the address (old kernels print both) and _text, the address decides, exactly.
  const uint64_t text = testing::NmValue(fx_->vmlinux, "_text");
  const uint64_t quiet = testing::NmValue(fx_->vmlinux, "quiet_fn");
  json both = Frames("--kernel-text " + testing::HexAddress(text) + " '[<" + testing::HexAddress(quiet + 2).substr(2) +
                         ">] quiet_fn+0x2/0x10'",
                     0);
  EXPECT_EQ(both["results"][0]["basis"], "address");
  EXPECT_TRUE(both["results"][0]["exact"].get<bool>());
  // ... and a line whose name disagrees with its address is flagged (wrong _text?).
  json lie = Frames("--kernel-text " + testing::HexAddress(text) + " '[<" + testing::HexAddress(quiet + 2).substr(2) +
                        ">] blocked_fn+0x2/0x10'",
                    0);
  EXPECT_FALSE(lie["results"][0]["exact"].get<bool>());
  EXPECT_NE(lie["results"][0]["note"].get<std::string>().find("the line says blocked_fn"), std::string::npos);
  // Unknown name: not found (1); not a frame: unreadable (2).
  Frames("'no_such_fn+0x1/0x2'", 1);
  json bad = Frames("'Call Trace:'", 2);
  EXPECT_NE(bad["results"][0]["error"].get<std::string>().find("not a frame"), std::string::npos);
}

// `symdex decode`: a two-frame oops whose top frame is one of two static dup_fn copies of one
// size. The frame below it, traced_entry, calls one of them directly: the call instruction
// before traced_entry's return address names the copy. Everything checked comes from objdump.
TEST_F(CliFramesTest, DecodePinsADuplicatedFrameByItsCallersCall) {
  const testing::DirectCall call = testing::ObjdumpDirectCall(fx_->vmlinux, "traced_entry", "dup_fn");
  ASSERT_NE(call.callee, 0u) << "traced_entry calls dup_fn directly";
  const uint64_t callee = call.callee, ret = call.return_address;
  const uint64_t entry = testing::NmValue(fx_->vmlinux, "traced_entry");
  auto log = [&](uint64_t ret_off) {
    std::string path = *dir_ / "oops.txt";
    testing::WriteFile(path,
                       "[    1.000000] RIP: 0010:dup_fn+0x1/0x10\n"
                       "[    1.000001] Call Trace:\n"
                       "[    1.000002]  <TASK>\n"
                       "[    1.000003]  traced_entry+" +
                           testing::HexAddress(ret_off) +
                           "/0x100\n"
                           "[    1.000004]  </TASK>\n");
    return path;
  };
  CommandResult r = Symdex("--json decode --build-id " + vmlinux_id_ + " '" + log(ret - entry) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["frames"].size(), 2u) << j.dump(1);
  const json& top = j["frames"][0];
  EXPECT_EQ(top["symbol"], "dup_fn");
  EXPECT_EQ(top["target_address"], testing::HexAddress(callee + 1)) << top.dump(1);
  EXPECT_NE(top["note"].get<std::string>().find("its caller's call"), std::string::npos) << top.dump(1);
  EXPECT_TRUE(top["regs"].get<bool>());
  EXPECT_EQ(j["frames"][1]["symbol"], "traced_entry");
  EXPECT_EQ(j["pinned"], 2);

  // The text decoded keeps every line, each frame followed by its instance and line.
  CommandResult t = Symdex("decode --build-id " + vmlinux_id_ + " '" + log(ret - entry) + "'");
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("[    1.000001] Call Trace:\n"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("RIP: 0010:dup_fn+0x1/0x10 {vmlinux:dup_fn@"), std::string::npos) << t.out;
  EXPECT_NE(
      t.out.find("traced_entry+" + testing::HexAddress(ret - entry) + "/0x100 {vmlinux:traced_entry} kernel/traced.c:"),
      std::string::npos)
      << t.out;

  // A module frame with its build-ID (CONFIG_STACKTRACE_BUILD_ID) is answered only by that build.
  const std::string mod_log = *dir_ / "mod.txt";
  testing::WriteFile(mod_log, " quiet_fn+0x1/0x10 [probe_mod " + module_id_ + "]\n quiet_fn+0x1/0x10 [probe_mod " +
                                  std::string(module_id_.size(), 'a') + "]\n");
  CommandResult m = Symdex("--json decode --build-id " + vmlinux_id_ + " '" + mod_log + "'");
  EXPECT_EQ(m.exit_code, 1) << m.out << m.err;
  json jm = json::parse(m.out);
  ASSERT_EQ(jm["frames"].size(), 2u) << jm.dump(1);
  EXPECT_EQ(jm["frames"][0]["module"], "probe_mod") << jm.dump(1);
  EXPECT_EQ(jm["frames"][0]["symbol"], "quiet_fn");
  EXPECT_FALSE(jm["frames"][1].contains("symbol")) << jm.dump(1);
  EXPECT_NE(jm["frames"][1]["note"].get<std::string>().find("a different build"), std::string::npos) << jm.dump(1);

  // Control: one byte earlier no call ends in traced_entry, so nothing tells the copies apart.
  CommandResult amb = Symdex("--json decode --build-id " + vmlinux_id_ + " '" + log(ret - entry - 1) + "'");
  ASSERT_EQ(amb.exit_code, 2) << amb.out << amb.err;
  json ja = json::parse(amb.out);
  EXPECT_EQ(ja["frames"][0]["candidates"].size(), 2u) << ja.dump(1);
  EXPECT_EQ(ja["ambiguous"], 1);
}

// CONFIG_KALLSYMS_LINEINFO: the printing kernel's "(file:line)" after a frame names which copy
// it is. For each of the two dup_fn copies (nm), the line symdex gives for that copy's address is
// printed after an otherwise ambiguous frame: decode pins exactly that copy by it alone.
TEST_F(CliFramesTest, DecodePinsADuplicatedFrameByItsPrintedSourceLine) {
  CommandResult nm = RunCommand("nm '" + fx_->vmlinux + "' | awk '$3 == \"dup_fn\" {print $1}'");
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  std::vector<uint64_t> copies;
  for (absl::string_view l : absl::StrSplit(nm.out, '\n', absl::SkipEmpty())) {
    copies.push_back(std::stoull(std::string(l), nullptr, 16));
  }
  ASSERT_EQ(copies.size(), 2u) << nm.out;
  auto log = [&](const std::string& source) {
    std::string path = *dir_ / "lineinfo.txt";
    testing::WriteFile(path, "[    1.000001] Call Trace:\n[    1.000002]  <TASK>\n[    1.000003]  dup_fn+0x2/0x10 (" +
                                 source + ")\n[    1.000004]  </TASK>\n");
    return path;
  };
  std::set<std::string> sources;
  for (uint64_t copy : copies) {
    // A stack's return address: its line is the call's, one byte back.
    CommandResult a = Symdex("--json addr --build-id " + vmlinux_id_ + " " + testing::HexAddress(copy + 1));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const json leaf = json::parse(a.out)["results"][0]["frames"][0];
    const std::string source = leaf["file"].get<std::string>() + ":" + std::to_string(leaf["line"].get<int>());
    sources.insert(source);
    CommandResult r = Symdex("--json decode --build-id " + vmlinux_id_ + " '" + log(source) + "'");
    ASSERT_EQ(r.exit_code, 0) << source << "\n" << r.out << r.err;
    const json f = json::parse(r.out)["frames"][0];
    EXPECT_EQ(f["target_address"], testing::HexAddress(copy + 2)) << f.dump(1);
    EXPECT_NE(f["note"].get<std::string>().find("its printed source line"), std::string::npos) << f.dump(1);
    // The decoded text keeps the annotation, the instance after it.
    CommandResult t = Symdex("decode --build-id " + vmlinux_id_ + " '" + log(source) + "'");
    EXPECT_NE(t.out.find("dup_fn+0x2/0x10 (" + source + ") {vmlinux:dup_fn@"), std::string::npos) << t.out;
  }
  EXPECT_EQ(sources.size(), 2u) << "the copies' lines differ";
  // A file neither copy is in leaves both (a log of another kernel pins nothing).
  CommandResult other = Symdex("--json decode --build-id " + vmlinux_id_ + " '" + log("kernel/elsewhere.c:3") + "'");
  EXPECT_EQ(other.exit_code, 2) << other.out << other.err;
  // A unique frame whose printed file is not the debug info's is answered and flagged.
  const std::string unique = *dir_ / "lineinfo-unique.txt";
  testing::WriteFile(unique, " RIP: 0010:quiet_fn+0x1/0x10 (kernel/elsewhere.c:3)\n");
  CommandResult u = Symdex("--json decode --build-id " + vmlinux_id_ + " '" + unique + "'");
  const json fu = json::parse(u.out)["frames"][0];
  EXPECT_EQ(fu["symbol"], "quiet_fn");
  EXPECT_FALSE(fu["exact"].get<bool>()) << fu.dump(1);
  EXPECT_NE(fu["note"].get<std::string>().find("the log prints kernel/elsewhere.c:3"), std::string::npos) << fu.dump(1);
  EXPECT_NE(fu["note"].get<std::string>().find("a log of another build?"), std::string::npos) << fu.dump(1);
}

TEST_F(CliFramesTest, ModuleFramesByBaseOrNameAgreeWithTheModulesDwarf) {
  const uint64_t base = 0xffffffffc0a00000ull;
  const uint64_t off = testing::NmValue(fx_->module, "quiet_fn") + 3;
  const std::string mod = "--module probe_mod=" + module_id_ + "@" + testing::HexAddress(base);
  // eu-addr2line over the module's own DWARF, at that .text offset.
  CommandResult eu = RunCommand("eu-addr2line -e '" + fx_->module + "' -j .text " + testing::HexAddress(off));
  ASSERT_EQ(eu.exit_code, 0) << eu.err;
  // FILE:LINE[:COLUMN]
  const std::string after_file = eu.out.substr(eu.out.find(':') + 1);
  const std::string want_line = after_file.substr(0, after_file.find_first_of(":\n"));
  const uint64_t text = testing::NmValue(fx_->vmlinux, "_text");
  json a = Frames("--kernel-text " + testing::HexAddress(text) + " " + mod + " " + testing::HexAddress(base + off), 0);
  const json& f = a["results"][0];
  EXPECT_EQ(f["symbol"], "quiet_fn");
  EXPECT_EQ(f["module"], "probe_mod");
  EXPECT_EQ(f["section"], ".text");
  EXPECT_EQ(f["section_offset"], off);
  EXPECT_EQ(f["offset"], 3);
  EXPECT_TRUE(f["exact"].get<bool>()) << f.dump();
  ASSERT_FALSE(f["frames"].empty()) << f.dump();
  EXPECT_EQ(f["frames"].back()["file"], "kernel/traced.c");
  EXPECT_EQ(std::to_string(f["frames"][0]["line"].get<int>()), want_line) << eu.out;
  EXPECT_EQ(f["spec"], "probe_mod:quiet_fn");
  // The same frame as the kernel prints it, by name: the same place.
  json n = Frames("'quiet_fn+0x3/0x10 [probe_mod]'", 0);
  EXPECT_EQ(n["results"][0]["section_offset"], off);
  EXPECT_EQ(n["results"][0]["frames"], f["frames"]);
  // A module whose build-ID on the host is not the indexed one is never answered from.
  json other = Frames("'quiet_fn+0x3/0x10 [probe_mod 00112233445566778899aabbccddeeff00112233]'", 1);
  EXPECT_NE(other["results"][0]["note"].get<std::string>().find("build-ID"), std::string::npos) << other.dump();
  json wrong = Frames("--kernel-text " + testing::HexAddress(text) +
                          " --module probe_mod=00112233445566778899aabbccddeeff00112233@" + testing::HexAddress(base) +
                          " " + testing::HexAddress(base + off),
                      1);
  EXPECT_NE(wrong["results"][0]["note"].get<std::string>().find("different build"), std::string::npos);
  // A module with no debug file by its build-ID was recorded, not indexed.
  json absent = Frames("--kernel-text " + testing::HexAddress(text) + " --module absent_mod@" +
                           testing::HexAddress(base + 0x100000) + " " + testing::HexAddress(base + 0x100010),
                       1);
  EXPECT_NE(absent["results"][0]["note"].get<std::string>().find("not indexed"), std::string::npos) << absent.dump();
  CommandResult st = Symdex("--json status");
  EXPECT_NE(st.out.find("absent_mod"), std::string::npos) << st.out;
}

TEST_F(CliFramesTest, AMachinesCapturedSysfsGivesTheLayout) {
  // What a fleet agent ships: /sys/kernel/notes and /sys/module/M/{sections,notes} as files.
  const std::string sys = *dir_ / "captured-sys";
  const uint64_t base = 0xffffffffc0b00000ull;
  RunCommand("mkdir -p '" + sys + "/kernel' '" + sys + "/module/probe_mod/sections' '" + sys +
             "/module/probe_mod/notes' '" + sys + "/module/builtin_only/parameters'");
  RunCommand("objcopy -O binary --only-section=.note.gnu.build-id '" + fx_->vmlinux + "' '" + sys + "/kernel/notes'");
  RunCommand("objcopy -O binary --only-section=.note.gnu.build-id '" + fx_->module + "' '" + sys +
             "/module/probe_mod/notes/.note.gnu.build-id'");
  testing::WriteFile(sys + "/module/probe_mod/sections/.text", testing::HexAddress(base) + "\n");
  const uint64_t off = testing::NmValue(fx_->module, "blocked_fn") + 1;
  CommandResult r = Symdex("--json frames --kernel-notes '" + sys + "/kernel/notes' --modules-from '" + sys +
                           "/module' --kaslr-offset 0x0 " + testing::HexAddress(base + off));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["target"], vmlinux_id_);  // the target chosen by the notes' build-ID
  EXPECT_EQ(j["results"][0]["symbol"], "blocked_fn");
  EXPECT_EQ(j["results"][0]["module"], "probe_mod");
  EXPECT_TRUE(j["results"][0]["exact"].get<bool>());
  // A notes file without a build-ID is an input error, said so.
  testing::WriteFile(*dir_ / "empty-notes", "");
  CommandResult bad = Symdex("frames --kernel-notes '" + (*dir_ / "empty-notes") + "' 0x1");
  EXPECT_EQ(bad.exit_code, 3) << bad.err;
  EXPECT_NE(bad.err.find("no GNU build-ID note"), std::string::npos) << bad.err;
}

// Frames from stdin are answered in batches, several at once (SYMDEX_FRAMES_BATCH sets their
// size): the answer is the same document whatever the batches, in input order.
TEST_F(CliFramesTest, BatchesPrintOneDocumentInInputOrder) {
  json which = json::parse(Symdex("--json which quiet_fn").out);
  ASSERT_FALSE(which["instances"].empty());
  const uint64_t quiet = std::stoull(which["instances"][0]["address"].get<std::string>(), nullptr, 16);
  std::string lines;
  for (int i = 0; i < 7; ++i) lines += testing::HexAddress(quiet + i) + "\n";
  lines += "quiet_fn+0x1/0x10\n";
  lines += "0x10\n";  // not found
  const std::string input = *dir_ / "batches.txt";
  testing::WriteFile(input, lines);
  const std::string empty = *dir_ / "no-frames.txt";
  testing::WriteFile(empty, "");
  auto run = [&](const std::string& batch, const std::string& file, bool json_out) {
    return RunCommand("env -u DEBUGINFOD_URLS SYMDEX_FRAMES_BATCH=" + batch + " " + std::string(SYMDEX_BIN) +
                      " --db '" + (*dir_ / "index.db") + "'" + (json_out ? " --json" : "") + " frames --build-id " +
                      vmlinux_id_ + " - < '" + file + "'");
  };
  for (bool json_out : {true, false}) {
    CommandResult whole = run("4096", input, json_out);
    EXPECT_EQ(whole.exit_code, 1) << whole.err;  // 0x10
    for (const char* batch : {"1", "2", "3"}) {
      CommandResult parts = run(batch, input, json_out);
      EXPECT_EQ(parts.exit_code, 1) << parts.err;
      EXPECT_EQ(parts.out, whole.out) << "batches of " << batch;
    }
    if (!json_out) continue;
    json j = json::parse(whole.out);
    EXPECT_EQ(whole.out, j.dump(2) + "\n");
    ASSERT_EQ(j["results"].size(), 9u);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(j["results"][i]["input"], testing::HexAddress(quiet + i)) << i;
    EXPECT_EQ(j["results"][7]["symbol"], "quiet_fn");
  }
  CommandResult none = run("4096", empty, true);
  EXPECT_EQ(none.exit_code, 0) << none.err;
  json j = json::parse(none.out);
  EXPECT_EQ(none.out, j.dump(2) + "\n");
  EXPECT_TRUE(j["results"].empty());
}

TEST_F(CliFramesTest, HostileRequestsAreRefused) {
  CommandResult r = Symdex("frames --build-id " + vmlinux_id_ + " --kernel-build-id zz 0x1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not a build-ID"), std::string::npos) << r.err;
  CommandResult other =
      Symdex("frames --build-id " + vmlinux_id_ + " --kernel-build-id 00112233445566778899aabbccddeeff00112233 0x1");
  EXPECT_EQ(other.exit_code, 3) << other.err;
  EXPECT_NE(other.err.find("the host's kernel has build-ID"), std::string::npos) << other.err;
  CommandResult both = Symdex("frames --build-id " + vmlinux_id_ + " --kernel-text 0x1 --kaslr-offset 0x2 0x1");
  EXPECT_EQ(both.exit_code, 2) << both.err;
  CommandResult line = Symdex("frames --build-id " + vmlinux_id_ + " '" + std::string(5000, 'a') + "+0x1/0x2'");
  EXPECT_EQ(line.exit_code, 2) << line.err;
}

}  // namespace
}  // namespace symdex
