// `symdex index` with damaged, replaced, crashing and hanging module debug files, end to end on
// the miniature kernel: failed with the reason and never cached; a good file replacing a
// damaged one is indexed (not "cached"); one file's crash or hang leaves the others indexed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/unit/kernel_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::KernelFixture;
using testing::RunCommand;
using testing::Slurp;
using testing::WriteFile;

using testing::kFixtureRelease;

class CliDebugFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    map_ = fx_.dir / (std::string("System.map-") + kFixtureRelease);  // the release comes from its name
    mods_ = fx_.dir / "mods";
    dbg_ = fx_.dir / "debug";
    mod_debug_ = dbg_ + "/lib/modules/" + kFixtureRelease + "/kernel/drivers/fake_mod.ko";
    Must("nm -n --defined-only '" + fx_.vmlinux + "' > '" + map_ + "'");
    Must("mkdir -p '" + mods_ + "/kernel/drivers' '" + dbg_ + "/boot' '" + dbg_ + "/lib/modules/" + kFixtureRelease +
         "/kernel/drivers'");
    Must("cp '" + fx_.module_stripped + "' '" + mods_ + "/kernel/drivers/fake_mod.ko'");
    Must("cp '" + fx_.vmlinux + "' '" + dbg_ + "/boot/vmlinux-" + kFixtureRelease + "'");
  }
  void Must(const std::string& cmd) {
    CommandResult r = RunCommand(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  }
  json Index(const std::string& env = "") {
    CommandResult r = RunCommand("env -u DEBUGINFOD_URLS " + env + " " + SYMDEX_BIN + " --db '" + (fx_.dir / "i.db") +
                                 "' index --json --system-map '" + map_ + "' --modules-dir '" + mods_ +
                                 "' --debug-dir '" + dbg_ + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return json::parse(r.out)["debug_files"];
  }
  json ModuleStatus() {
    CommandResult r = RunCommand(std::string(SYMDEX_BIN) + " --db '" + (fx_.dir / "i.db") + "' status --json");
    json st = json::parse(r.out);
    for (const auto& d : st["targets"][0]["debuginfo"]) {
      if (d["module"] == "fake_mod") return d;
    }
    ADD_FAILURE() << "no fake_mod in status: " << r.out << r.err;
    return json();
  }
  bool ModuleHasDwarf() {
    CommandResult r =
        RunCommand(std::string(SYMDEX_BIN) + " --db '" + (fx_.dir / "i.db") + "' which name_show --exact --json");
    json w = json::parse(r.out);
    for (const auto& in : w["instances"]) {
      if (in["module"] == "fake_mod") return !in["dwarf"].is_null();
    }
    return false;
  }
  // The good module debug file with 64 bytes of its .debug_info (found by readelf) zeroed.
  void WriteDamaged() {
    CommandResult r = RunCommand("readelf -SW '" + fx_.module + "' | awk '$2==\".debug_info\"{print $5, $6}'");
    size_t off = std::stoul(r.out.substr(0, r.out.find(' ')), nullptr, 16);
    size_t size = std::stoul(r.out.substr(r.out.find(' ') + 1), nullptr, 16);
    std::string bytes = Slurp(fx_.module);
    bytes.replace(off + size / 2 - 32, 64, std::string(64, '\0'));
    WriteFile(mod_debug_, bytes);
  }
  KernelFixture fx_{5};
  std::string map_, mods_, dbg_, mod_debug_;
};

TEST_F(CliDebugFileTest, DamagedFileFailsWithReasonUntilAGoodOneReplacesIt) {
  WriteDamaged();
  json d = Index();
  EXPECT_EQ(d["indexed"], 1);  // vmlinux
  EXPECT_EQ(d["failed"], 1);
  json st = ModuleStatus();
  EXPECT_EQ(st["status"], "parse-error");
  std::string detail = st["detail"];
  EXPECT_NE(detail.find(mod_debug_ + ": .debug_info at 0x"), std::string::npos) << detail;
  EXPECT_FALSE(ModuleHasDwarf());

  d = Index();  // tried again, not cached
  EXPECT_EQ(d["failed"], 1);
  EXPECT_EQ(d["cached"], 1);

  Must("cp '" + fx_.module + "' '" + mod_debug_ + "'");
  d = Index();
  EXPECT_EQ(d["indexed"], 1);  // the good file, parsed: not "cached"
  EXPECT_EQ(d["failed"], 0);
  EXPECT_TRUE(ModuleHasDwarf());
  d = Index();
  EXPECT_EQ(d["cached"], 2);

  // The good file damaged in place: parsed again, failed, and the index made before stays.
  WriteDamaged();
  d = Index();
  EXPECT_EQ(d["failed"], 1);
  EXPECT_NE(ModuleStatus()["detail"].get<std::string>().find("before it changed"), std::string::npos);
  EXPECT_TRUE(ModuleHasDwarf());
}

TEST_F(CliDebugFileTest, CrashingAndHangingParsersFailOnlyThatFile) {
  Must("cp '" + fx_.module + "' '" + mod_debug_ + "'");
  json d = Index("SYMDEX_WORKER_TEST_CRASH_ON=fake_mod.ko");
  EXPECT_EQ(d["indexed"], 1);
  EXPECT_EQ(d["failed"], 1);
  EXPECT_NE(ModuleStatus()["detail"].get<std::string>().find("parser killed by SIGABRT"), std::string::npos)
      << ModuleStatus().dump();

  d = Index("SYMDEX_WORKER_TEST_HANG_ON=fake_mod.ko SYMDEX_DEBUGINFO_TIMEOUT=1");
  EXPECT_EQ(d["cached"], 1);
  EXPECT_EQ(d["failed"], 1);
  EXPECT_NE(ModuleStatus()["detail"].get<std::string>().find("timed out after 1 s"), std::string::npos)
      << ModuleStatus().dump();

  d = Index();
  EXPECT_EQ(d["indexed"], 1);
  EXPECT_TRUE(ModuleHasDwarf());
}

// vmlinux's rows go in while the worker reads it: the same rows, symbols and joins as when they
// are stored after the parse (SYMDEX_DWARF_PARTS=off). A worker that dies mid-stream stores
// none of vmlinux (its transaction rolls back) and fails only that file; the next run stores it.
TEST_F(CliDebugFileTest, VmlinuxStoredAsItIsReadIsStoredTheSame) {
  Must("cp '" + fx_.module + "' '" + mod_debug_ + "'");
  auto index_into = [&](const std::string& db, const std::string& env) {
    CommandResult r = RunCommand("env -u DEBUGINFOD_URLS " + env + " " + SYMDEX_BIN + " --db '" + db +
                                 "' index --json --no-addr-map --system-map '" + map_ + "' --modules-dir '" + mods_ +
                                 "' --debug-dir '" + dbg_ + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return json::parse(r.out)["debug_files"];
  };
  auto dump = [&](const std::string& db) {
    std::string out;
    for (const char* q :
         {"SELECT build_id, relocatable, path, text_addr, units, functions, variables FROM debug_files ORDER BY id",
          "SELECT * FROM dwarf_files ORDER BY 1, 2", "SELECT * FROM dwarf_units ORDER BY 1, 2",
          "SELECT * FROM dwarf_functions ORDER BY id", "SELECT * FROM dwarf_ranges ORDER BY function_id, lo",
          "SELECT * FROM dwarf_variables ORDER BY id", "SELECT * FROM dwarf_symbol_lines ORDER BY 1, 2, 3",
          "SELECT name, addr, debug_file_id, dwarf_function_id, src_unit, src_file, src_line, dwarf_note, elf_facts "
          "FROM symbols ORDER BY addr, name",
          "SELECT module, build_id, debug_file_id, status FROM target_debuginfo ORDER BY module"}) {
      CommandResult r = RunCommand("sqlite3 '" + db + "' \"" + q + "\"");
      EXPECT_EQ(r.exit_code, 0) << q << r.err;
      out += q + std::string("\n") + r.out;
    }
    return out;
  };
  const std::string as_read = fx_.dir / "as-read.db", after = fx_.dir / "after.db";
  json a = index_into(as_read, "");
  json b = index_into(after, "SYMDEX_DWARF_PARTS=off");
  EXPECT_EQ(a["stored_as_read"], 1) << a.dump();  // vmlinux; the module is stored after its parse
  EXPECT_EQ(b["stored_as_read"], 0) << b.dump();
  EXPECT_EQ(a["indexed"], 2);
  EXPECT_EQ(b["indexed"], 2);
  const std::string rows = dump(as_read);
  EXPECT_NE(rows.find("|name_show|"), std::string::npos);
  EXPECT_EQ(rows, dump(after));

  const std::string crashed = fx_.dir / "crashed.db";
  json c = index_into(crashed, "SYMDEX_WORKER_TEST_CRASH_AFTER_PART=vmlinux-");
  EXPECT_EQ(c["failed"], 1) << c.dump();
  EXPECT_EQ(c["indexed"], 1);  // the module
  EXPECT_EQ(c["stored_as_read"], 0);
  CommandResult rows_left =
      RunCommand("sqlite3 '" + crashed +
                 "' \"SELECT COUNT(*) FROM debug_files WHERE relocatable = 0; "
                 "SELECT COUNT(*) FROM dwarf_units u JOIN debug_files d ON d.id = u.debug_file_id "
                 "WHERE d.relocatable = 0\"");
  EXPECT_EQ(rows_left.out, "0\n0\n") << rows_left.err;
  json again = index_into(crashed, "");
  EXPECT_EQ(again["stored_as_read"], 1) << again.dump();
  EXPECT_EQ(again["cached"], 1);  // the module, from the run before
}

// A worker that hangs mid-stream holds the index's write lock no longer than the quiet limit:
// another writer gets it while the parse still hangs; the file then fails at its timeout and
// nothing of it is stored. The test follows the lock, not the clock: taken by the streaming
// writer, then free again while the run has not ended (its timeout, 20 s, is far off).
TEST_F(CliDebugFileTest, AHangingStreamGivesTheWriteLockBack) {
  const std::string db = fx_.dir / "hang.db";
  const std::string out = fx_.dir / "hang.json";
  const std::string rc = out + ".rc";
  CommandResult started = RunCommand(
      "(env -u DEBUGINFOD_URLS SYMDEX_WORKER_TEST_HANG_AFTER_PART=vmlinux- SYMDEX_DEBUGINFO_TIMEOUT=20 "
      "SYMDEX_DEBUGINFO_QUIET=1 " +
      std::string(SYMDEX_BIN) + " --db '" + db + "' index --json --no-addr-map --system-map '" + map_ +
      "' --debug-dir '" + dbg_ + "' > '" + out + "' 2>&1; echo done >> '" + rc + "') &");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  // Whether another writer gets the write lock at once (no busy wait).
  auto lock_free = [&] {
    return RunCommand("sqlite3 '" + db + "' 'BEGIN IMMEDIATE; ROLLBACK;' 2>/dev/null").exit_code == 0;
  };
  auto poll = [&](const std::function<bool()>& cond) {  // every 20 ms, for up to 2 minutes
    for (int i = 0; i < 6000; ++i) {
      if (cond()) return true;
      ::usleep(20000);
    }
    return false;
  };
  ASSERT_TRUE(poll([&] { return !std::filesystem::exists(db) ? false : !lock_free(); }))
      << "the run never held the write lock";
  ASSERT_TRUE(poll(lock_free)) << "the write lock was never given back";
  EXPECT_FALSE(std::filesystem::exists(rc)) << "the lock came back only when the run ended";
  ASSERT_TRUE(poll([&] { return std::filesystem::exists(rc); })) << "symdex index did not end";
  json r = json::parse(Slurp(out));
  EXPECT_EQ(r["debug_files"]["failed"], 1) << r.dump();
  EXPECT_EQ(r["debug_files"]["stored_as_read"], 0) << r.dump();
  CommandResult rows =
      RunCommand("sqlite3 '" + db + "' 'SELECT COUNT(*) FROM debug_files; SELECT COUNT(*) FROM dwarf_units'");
  EXPECT_EQ(rows.out, "0\n0\n") << rows.err;
}

TEST_F(CliDebugFileTest, MissingWorkerIsReportedWithTheCure) {
  Must("cp '" + fx_.module + "' '" + mod_debug_ + "'");
  json d = Index("SYMDEX_DEBUGINFO_WORKER=/nonexistent/symdex-debuginfo-worker");
  EXPECT_EQ(d["failed"], 2);
  std::string detail = ModuleStatus()["detail"];
  EXPECT_NE(detail.find("/nonexistent/symdex-debuginfo-worker"), std::string::npos) << detail;
}

}  // namespace
}  // namespace symdex

namespace symdex {
namespace {

// Two targets share vmlinux's debug file (one build-ID). The file changes and one target is
// indexed again: its rows are replaced in place, so the other target's symbols, joined to the
// old rows, must not point at whatever now has their ids — they lose their DWARF columns and
// say why, until that target is indexed again.
TEST_F(CliDebugFileTest, OtherTargetsForgetRowsOfAChangedDebugFile) {
  auto index = [&](const std::string& name) {
    CommandResult r = RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (fx_.dir / "i.db") +
                                 "' index -q --name " + name + " --system-map '" + map_ + "' --modules-dir '" + mods_ +
                                 "' --debug-dir '" + dbg_ + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  auto vmlinux_dwarf = [&](const std::string& target) {
    CommandResult r = RunCommand(std::string(SYMDEX_BIN) + " --db '" + (fx_.dir / "i.db") + "' --json which -t " +
                                 target + " name_show --exact");
    json w = json::parse(r.out);
    for (const auto& in : w["instances"]) {
      if (in["module"] == "vmlinux") return in;
    }
    return json();
  };
  index("a");
  index("b");
  ASSERT_FALSE(vmlinux_dwarf("b")["dwarf"].is_null());
  Must("touch -d '2001-01-01' '" + dbg_ + "/boot/vmlinux-" + kFixtureRelease + "'");
  index("a");
  EXPECT_FALSE(vmlinux_dwarf("a")["dwarf"].is_null());
  json b = vmlinux_dwarf("b");
  EXPECT_TRUE(b["dwarf"].is_null()) << b.dump();
  EXPECT_NE(b.value("dwarf_note", "").find("changed after this target was indexed"), std::string::npos) << b.dump();
  index("b");
  EXPECT_FALSE(vmlinux_dwarf("b")["dwarf"].is_null());
}

}  // namespace
}  // namespace symdex

namespace symdex {
namespace {

// vmlinux's address map is built in the worker too: a parser crash there costs the map (a
// warning; answers come from DWARF, the same), never the index run; the next run builds it.
TEST_F(CliDebugFileTest, AddressMapBuiltInTheWorkerACrashCostsOnlyTheMap) {
  const std::string db = fx_.dir / "i.db";
  auto index = [&](const std::string& env) {
    return RunCommand("env -u DEBUGINFOD_URLS " + env + " " + std::string(SYMDEX_BIN) + " --db '" + db +
                      "' index --json --system-map '" + map_ + "' --modules-dir '" + mods_ + "' --debug-dir '" + dbg_ +
                      "'");
  };
  CommandResult r = index("SYMDEX_WORKER_TEST_CRASH_MAP_ON=vmlinux-");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["addr_maps"]["built"], 0) << r.out;
  EXPECT_NE(r.out.find("parser killed by SIGABRT"), std::string::npos) << r.out;
  // The map is built while the target is written; its warning still reaches the stored target.
  json status = json::parse(RunCommand(std::string(SYMDEX_BIN) + " --db '" + db + "' --json status").out);
  ASSERT_EQ(status["targets"].size(), 1u) << status.dump();
  bool stored = false;
  for (const auto& w : status["targets"][0]["warnings"]) {
    stored |= std::string(w).find("no address map for") != std::string::npos;
  }
  EXPECT_TRUE(stored) << status.dump();
  // An address inside a function, answered without the map ...
  json w = json::parse(RunCommand(std::string(SYMDEX_BIN) + " --db '" + db + "' --json which name_show --exact").out);
  std::string addr;
  for (const auto& in : w["instances"]) {
    if (in["module"] == "vmlinux") addr = std::string(in["address"]);
  }
  ASSERT_FALSE(addr.empty()) << w.dump();
  CommandResult without = RunCommand(std::string(SYMDEX_BIN) + " --db '" + db + "' addr " + addr);
  EXPECT_EQ(without.exit_code, 0) << without.err;
  // ... and the same with the map the next run builds.
  r = index("");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["addr_maps"]["built"], 1) << r.out;
  status = json::parse(RunCommand(std::string(SYMDEX_BIN) + " --db '" + db + "' --json status").out);
  EXPECT_EQ(status["targets"][0]["warnings"].dump().find("no address map for"), std::string::npos) << status.dump();
  CommandResult with = RunCommand(std::string(SYMDEX_BIN) + " --db '" + db + "' addr " + addr);
  EXPECT_EQ(with.out, without.out);
}

// Two modules of one build-ID (a module file copied under another name): one debug file, parsed
// once; each module's symbols are joined to it, the first as soon as the file is stored, the
// second from the same table afterwards, and both answer with the same source lines.
TEST_F(CliDebugFileTest, ModulesSharingABuildIdAreBothJoined) {
  std::string twin = Slurp(fx_.module_stripped);
  const size_t at = twin.find("name=fake_mod");
  ASSERT_NE(at, std::string::npos);
  twin.replace(at, 13, "name=twin_mod");
  WriteFile(mods_ + "/kernel/drivers/twin_mod.ko", twin);
  Must("cp '" + fx_.module + "' '" + mod_debug_ + "'");
  Must("cp '" + fx_.module + "' '" + dbg_ + "/lib/modules/" + kFixtureRelease + "/kernel/drivers/twin_mod.ko'");
  json d = Index();
  EXPECT_EQ(d["indexed"], 2) << d.dump();  // vmlinux and the one module file
  CommandResult r =
      RunCommand(std::string(SYMDEX_BIN) + " --db '" + (fx_.dir / "i.db") + "' which name_show --exact --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::vector<std::string>> lines;  // module -> file:line of each instance
  const json w = json::parse(r.out);
  for (const auto& in : w["instances"]) {
    ASSERT_FALSE(in["dwarf"].is_null()) << in.dump();
    lines[in["module"].get<std::string>()].push_back(std::string(in["dwarf"]["file"]) + ":" +
                                                     std::to_string(int(in["dwarf"]["line"])));
  }
  ASSERT_EQ(lines.count("fake_mod"), 1u) << r.out;
  ASSERT_FALSE(lines["fake_mod"].empty());
  EXPECT_EQ(lines["twin_mod"], lines["fake_mod"]) << r.out;
}

}  // namespace
}  // namespace symdex
