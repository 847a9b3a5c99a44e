// Safe to expose: the files that hold live kernel addresses (the index, its -wal/-shm,
// the address maps and their directories) are for their owner and the `symdex` group only,
// whatever the umask; over-readable ones are fixed or refused; a killed address-map writer's
// temporary file is cleaned up; a damaged index is reported with its path and the cure.
// Runs the built `symdex` on the miniature kernel (tests/unit/kernel_fixture.h), as a user would.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/unit/kernel_fixture.h"

namespace symdex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::KernelFixture;
using testing::RunCommand;
using testing::WriteFile;

using testing::kFixtureRelease;

// "0640"
std::string ModeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "missing";
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", st.st_mode & 07777);
  return buf;
}

gid_t GroupOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_gid : static_cast<gid_t>(-1);
}

// As a user with no claim on the files: nobody, in no group of ours.
std::string AsStranger(const std::string& cmd) {
  return "setpriv --reuid=nobody --regid=nogroup --clear-groups -- " + cmd;
}
// As nobody, but a member of `gid` (the files' group).
std::string AsGroupMember(gid_t gid, const std::string& cmd) {
  return "setpriv --reuid=nobody --regid=nogroup --groups=" + std::to_string(gid) + " -- " + cmd;
}

class FileModesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Let other users walk down to the index (never list or read): then only the modes symdex
    // gives its own files decide who reads them.
    fs::permissions(fx_.dir.path(), fs::perms(0711));
  }
  // The index lives in a directory symdex creates: its mode is symdex's doing too.
  std::string Db() const { return fx_.dir / "state/symdex-idx/index.db"; }
  std::string Maps() const { return Db() + "-addrmaps"; }
  std::string Cmd(const std::string& args) const {
    return "env -u DEBUGINFOD_URLS HOME=/nonexistent " + std::string(SYMDEX_BIN) + " --db '" + Db() + "' " + args;
  }
  CommandResult Symdex(const std::string& args, const std::string& umask = "022") {
    return RunCommand("umask " + umask + " && " + Cmd(args));
  }
  void Must(const std::string& cmd) {
    CommandResult r = RunCommand(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  }
  // `symdex index` of the fixture vmlinux offline (System.map + a debug root), which writes the
  // index and vmlinux's address map.
  void Index(const std::string& umask = "022", int maps_built = 1) {
    const std::string map = fx_.dir / ("boot/System.map-" + std::string(kFixtureRelease));
    const std::string dbg = fx_.dir / "debug";
    // Laid out once (a debug file whose stamp — size, mtime, ctime, inode — changed is parsed and
    // mapped again), readable by anyone: a refusal below must come from the index's modes.
    const std::string vml = dbg + "/boot/vmlinux-" + kFixtureRelease;
    if (!fs::exists(vml)) {
      Must("mkdir -p '" + (fx_.dir / "boot") + "' '" + dbg + "/boot' && nm -n --defined-only '" + fx_.vmlinux +
           "' > '" + map + "' && cp '" + fx_.vmlinux + "' '" + vml + "' && chmod -R a+rX '" + (fx_.dir / "boot") +
           "' '" + dbg + "'");
    }
    CommandResult r = Symdex("index --system-map '" + map + "' --debug-dir '" + dbg + "' --json", umask);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ASSERT_EQ(json::parse(r.out)["addr_maps"]["built"], maps_built) << r.out;
  }
  std::string MapFile() const {
    for (const auto& e : fs::directory_iterator(Maps())) {
      if (e.path().extension() == ".addrmap") return e.path().string();
    }
    return "";
  }
  // An address inside load_binary, for `symdex addr`.
  std::string SomeAddress() {
    CommandResult r = RunCommand("nm '" + fx_.vmlinux + "' | awk '$3==\"load_binary\"{print $1; exit}'");
    return "0x" + r.out.substr(0, r.out.find('\n'));
  }

  KernelFixture fx_{5};
};

class UmaskTest : public FileModesTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(UmaskTest, IndexWalShmAndAddressMapsArePrivateWhateverTheUmask) {
  Index(GetParam());
  ASSERT_EQ(Symdex("which load_binary", GetParam()).exit_code, 0);  // a reader leaves -wal/-shm behind
  EXPECT_EQ(ModeOf(fs::path(Db()).parent_path()), "0750") << "the directory symdex created for the index";
  EXPECT_EQ(ModeOf(fs::path(Db()).parent_path().parent_path()), "0750") << "and its parent, created too";
  EXPECT_EQ(ModeOf(Db()), "0640");
  EXPECT_EQ(ModeOf(Db() + "-wal"), "0640");
  EXPECT_EQ(ModeOf(Db() + "-shm"), "0640");
  EXPECT_EQ(ModeOf(Maps()), "0750");
  ASSERT_FALSE(MapFile().empty());
  EXPECT_EQ(ModeOf(MapFile()), "0640");
  // Root gives them to the `symdex` group when there is one (the machine's business: not made here).
  if (group* g = ::getgrnam("symdex"); g != nullptr && ::geteuid() == 0) {
    EXPECT_EQ(GroupOf(Db()), g->gr_gid);
    EXPECT_EQ(GroupOf(MapFile()), g->gr_gid);
    EXPECT_EQ(GroupOf(Maps()), g->gr_gid);
  }
}

INSTANTIATE_TEST_SUITE_P(Umasks, UmaskTest, ::testing::Values("022", "000"));

TEST_F(FileModesTest, StrangerCannotReadTheIndexOrMapsAGroupMemberCanQuery) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users (setpriv)";
  Index();
  ASSERT_EQ(Symdex("which load_binary").exit_code, 0);
  const std::string addr = SomeAddress();

  for (const std::string& f : {Db(), Db() + "-wal", MapFile()}) {
    CommandResult cat = RunCommand(AsStranger("cat '" + f + "'"));
    EXPECT_NE(cat.exit_code, 0) << f << " is readable by nobody";
  }
  EXPECT_NE(RunCommand(AsStranger("ls '" + Maps() + "'")).exit_code, 0);
  CommandResult which = RunCommand(AsStranger(Cmd("which load_binary")));
  EXPECT_EQ(which.exit_code, 3) << which.out << which.err;
  EXPECT_EQ(which.out.find("load_binary"), std::string::npos) << which.out;
  EXPECT_NE(which.err.find("cannot read the index at " + Db() + ": Permission denied"), std::string::npos) << which.err;

  // A member of the files' group (read-only: it may write none of them) gets answers.
  const gid_t gid = GroupOf(Db());
  CommandResult member = RunCommand(AsGroupMember(gid, Cmd("which load_binary --json")));
  ASSERT_EQ(member.exit_code, 0) << member.err;
  EXPECT_EQ(json::parse(member.out)["count"], 2) << member.out;  // binfmt.c and its copy in compat.c
  CommandResult a = RunCommand(AsGroupMember(gid, Cmd("addr " + addr)));
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("load_binary"), std::string::npos) << a.out;
  EXPECT_EQ(a.err.find("address map"), std::string::npos) << "the map was readable: " << a.err;
  CommandResult st = RunCommand(AsGroupMember(gid, Cmd("status --json")));
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_EQ(ModeOf(Db()), "0640") << "a reader changes nothing";
}

TEST_F(FileModesTest, OverReadableIndexIsFixedByItsOwnerAndRefusedToOthers) {
  Index();
  const std::string map = MapFile();
  // As an older symdex left them under umask 022 (directories included: the stranger gets to
  // the file, as the tester's did).
  Must("chmod 0644 '" + Db() + "' '" + map + "' && chmod 0755 '" + Maps() + "' '" +
       fs::path(Db()).parent_path().string() + "' '" + fs::path(Db()).parent_path().parent_path().string() + "'");

  if (::geteuid() == 0) {
    // Not ours to fix: named, with its mode and the command that fixes it; exit 3.
    CommandResult refused = RunCommand(AsStranger(Cmd("which load_binary")));
    EXPECT_EQ(refused.exit_code, 3) << refused.out << refused.err;
    EXPECT_NE(refused.err.find(Db() + " is readable by every user (0644)"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("chmod o-rwx '" + Db() + "'"), std::string::npos) << refused.err;
    EXPECT_EQ(ModeOf(Db()), "0644") << "refused, not changed";
  }

  // The owner's next command fixes every file and says so once each.
  CommandResult fixed = Symdex("which load_binary");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.err.find("symdex: " + Db() + " was readable by every user (0644); now 0640"), std::string::npos)
      << fixed.err;
  EXPECT_NE(fixed.err.find(map + " was readable by every user (0644); now 0640"), std::string::npos) << fixed.err;
  EXPECT_NE(fixed.err.find(Maps() + " was listable by every user (0755); now 0750"), std::string::npos) << fixed.err;
  EXPECT_EQ(ModeOf(Db()), "0640");
  EXPECT_EQ(ModeOf(map), "0640");
  EXPECT_EQ(ModeOf(Maps()), "0750");
  CommandResult again = Symdex("which load_binary");
  EXPECT_EQ(again.err, "") << "said once";

  // World-writable only is fixed too.
  Must("chmod 0642 '" + Db() + "'");
  CommandResult w = Symdex("status");
  EXPECT_NE(w.err.find("was writable by every user (0642); now 0640"), std::string::npos) << w.err;
}

TEST_F(FileModesTest, DefaultIndexDirectoryIsMadePrivateToo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users (setpriv)";
  Index();
  // A user's default index ($XDG_STATE_HOME/symdex/index.db) as an older symdex left it under
  // umask 022. That directory exists only for the index, so its mode is symdex's to fix (the
  // directory of an index put elsewhere with --db is left alone).
  const std::string xdg = fx_.dir / "xdg";
  const std::string dir = xdg + "/symdex";
  Must("mkdir -p '" + dir + "' && cp -a '" + Db() + "' '" + Maps() + "' '" + dir + "/' && chown -R nobody '" + xdg +
       "' && chmod 0755 '" + xdg + "' '" + dir + "' && chmod 0644 '" + dir + "/index.db'");
  CommandResult r = RunCommand(AsStranger("env -u SYMDEX_DB HOME=/nonexistent XDG_STATE_HOME='" + xdg + "' " +
                                          SYMDEX_BIN + " --local which load_binary"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(dir + " was listable by every user (0755); now 0750"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir + "/index.db was readable by every user (0644); now 0640"), std::string::npos) << r.err;
  EXPECT_EQ(ModeOf(dir), "0750");
  EXPECT_EQ(ModeOf(xdg), "0755") << "not symdex's directory";
}

TEST_F(FileModesTest, KilledAddressMapWriterLeavesNoTemporaryFileBehind) {
  Index();
  // A writer that is gone: a child that has exited (its PID not reused this soon).
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string stem = MapFile() + ".tmp.";
  const std::string dead = stem + std::to_string(child);
  const std::string live = stem + std::to_string(::getpid());  // a writer at work: this process
  const std::string old_live = stem + "1";                     // alive (init) but hours old
  for (const std::string& f : {dead, live, old_live}) WriteFile(f, "half an address map");
  Must("touch -d '2 hours ago' '" + old_live + "'");

  CommandResult st = Symdex("status -v");
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(st.out.find("temporary address map " + dead + " (left by a killed writer"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find(live + " (being written by process"), std::string::npos) << st.out;
  json js = json::parse(Symdex("status --json").out);
  EXPECT_EQ(js["addr_map_temp_files"].size(), 3u) << js.dump();
  EXPECT_TRUE(fs::exists(dead)) << "status only reports";

  Index("022", 0);  // the next writer (the map itself is there already)
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(old_live));
  EXPECT_TRUE(fs::exists(live)) << "a live, fresh writer's file is left alone";
}

TEST_F(FileModesTest, DamagedIndexIsReportedWithItsPathAndTheCure) {
  Index();
  ASSERT_EQ(Symdex("status").exit_code, 0);
  EXPECT_NE(Symdex("status").out.find("integrity ok"), std::string::npos);
  // Overwrite one page in the middle of the file: the header and schema (page 1) stay intact,
  // so only a check that reads every page notices.
  const uintmax_t size = fs::file_size(Db());
  const uintmax_t page = 4096, middle = size / page / 2;
  ASSERT_GT(middle, 1u) << "index of " << size << " bytes";
  {
    std::fstream f(Db(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(middle * page));
    std::string junk(page, '\0');
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(0xa5 ^ (i * 7));
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string cure = "; move it away and run 'symdex index' again";
  CommandResult st = Symdex("status");
  EXPECT_EQ(st.exit_code, 3) << st.out << st.err;
  EXPECT_NE(st.err.find("symdex: index " + Db() + " is damaged: "), std::string::npos) << st.err;
  EXPECT_NE(st.err.find(cure), std::string::npos) << st.err;
  json js = json::parse(Symdex("status --json").out);
  EXPECT_EQ(js["error"]["code"], "DATA_LOSS") << js.dump();

  // Any other verb that reads a damaged page says the same, not a bare "malformed".
  {
    std::fstream f(Db(), std::ios::in | std::ios::out | std::ios::binary);
    std::string junk(page, '\x5a');
    for (uintmax_t p = 1; p + 1 < size / page; ++p) {
      f.seekp(static_cast<std::streamoff>(p * page));
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
  }
  for (const std::string& verb : {std::string("which load_binary"), "addr " + SomeAddress()}) {
    CommandResult r = Symdex(verb);
    EXPECT_EQ(r.exit_code, 3) << verb << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("index " + Db() + " is damaged: "), std::string::npos) << verb << "\n" << r.err;
    EXPECT_NE(r.err.find(cure), std::string::npos) << verb << "\n" << r.err;
  }
}

}  // namespace
}  // namespace symdex
