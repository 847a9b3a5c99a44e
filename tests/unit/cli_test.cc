// Runs the built `symdex` binary against fixture trees: what a user or a script sees.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/query/verbs.h"
#include "tests/unit/test_util.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::CompileObject;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

using symdex::testing::ElfNote;
constexpr auto Note = ElfNote;

constexpr char kKallsyms[] = R"(ffffffffa0e00000 T _text
ffffffffa0e00000 T _stext
ffffffffa0f11dc0 t __pfx_name_show
ffffffffa0f11dd0 t name_show
ffffffffa0f11e30 t kobj_show
ffffffffa14807e0 t __pfx_name_show
ffffffffa14807f0 t name_show
ffffffffa1480820 T unique_fn
ffffffffa2000000 r __func__.1
ffffffffa2000010 r __func__.1
ffffffffc0a003e0 t name_show	[uio]
ffffffffc0a00440 t uio_open	[uio]
ffffffffc0a10000 t name_show	[mei]
ffffffffc0a10060 t name_show	[mei]
)";

class CliTest : public ::testing::Test {
 protected:
  CommandResult Symdex(const std::string& args) {
    return RunCommand("env -u DEBUGINFOD_URLS " + std::string(SYMDEX_BIN) + " --db '" + (dir_ / "index.db") + "' " +
                      args);
  }
  json Json(const std::string& args, int want_exit = 0) {
    CommandResult r = Symdex(args + " --json");
    EXPECT_EQ(r.exit_code, want_exit) << args << "\n" << r.out << r.err;
    return json::parse(r.out);
  }
  std::string MakeSysroot(const std::string& name, const std::string& kallsyms) {
    std::string root = dir_ / name;
    WriteFile(root + "/proc/kallsyms", kallsyms);
    WriteFile(root + "/proc/modules",
              "uio 24576 0 - Live 0xffffffffc0a00000\nmei 16384 0 - Live 0xffffffffc0a10000 (E)\n");
    WriteFile(root + "/proc/sys/kernel/osrelease", "6.1.0-fixture\n");
    WriteFile(root + "/proc/sys/kernel/kptr_restrict", "1\n");
    WriteFile(root + "/sys/kernel/notes",
              Note(3, std::string_view("GNU\0", 4), std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 10)));
    WriteFile(root + "/sys/module/uio/sections/.text", "0xffffffffc0a00000\n");
    WriteFile(root + "/sys/module/uio/notes/.note.gnu.build-id",
              Note(3, std::string_view("GNU\0", 4), std::string("\xaa\xbb", 2)));
    return root;
  }
  TempDir dir_;
};

TEST_F(CliTest, LiveSysrootIndexWhichDupsStatus) {
  std::string root = MakeSysroot("root", kKallsyms);
  json idx = Json("index --sysroot '" + root + "'");
  EXPECT_EQ(idx["target"], "host");
  EXPECT_EQ(idx["symbols"], 14);
  EXPECT_EQ(idx["build_id"], "0102030405060708090a");

  json w = Json("which name_show");
  ASSERT_EQ(w["count"], 5);
  EXPECT_EQ(w["instances"][0]["module"], "vmlinux");
  EXPECT_EQ(w["instances"][0]["probe"], "_text+" + std::to_string(0xffffffffa0f11dd0ull - 0xffffffffa0e00000ull));
  EXPECT_EQ(w["instances"][0]["size"], 0x60);
  EXPECT_EQ(w["instances"][2]["module"], "mei");
  EXPECT_EQ(w["instances"][2]["probe"], "0xffffffffc0a10000");  // twice in mei: address form
  EXPECT_EQ(w["instances"][4]["module"], "uio");
  EXPECT_EQ(w["instances"][4]["probe"], "uio:name_show");

  json d = Json("dups");
  EXPECT_EQ(d["names"], 1);  // name_show; __pfx_ and __func__ noise skipped, __func__ not text anyway
  EXPECT_EQ(d["symbols"], 5);
  EXPECT_EQ(d["duplicates"][0]["name"], "name_show");

  json s = Json("status");
  ASSERT_EQ(s["targets"].size(), 1u);
  EXPECT_EQ(s["targets"][0]["release"], "6.1.0-fixture");
  EXPECT_EQ(s["targets"][0]["text_addr"], "0xffffffffa0e00000");
  EXPECT_EQ(s["targets"][0]["modules"], 2);

  CommandResult text = Symdex("which name_show");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("uio:name_show"), std::string::npos) << text.out;
}

TEST_F(CliTest, ExitCodes) {
  EXPECT_EQ(Symdex("which name_show").exit_code, 3);  // no index yet
  EXPECT_NE(Symdex("which name_show").err.find("symdex index"), std::string::npos);
  ASSERT_EQ(Symdex("index --sysroot '" + MakeSysroot("r", kKallsyms) + "'").exit_code, 0);
  EXPECT_EQ(Symdex("which no_such_function").exit_code, 1);
  EXPECT_EQ(Symdex("which name_show --target nope").exit_code, 2);
  EXPECT_EQ(Symdex("frobnicate").exit_code, 2);
  EXPECT_EQ(Symdex("which").exit_code, 2);
  CommandResult empty = Symdex("which ''");
  EXPECT_EQ(empty.exit_code, 2) << "an empty name is a usage error, as the daemon says it";
  EXPECT_NE(empty.err.find("name is empty"), std::string::npos) << empty.err;
  CommandResult help = Symdex("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos);
  json err = Json("which name_show --target nope", 2);
  EXPECT_EQ(err["error"]["code"], "INVALID_ARGUMENT");
}

// The subcommands `symdex ARGS --help` lists.
std::vector<std::string> SubcommandsOf(const std::string& args) {
  CommandResult r = RunCommand(std::string(SYMDEX_BIN) + " " + args + " --help");
  std::vector<std::string> out;
  const size_t at = r.out.find("\nSubcommands:\n");
  if (r.exit_code != 0 || at == std::string::npos) return out;
  std::istringstream lines(r.out.substr(at + 14));
  for (std::string line; std::getline(lines, line) && line.starts_with("  ");) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    out.push_back(name);
  }
  return out;
}

// Every verb of the query table is asked by the `symdex` command it names (kCli), and that command
// is one `symdex --help` lists: no RPC the CLI cannot reach, no verb the help forgets.
TEST(CliVerbTable, EveryVerbIsAskedByACommandTheHelpLists) {
  const std::vector<std::string> top = SubcommandsOf("");
  ASSERT_GT(top.size(), 10u) << "symdex --help lists no subcommands";
  size_t checked = 0;
  query::Verbs::ForEach([&]<class V>(std::type_identity<V>) {
    std::istringstream words(V::kCli);
    std::string verb, sub;
    words >> verb >> sub;
    EXPECT_NE(std::find(top.begin(), top.end(), verb), top.end())
        << V::kMethod << ": '" << verb << "' is not a command symdex --help lists";
    if (!sub.empty() && !sub.starts_with("--")) {
      const std::vector<std::string> subs = SubcommandsOf(verb);
      EXPECT_NE(std::find(subs.begin(), subs.end(), sub), subs.end())
          << V::kMethod << ": 'symdex " << verb << " --help' lists no '" << sub << "'";
    } else if (!sub.empty()) {
      CommandResult help = RunCommand(std::string(SYMDEX_BIN) + " " + verb + " --help");
      EXPECT_NE(help.out.find(sub), std::string::npos) << V::kMethod << ": symdex " << verb << " has no " << sub;
    }
    ++checked;
  });
  EXPECT_EQ(checked, std::variant_size_v<query::AnyRequest>);
}

// What a `symdex` process loads: no gRPC stack and no libdebuginfod (libcurl and its TLS,
// Kerberos and LDAP libraries) — they are opened only by the calls that need them. Linked, they
// were most of an embedded call's start-up (26 ms of 9 for `symdex --version` on a 2-core machine).
TEST_F(CliTest, TheCliLinksNeitherGrpcNorLibdebuginfod) {
  CommandResult r = RunCommand("readelf -d " + std::string(SYMDEX_BIN));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.out.find("(NEEDED)"), std::string::npos) << r.out;
  for (const char* lib : {"libgrpc", "libprotobuf", "libdebuginfod", "libcurl"}) {
    EXPECT_EQ(r.out.find(lib), std::string::npos) << "symdex links " << lib << ":\n" << r.out;
  }
}

// Talking to symdexd opens symdex-remote.so: without it, a clear error naming what is missing and
// where it was looked for (exit 3, an environment error); embedded calls do not need it.
TEST_F(CliTest, WithoutTheRemoteModuleRemoteCallsSayWhatIsMissing) {
  ASSERT_EQ(Symdex("index --sysroot '" + MakeSysroot("r", kKallsyms) + "'").exit_code, 0);
  const std::string missing = "SYMDEX_REMOTE_MODULE='" + (dir_ / "nowhere/symdex-remote.so") + "' ";
  CommandResult r = RunCommand(missing + SYMDEX_BIN + " --connect unix:" + (dir_ / "none.sock") + " which name_show");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("symdex-remote.so"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nowhere/symdex-remote.so"), std::string::npos) << r.err;
  CommandResult local = RunCommand(missing + SYMDEX_BIN + " --db '" + (dir_ / "index.db") + "' which name_show");
  EXPECT_EQ(local.exit_code, 0) << local.err;
  // A file that is not the module is refused, not called.
  WriteFile(dir_ / "bogus.so", "not an ELF file");
  CommandResult bogus = RunCommand("SYMDEX_REMOTE_MODULE='" + (dir_ / "bogus.so") + "' " + SYMDEX_BIN +
                                   " --connect unix:" + (dir_ / "none.sock") + " which name_show");
  EXPECT_EQ(bogus.exit_code, 3) << bogus.err;
  EXPECT_NE(bogus.err.find("bogus.so"), std::string::npos) << bogus.err;
}

TEST_F(CliTest, ZeroAddressesAreRefusedAndKeepThePreviousIndex) {
  ASSERT_EQ(Symdex("index --sysroot '" + MakeSysroot("good", kKallsyms) + "'").exit_code, 0);
  std::string zeros = "0000000000000000 T _text\n0000000000000000 t name_show\n0000000000000000 t x\t[uio]\n";
  CommandResult r = Symdex("index --sysroot '" + MakeSysroot("zero", zeros) + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("kptr_restrict=1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CAP_SYSLOG"), std::string::npos) << r.err;
  json s = Json("status");
  EXPECT_EQ(s["targets"][0]["generation"], 1);
  EXPECT_EQ(Json("which name_show")["count"], 5);
}

TEST_F(CliTest, MalformedKallsymsNamesFileAndLine) {
  ASSERT_EQ(Symdex("index --sysroot '" + MakeSysroot("good", kKallsyms) + "'").exit_code, 0);
  std::string bad = std::string(kKallsyms) + "ffffffffa1480900 T\n";
  std::string root = MakeSysroot("bad", bad);
  CommandResult r = Symdex("index --sysroot '" + root + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find(root + "/proc/kallsyms:15: missing symbol name"), std::string::npos) << r.err;
  EXPECT_EQ(Json("which name_show")["count"], 5);  // previous index untouched
}

// A live kernel's /proc/kallsyms as Debian's arm64 6.12 writes it: its modules' local labels
// carry a control byte (".L14472\x02 1") and are listed with mapping symbols ($x) and L0. The host
// is indexed, those left out and counted in status; a name the kernel keeps with a control byte
// is indexed byte-exact, printed escaped in text and exact in JSON, and never put in a kprobe.
TEST_F(CliTest, KallsymsAsTheKernelWritesIt) {
  const std::string labels = std::string(kKallsyms) +
                             "ffffffffc0a00500 r .L14472\x02 1\t[uio]\n"
                             "ffffffffc0a00510 r .L14473\x02\t[uio]\n"
                             "ffffffffc0a00520 t $x\t[uio]\n"
                             "ffffffffc0a00530 t L0\t[uio]\n"
                             "ffffffffc0a00600 t ctl\x01name\t[uio]\n"
                             "ffffffffa1480900 T vm\x01"
                             "fn\n";
  const std::string root = MakeSysroot("labels", labels);
  json idx = Json("index --sysroot '" + root + "'");
  EXPECT_EQ(idx["symbols"], 16);  // the fixture's 14 and the two functions

  json s = Json("status");
  const json& kallsyms = s["targets"][0]["files"][0];
  ASSERT_EQ(kallsyms["role"], "kallsyms");
  EXPECT_EQ(kallsyms["dropped"], json::parse(R"js([{"rule": "module local labels (.L, L0)", "count": 3},
                              {"rule": "module mapping symbols ($x, $d)", "count": 1}])js"));
  CommandResult text = Symdex("status");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("left out          4 symbols of " + root +
                          "/proc/kallsyms, as the kernel leaves them out: 3 module local labels (.L, L0), 1 module "
                          "mapping symbols ($x, $d)"),
            std::string::npos)
      << text.out;

  const std::string ctl = "\"$(printf 'ctl\\001name')\"";
  json w = Json("which " + ctl);
  ASSERT_EQ(w["count"], 1);
  EXPECT_EQ(w["instances"][0]["name"], "ctl\x01name");
  EXPECT_EQ(w["instances"][0]["module"], "uio");
  for (const std::string& verb : {"which " + ctl, std::string("symbols --all-types"), std::string("kallsyms"),
                                  std::string("addr 0xffffffffc0a00604"), std::string("dups --all-types")}) {
    CommandResult r = Symdex(verb);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << verb << "\n" << r.err;
    for (const std::string* out : {&r.out, &r.err}) {
      EXPECT_EQ(out->find('\x01'), std::string::npos) << verb << " printed a raw control byte:\n" << *out;
      EXPECT_EQ(out->find('\x02'), std::string::npos) << verb << " printed a raw control byte:\n" << *out;
    }
    if (verb != "dups --all-types") {
      EXPECT_NE(r.out.find("ctl\\x01name"), std::string::npos) << verb << "\n" << r.out;
    }
  }
  EXPECT_NE(Symdex("kallsyms").out.find("ffffffffa1480900 T vm\\x01fn\n"), std::string::npos);

  // kprobe: the address form, never the name.
  CommandResult vm = Symdex("kprobe -n \"$(printf 'vm\\001fn')\"");
  EXPECT_EQ(vm.exit_code, 0) << vm.err;
  EXPECT_EQ(vm.out, "p:symdex/vm_fn _text+" + std::to_string(0xffffffffa1480900ull - 0xffffffffa0e00000ull) + "\n");
  CommandResult mod = Symdex("kprobe -n " + ctl);
  EXPECT_EQ(mod.exit_code, 0) << mod.err;
  EXPECT_EQ(mod.out, "p:symdex/ctl_name 0xffffffffc0a00600\n");
  json kp = Json("kprobe -n " + ctl);
  EXPECT_EQ(kp["definition"], "p:symdex/ctl_name 0xffffffffc0a00600");
}

TEST_F(CliTest, MissingKallsymsIsAnEnvironmentError) {
  std::string root = dir_ / "empty";
  WriteFile(root + "/proc/.keep", "");
  CommandResult r = Symdex("index --sysroot '" + root + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("/proc/kallsyms"), std::string::npos);
}

constexpr char kModA[] = R"(
__attribute__((noinline)) static int name_show(int x) { return x + 1; }
__attribute__((noinline)) int mod_a_fn(int x) { return name_show(x); }
__attribute__((section(".init.text"), noinline)) int init_module(void) { return mod_a_fn(2); }
)";
constexpr char kModB[] = R"(
__attribute__((noinline)) static int name_show(int x) { return x * 3; }
__attribute__((noinline)) int mod_b_fn(int x) { return name_show(x); }
__attribute__((section(".init.text"), noinline)) int init_module(void) { return mod_b_fn(2); }
)";

TEST_F(CliTest, OfflineKernelWithCompressedAndCorruptModules) {
  std::string mods = dir_ / "lib/modules/6.1.0-99-test";
  WriteFile(mods + "/kernel/drivers/a/.keep", "");
  WriteFile(mods + "/kernel/drivers/b/.keep", "");
  CompileObject(kModA, mods + "/kernel/drivers/a/mod-a.ko");
  CompileObject(kModB, mods + "/kernel/drivers/b/mod_b.ko");
  CompileObject(kModA, mods + "/kernel/drivers/b/mod_c.ko");
  CompileObject(kModB, mods + "/kernel/drivers/b/mod_d.ko");
  ASSERT_EQ(RunCommand("xz '" + mods + "/kernel/drivers/b/mod_b.ko'").exit_code, 0);
  ASSERT_EQ(RunCommand("zstd -q --rm '" + mods + "/kernel/drivers/b/mod_c.ko'").exit_code, 0);
  ASSERT_EQ(RunCommand("gzip '" + mods + "/kernel/drivers/b/mod_d.ko'").exit_code, 0);
  WriteFile(mods + "/kernel/drivers/b/broken.ko",
            "\x7f"
            "ELF this is not really an ELF file");
  std::string map = dir_ / "boot/System.map-6.1.0-99-test";
  WriteFile(map,
            "ffffffff81000000 T _text\nffffffff81111dd0 t name_show\nffffffff81111e30 T other\n"
            "ffffffff81200000 T _etext\nffffffff82000000 B _end\n");

  CommandResult r = Symdex("index --system-map '" + map + "' --modules-dir '" + mods + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 of 5 module files could not be read"), std::string::npos) << r.err;

  json w = Json("which name_show --target 6.1.0-99-test");
  ASSERT_EQ(w["count"], 5);
  std::vector<std::string> modules;
  for (const auto& in : w["instances"]) modules.push_back(in["module"]);
  EXPECT_EQ(modules, (std::vector<std::string>{"vmlinux", "mod_a", "mod_b", "mod_c", "mod_d"}));
  EXPECT_EQ(w["instances"][1]["probe"], "mod_a:name_show");
  EXPECT_EQ(w["instances"][1]["section"], ".text");
  EXPECT_TRUE(w["instances"][1]["address"].is_null());

  json d = Json("dups");
  // name_show (5), mod_a_fn (a, c), mod_b_fn (b, d); + init_module (4, all .init.text)
  EXPECT_EQ(d["names"], 3);
  json d2 = Json("dups --with-init");
  EXPECT_EQ(d2["names"], 4);
  json dm = Json("dups --module mod_c");
  EXPECT_EQ(dm["names"], 2);  // not mod_b_fn

  json s = Json("status");
  bool saw_error = false;
  for (const auto& f : s["targets"][0]["files"]) {
    if (f["status"] == "error") {
      saw_error = true;
      EXPECT_NE(f["path"].get<std::string>().find("broken.ko"), std::string::npos);
    }
  }
  EXPECT_TRUE(saw_error);
  EXPECT_EQ(s["targets"][0]["kind"], "offline");
  EXPECT_EQ(s["targets"][0]["release"], "6.1.0-99-test");
}

// An offline kernel's module files: their local labels and mapping symbols left out and counted
// (status: one line for the module files together), and a copy whose name holds a control byte
// has no address in an offline target, so no kprobe form: refused, exit 4.
TEST_F(CliTest, OfflineModulesLeaveOutLabelsAndRefuseAControlByteProbe) {
  std::string mods = dir_ / "lib/modules/6.1.0-99-test";
  WriteFile(mods + "/kernel/drivers/a/.keep", "");
  const std::string ko = mods + "/kernel/drivers/a/mod_a.ko";
  CompileObject(kModA, ko);
  ASSERT_EQ(RunCommand("objcopy --add-symbol '.L7=.text:0,local' --add-symbol 'L0=.text:0,local' "
                       "--add-symbol '$x=.text:0,local' --redefine-sym mod_a_fn=\"$(printf 'ctl\\001fn')\" '" +
                       ko + "'")
                .exit_code,
            0);
  std::string map = dir_ / "boot/System.map-6.1.0-99-test";
  WriteFile(map,
            "ffffffff81000000 T _text\nffffffff81111dd0 t name_show\nffffffff81200000 T _etext\n"
            "ffffffff82000000 B _end\n");
  CommandResult r = Symdex("index --system-map '" + map + "' --modules-dir '" + mods + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  json s = Json("status");
  json dropped;
  for (const auto& f : s["targets"][0]["files"]) {
    if (f["role"] == "module") dropped = f["dropped"];
  }
  EXPECT_EQ(dropped, json::parse(R"js([{"rule": "local labels (.L, L0)", "count": 2},
                                       {"rule": "mapping symbols ($x, $d)", "count": 1}])js"))
      << s.dump(2);
  CommandResult text = Symdex("status");
  EXPECT_NE(text.out.find("left out          3 symbols of 1 module file, as the kernel leaves them out: 2 local "
                          "labels (.L, L0), 1 mapping symbols ($x, $d)"),
            std::string::npos)
      << text.out;

  const std::string ctl = "\"$(printf 'ctl\\001fn')\"";
  json w = Json("which " + ctl);
  ASSERT_EQ(w["count"], 1);
  EXPECT_EQ(w["instances"][0]["name"],
            "ctl\x01"
            "fn");
  CommandResult kp = Symdex("kprobe -n " + ctl);
  EXPECT_EQ(kp.exit_code, 4) << kp.out << kp.err;
  EXPECT_EQ(kp.out, "");
  EXPECT_NE(kp.err.find("mod_a:ctl\\x01fn: its name holds a control byte"), std::string::npos) << kp.err;
  EXPECT_EQ(kp.err.find('\x01'), std::string::npos) << kp.err;
  json kj = Json("kprobe -n " + ctl, 4);
  EXPECT_EQ(kj["status"], "no-form");
  EXPECT_EQ(kj["instance"]["name"],
            "ctl\x01"
            "fn");
  CommandResult bt = Symdex("kprobe -n --format bpftrace " + ctl);
  EXPECT_EQ(bt.exit_code, 4) << bt.out << bt.err;
  EXPECT_EQ(bt.out.find('\x01'), std::string::npos);
}

}  // namespace
}  // namespace symdex
