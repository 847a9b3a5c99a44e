// Probe verdicts through the daemon: the same bytes from `symdex --connect` as from
// `symdex --local` for every verb that shows or acts on a verdict, on the compiled miniature
// kernel with fentry sites, notrace, NOKPROBE, __init and noinstr code (tests/unit/probe_fixture.h)
// — so the wire carries every verdict field, both ways.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "tests/daemon/daemon_harness.h"
#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::DaemonProcess;
using testing::ProbeFixture;
using testing::RunCommand;
using testing::TempDir;

TEST(VerdictDaemonTest, VerdictsAreIdenticalEmbeddedAndThroughTheDaemon) {
  ProbeFixture fx;
  TempDir dir;
  const std::string db = dir / "index.db", sock = dir / "s.sock";
  auto cli = [](const std::string& args) {
    return RunCommand("env -u DEBUGINFOD_URLS -u SYMDEX_DB " + std::string(SYMDEX_BIN) + " " + args);
  };
  CommandResult idx = cli("--db '" + db + "' index -q --system-map '" + fx.system_map + "' --modules-dir '" +
                          fx.modules_dir + "' --debug-dir '" + fx.debug_dir + "' --no-debuginfod --no-addr-map");
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  DaemonProcess d({"--listen", "unix:" + sock, "--db", db, "--no-index-live", "--modules-poll", "0"},
                  dir / "daemon.log", "unix:" + sock);
  ASSERT_TRUE(d.ready()) << d.Log();
  const std::vector<std::string> cmds = {
      "which dup_fn",
      "--json which dup_fn",
      "--json which boot_fn",
      "--json which blocked_fn",
      "which raw_fn",
      "dups",
      "--json dups --traceable",
      "--json resolve 'vmlinux:dup_fn#untraced.c' probe_mod:quiet_fn",
      "kprobe -n 'vmlinux:dup_fn#traced.c'",
      "kprobe -n 'vmlinux:dup_fn#untraced.c'",
      "--json kprobe -n vmlinux:boot_fn",
      "kprobe -n --force probe_mod:quiet_fn",
      "--json symbols -m probe_mod",
      "status -v",
  };
  size_t refused = 0;
  std::set<std::string> kinds;
  for (const auto& c : cmds) {
    CommandResult local = cli("--local --db '" + db + "' " + c);
    CommandResult remote = cli("--connect 'unix:" + sock + "' " + c);
    EXPECT_EQ(local.exit_code, remote.exit_code) << c << "\n" << local.err << "\n---\n" << remote.err;
    EXPECT_EQ(local.out, remote.out) << c;
    EXPECT_EQ(local.err, remote.err) << c;
    refused += local.exit_code == 4;
    if (c.starts_with("--json which")) {
      const json j = json::parse(local.out);
      for (const auto& in : j["instances"]) kinds.insert(in["verdict"]["kind"]);
    }
  }
  EXPECT_EQ(refused, 2u);  // untraced dup_fn, boot_fn
  EXPECT_EQ(kinds, (std::set<std::string>{"traceable", "no-fentry", "init", "blacklisted"}));
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

}  // namespace
}  // namespace symdex
