// A fleet replica (symdexd --fleet-cache) with nothing indexed, in front of a real debuginfod
// serving the compiled mini kernel and its module: frames and queries for that kernel by build-ID
// are answered exactly as from the same kernel indexed locally with `symdex index --build-id`;
// concurrent first requests share one index run; unknown and hostile build-IDs are refused with
// the reason and remembered; a stopped debuginfod is UNAVAILABLE, not a hang.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <regex>
#include <thread>

#include "tests/daemon/daemon_harness.h"
#include "tests/unit/probe_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::DaemonProcess;
using testing::DebuginfodServer;
using testing::ProbeFixture;
using testing::RunCommand;
using testing::TempDir;

// The value of a Prometheus series (0 when absent).
double Metric(const std::string& text, const std::string& series) {
  size_t p = text.find("\n" + series + " ");
  if (p == std::string::npos) return 0;
  return std::atof(text.c_str() + p + series.size() + 2);
}

// Polls `done` every 100 ms until it holds or `seconds` have gone by; whether it held. The
// ceiling is generous on purpose: a loaded, sanitized machine may take long, and a condition
// that never comes fails the test at the ceiling.
bool WaitFor(const std::function<bool()>& done, double seconds = 120) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// How long the daemon may take to drain and exit on SIGTERM (a ceiling, not an expectation).
constexpr double kStopSeconds = 120;

class FleetDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vmlinux_id_ = testing::ElfBuildIdHex(fx_.vmlinux);
    module_id_ = testing::ElfBuildIdHex(fx_.module);
    ASSERT_EQ(vmlinux_id_.size(), 40u);
    served_ = dir_ / "served";
    RunCommand("mkdir -p '" + served_ + "' && cp '" + fx_.vmlinux + "' '" + fx_.module + "' '" + served_ + "/'");
  }
  CommandResult Cli(const std::string& args, const std::string& env = "") {
    return RunCommand("env -u SYMDEX_DB " + env + " " + std::string(SYMDEX_BIN) + " " + args);
  }
  // Failures are remembered for an hour: far longer than any test here takes, so a remembered
  // failure cannot expire between the calls that check it, however slowly they run. The fetch
  // timeout (seconds without progress) is 60 by default: a real debuginfod on a loaded machine
  // may pause, and only the silent server's test wants a fetch to time out.
  std::unique_ptr<DaemonProcess> StartReplica(const std::string& debuginfod_url,
                                              const std::string& fetch_timeout = "60") {
    metrics_port_ = testing::FreeTcpPort();
    ::setenv("DEBUGINFOD_CACHE_PATH", (dir_ / "replica-dcache").c_str(), 1);
    auto d = std::make_unique<DaemonProcess>(
        std::vector<std::string>{"--listen", "unix:" + sock(), "--db", dir_ / "own.db", "--no-index-live",
                                 "--modules-poll", "0", "--fleet-cache", dir_ / "fleet", "--debuginfod-urls",
                                 debuginfod_url, "--negative-cache-seconds", "3600", "--fetch-timeout", fetch_timeout,
                                 "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port_)},
        dir_ / "daemon.log", "unix:" + sock());
    ::unsetenv("DEBUGINFOD_CACHE_PATH");
    return d;
  }
  std::string sock() const { return dir_ / "s.sock"; }
  std::string Metrics() {
    return RunCommand("curl -s http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics").out;
  }

  ProbeFixture fx_;
  TempDir dir_;
  std::string vmlinux_id_, module_id_, served_;
  int metrics_port_ = 0;
};

TEST_F(FleetDaemonTest, AKernelByBuildIdFromDebuginfodAnswersAsALocalIndex) {
  DebuginfodServer server(served_);
  ASSERT_TRUE(server.ready()) << "debuginfod did not become ready";
  // The reference: the same kernel and module indexed locally, from the same debuginfod.
  const std::string ref = dir_ / "ref.db";
  const std::string env = "DEBUGINFOD_URLS=" + server.url() + " DEBUGINFOD_CACHE_PATH='" + (dir_ / "cli-dcache") + "'";
  CommandResult idx =
      Cli("--db '" + ref + "' index -q --build-id " + vmlinux_id_ + " --module-build-id probe_mod=" + module_id_, env);
  ASSERT_EQ(idx.exit_code, 0) << idx.err;

  auto d = StartReplica(server.url());
  ASSERT_TRUE(d->ready()) << d->Log();
  const uint64_t text = testing::NmValue(fx_.vmlinux, "_text"), slide = 0x1c00000, base = 0xffffffffc0a00000ull;
  std::string frames = "--kernel-text " + testing::HexAddress(text + slide) + " --module probe_mod=" + module_id_ +
                       "@" + testing::HexAddress(base) +
                       " 'quiet_fn+0x1/0x10' '? dup_fn+0x2/0x20' 'quiet_fn+0x3/0x10 [probe_mod]'";
  for (const char* sym : {"quiet_fn", "blocked_fn", "traced_entry", "boot_fn", "raw_fn"}) {
    frames += " " + testing::HexAddress(testing::NmValue(fx_.vmlinux, sym) + slide + 1);
  }
  frames += " " + testing::HexAddress(base + testing::NmValue(fx_.module, "blocked_fn") + 2);
  // Eight first requests at once: one index run between them.
  std::vector<std::thread> clients;
  std::vector<CommandResult> got(8);
  for (size_t i = 0; i < got.size(); ++i) {
    clients.emplace_back([&, i] {
      got[i] = Cli("--connect 'unix:" + sock() + "' --json frames --kernel-build-id " + vmlinux_id_ + " " + frames);
    });
  }
  for (auto& t : clients) t.join();
  CommandResult local = Cli("--local --db '" + ref + "' --json frames --kernel-build-id " + vmlinux_id_ + " " + frames);
  ASSERT_EQ(local.exit_code, 2) << local.out << local.err;  // the dup_fn line is ambiguous
  for (const CommandResult& r : got) {
    EXPECT_EQ(r.exit_code, local.exit_code) << r.err << d->Log();
    EXPECT_EQ(r.out, local.out);
    EXPECT_EQ(r.err, local.err);
  }
  json j = json::parse(local.out);
  size_t exact = 0, module_frames = 0;
  for (const auto& f : j["results"]) {
    exact += f["exact"].get<bool>();
    module_frames += f.value("module", "") == "probe_mod";
  }
  EXPECT_EQ(exact, 8u) << j.dump(1);  // all but the ambiguous line
  EXPECT_EQ(module_frames, 2u);
  const std::string m = Metrics();
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"ok\"}"), 1) << m;
  EXPECT_GE(Metric(m, "symdex_fleet_fetch_bytes_total"), 1000) << m;
  // The other verbs by build-ID, the same bytes as from the local index.
  for (const std::string& verb :
       std::vector<std::string>{"--json which dup_fn", "resolve probe_mod:quiet_fn", "kprobe -n vmlinux:traced_entry",
                                "--json addr " + testing::HexAddress(testing::NmValue(fx_.vmlinux, "quiet_fn") + 1)}) {
    const std::string args = verb.substr(0, verb.find(' ', verb.starts_with("--json") ? 7 : 0));
    const std::string rest = verb.substr(args.size());
    CommandResult a = Cli("--connect 'unix:" + sock() + "' " + args + " --build-id " + vmlinux_id_ + rest);
    CommandResult b = Cli("--local --db '" + ref + "' " + args + " --build-id " + vmlinux_id_ + rest);
    EXPECT_EQ(a.exit_code, b.exit_code) << verb << "\n" << a.err << b.err;
    EXPECT_EQ(a.out, b.out) << verb;
    EXPECT_EQ(a.exit_code, 0) << verb << a.err;
  }
  // Still one index run: the kernel and its module are cached.
  EXPECT_EQ(Metric(Metrics(), "symdex_fleet_index_runs_total{result=\"ok\"}"), 1);
  CommandResult st = Cli("--connect 'unix:" + sock() + "' --json status");
  ASSERT_EQ(st.exit_code, 0) << st.err;
  json js = json::parse(st.out);
  ASSERT_EQ(js["fleet"]["kernels"].size(), 1u) << st.out;
  EXPECT_EQ(js["fleet"]["kernels"][0]["build_id"], vmlinux_id_);
  EXPECT_EQ(js["fleet"]["kernels"][0]["state"], "indexed");
  EXPECT_EQ(js["fleet"]["kernels"][0]["modules"], 1);

  // Restarted, the replica keeps its cache: no new run, the same answers.
  EXPECT_EQ(d->Stop(SIGTERM, kStopSeconds), 0) << d->Log();
  d = StartReplica(server.url());
  ASSERT_TRUE(d->ready()) << d->Log();
  CommandResult again =
      Cli("--connect 'unix:" + sock() + "' --json frames --kernel-build-id " + vmlinux_id_ + " " + frames);
  EXPECT_EQ(again.out, local.out);
  EXPECT_EQ(Metric(Metrics(), "symdex_fleet_index_runs_total{result=\"ok\"}"), 0);
  // A batch large enough to go as several concurrent calls (2,048 frames per call, at most 4):
  // the parts' answers come back in the request's order, the same bytes as the local index.
  std::vector<uint64_t> at;
  for (const char* sym : {"quiet_fn", "blocked_fn", "traced_entry", "boot_fn", "raw_fn"}) {
    at.push_back(testing::NmValue(fx_.vmlinux, sym) + slide + 1);
  }
  const uint64_t in_module = base + testing::NmValue(fx_.module, "blocked_fn") + 2;
  std::string lines;
  for (int rep = 0; rep < 900; ++rep) {
    lines += "quiet_fn+0x1/0x10\n? dup_fn+0x2/0x20\nquiet_fn+0x3/0x10 [probe_mod]\n";
    for (uint64_t a : at) lines += testing::HexAddress(a + rep % 4) + "\n";
    lines += testing::HexAddress(in_module) + "\n";
  }
  const std::string batch = dir_ / "batch.txt";
  testing::WriteFile(batch, lines);
  const std::string ctx = "--kernel-text " + testing::HexAddress(text + slide) + " --module probe_mod=" + module_id_ +
                          "@" + testing::HexAddress(base);
  CommandResult big_remote = Cli("--connect 'unix:" + sock() + "' --json frames --kernel-build-id " + vmlinux_id_ +
                                 " " + ctx + " - < '" + batch + "'");
  CommandResult big_local = Cli("--local --db '" + ref + "' --json frames --kernel-build-id " + vmlinux_id_ + " " +
                                ctx + " - < '" + batch + "'");
  EXPECT_EQ(big_local.exit_code, 2) << big_local.err;
  EXPECT_EQ(json::parse(big_local.out)["results"].size(), 8100u);
  EXPECT_EQ(big_remote.exit_code, big_local.exit_code) << big_remote.err;
  EXPECT_TRUE(big_remote.out == big_local.out) << "the large batch differs through the daemon";
  EXPECT_EQ(d->Stop(SIGTERM, kStopSeconds), 0) << d->Log();
}

TEST_F(FleetDaemonTest, UnknownHostileAndUnreachableAreRefusedAndRemembered) {
  auto server = std::make_unique<DebuginfodServer>(served_);
  ASSERT_TRUE(server->ready());
  const std::string url = server->url();
  auto d = StartReplica(url);
  ASSERT_TRUE(d->ready()) << d->Log();
  const std::string c = "--connect 'unix:" + sock() + "' ";
  // Hostile build-IDs: refused before anything is fetched.
  for (const char* bad : {"xyz", "abc",
                          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
                          "cdef0123456789abcdef0123456789abcdef00"}) {
    CommandResult r = Cli(c + "frames --kernel-build-id '" + std::string(bad) + "' 0x1");
    EXPECT_EQ(r.exit_code, 2) << bad << r.err;
    EXPECT_TRUE(r.err.find("not a build-ID") != std::string::npos || r.err.find("the limit is") != std::string::npos)
        << r.err;
    CommandResult w = Cli(c + "which --build-id '" + std::string(bad) + "' quiet_fn");
    EXPECT_EQ(w.exit_code, 2) << bad << w.err;
  }
  // Unknown: NotFound with what was tried; the second ask is answered from the negative cache.
  const std::string unknown = "00112233445566778899aabbccddeeff00112233";
  CommandResult u1 = Cli(c + "frames --kernel-build-id " + unknown + " 0x1");
  EXPECT_EQ(u1.exit_code, 3) << u1.err;
  EXPECT_NE(u1.err.find("no vmlinux with build-ID " + unknown), std::string::npos) << u1.err;
  CommandResult u2 = Cli(c + "which --build-id " + unknown + " quiet_fn");
  EXPECT_EQ(u2.exit_code, 3) << u2.err;
  EXPECT_NE(u2.err.find("remembered"), std::string::npos) << u2.err;
  std::string m = Metrics();
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"error\"}"), 1) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"negative\"}"), 1) << m;
  // debuginfod stopped: UNAVAILABLE (not a hang: were the call to hang, the CLI's own deadline
  // would end it with DEADLINE_EXCEEDED, which fails the checks below), and remembered too (no
  // retry storm).
  server.reset();
  CommandResult down = Cli(c + "--timeout 120 --json frames --kernel-build-id " + vmlinux_id_ + " 0x1");
  EXPECT_EQ(down.exit_code, 3) << down.out;
  json jd = json::parse(down.out);
  EXPECT_EQ(jd["error"]["code"], "UNAVAILABLE") << down.out;
  EXPECT_NE(jd["error"]["message"].get<std::string>().find("Connection refused"), std::string::npos) << down.out;
  for (int i = 0; i < 5; ++i) Cli(c + "frames --kernel-build-id " + vmlinux_id_ + " 0x1");
  m = Metrics();
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"error\"}"), 2) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"negative\"}"), 6) << m;
  // Nothing was left in the cache by the failures, and the daemon still serves.
  CommandResult st = Cli(c + "--json status");
  ASSERT_EQ(st.exit_code, 0) << st.err;
  json js = json::parse(st.out);
  ASSERT_EQ(js["fleet"]["kernels"].size(), 2u) << st.out;
  for (const auto& k : js["fleet"]["kernels"]) {
    EXPECT_EQ(k["state"], "failed") << k;
    EXPECT_NE(k["error"].get<std::string>().find("remembered for"), std::string::npos) << k;
  }
  EXPECT_EQ(RunCommand("ls '" + (dir_ / "fleet") + "' | grep -c '\\.db$'").out, "0\n");
  EXPECT_EQ(d->Stop(SIGTERM, kStopSeconds), 0) << d->Log();
}

// A debuginfod that accepts connections and never answers (a server wedged, a network
// black-holing the transfer): the fetch must time out, not hang the request.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      while (!stop_) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c >= 0) {
          held_.push_back(c);  // read nothing, answer nothing
          ++accepted_;
        }
      }
    });
  }
  ~SilentServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (int c : held_) ::close(c);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_; }  // connections accepted so far

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> held_;
  std::thread thread_;
};

TEST_F(FleetDaemonTest, ASilentDebuginfodIsDeadlineExceededNotAHang) {
  SilentServer silent;
  auto d = StartReplica(silent.url(), "1");
  ASSERT_TRUE(d->ready()) << d->Log();
  const std::string c = "--connect 'unix:" + sock() + "' --json ";
  // The CLI's own deadline (300 s) is far beyond the replica's 1 s fetch timeout: the
  // DEADLINE_EXCEEDED expected is the daemon's word on the fetch ("kernel <build-ID>: ..."),
  // and a fetch that hung would instead end at the CLI's deadline with the CLI's message.
  CommandResult r = Cli(c + "--timeout 300 frames --kernel-build-id " + vmlinux_id_ + " 0x1");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["error"]["code"], "DEADLINE_EXCEEDED") << r.out;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("kernel " + vmlinux_id_ + ": "), std::string::npos)
      << "not the daemon's fetch timeout: " << r.out;
  EXPECT_TRUE(WaitFor([&] { return silent.accepted() >= 1; })) << "the fetch never reached the silent server";
  // Remembered: the next ask is answered from the negative cache, with no second run (which
  // would have to ask the silent server again).
  CommandResult r2 = Cli(c + "--timeout 300 frames --kernel-build-id " + vmlinux_id_ + " 0x1");
  EXPECT_EQ(r2.exit_code, 3) << r2.out << r2.err;
  EXPECT_NE(r2.out.find("remembered"), std::string::npos) << r2.out;
  const std::string m = Metrics();
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"error\"}"), 1) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"negative\"}"), 1) << m;
  EXPECT_EQ(d->Stop(SIGTERM, kStopSeconds), 0) << d->Log();
}

// A debuginfod that is merely slow (every answer held by a proxy until the test opens its gate:
// a loaded server, a long path): the fetch is waited for, not given up and not remembered as a
// failure. A caller whose own deadline is shorter gets DEADLINE_EXCEEDED while the run goes on;
// the daemon answers other calls meanwhile; the callers that waited get the answer from the one
// run, and the next caller gets it from the cache without the slow server.
TEST_F(FleetDaemonTest, ASlowDebuginfodIsWaitedForAndNotRememberedAsAFailure) {
  DebuginfodServer server(served_);
  ASSERT_TRUE(server.ready());
  testing::SlowProxy slow(std::string(SYMDEX_SOURCE_DIR) + "/tests/fleet/slow_proxy.py", server.url(), 0,
                          /*gated=*/true);
  ASSERT_TRUE(slow.ready());
  // A fetch timeout (seconds without progress) far beyond how long the gate stays shut here,
  // however slowly the steps before it run: the replica must outwait the slow server.
  auto d = StartReplica(slow.url(), "600");
  ASSERT_TRUE(d->ready()) << d->Log();
  const std::string c = "--connect 'unix:" + sock() + "' --json ";
  const std::string ask = "frames --kernel-build-id " + vmlinux_id_ + " --kaslr-offset 0x0 " +
                          testing::HexAddress(testing::NmValue(fx_.vmlinux, "quiet_fn") + 1);
  auto kernel_state = [&] {
    CommandResult st = Cli(c + "--timeout 60 status");
    if (st.exit_code != 0) return "status failed: " + st.out + st.err;
    json js = json::parse(st.out, nullptr, false);
    if (js.is_discarded() || js["fleet"]["kernels"].size() != 1) return "kernels: " + st.out;
    return js["fleet"]["kernels"][0]["state"].get<std::string>();
  };
  // The hurried caller: its 5 s deadline passes while the gate holds the fetch (nothing can
  // answer it sooner), so DEADLINE_EXCEEDED is the only right answer, whatever the load.
  CommandResult hurried = Cli(c + "--timeout 5 " + ask);
  EXPECT_EQ(hurried.exit_code, 3) << hurried.out << hurried.err;
  EXPECT_NE(hurried.out.find("DEADLINE_EXCEEDED"), std::string::npos) << hurried.out;
  // The run it started goes on: the fetch is at the proxy, held, and the kernel is "indexing".
  ASSERT_TRUE(WaitFor([&] { return slow.requests() >= 1; })) << "the fetch never reached the slow proxy" << d->Log();
  // Polled until the kernel shows a state ("failed" and "indexed" would not change any more).
  std::string state;
  WaitFor([&] {
    state = kernel_state();
    return state == "indexing" || state == "failed" || state == "indexed";
  });
  ASSERT_EQ(state, "indexing") << "the run did not go on after the hurried caller gave up";
  EXPECT_EQ(slow.released(), 0) << "an answer passed the shut gate: the test proves nothing";
  // Patient callers, more than the daemon's 2 heavy-call threads, wait for the same run.
  std::vector<CommandResult> patient(3);
  std::vector<std::thread> waiting;
  // On every way out (an ASSERT too), the held answers go and the callers are joined.
  struct Release {
    testing::SlowProxy& proxy;
    std::vector<std::thread>& threads;
    ~Release() {
      proxy.OpenGate();
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } release{slow, waiting};
  for (auto& p : patient) waiting.emplace_back([&] { p = Cli(c + ask); });
  std::string m;
  ASSERT_TRUE(WaitFor([&] { return Metric(m = Metrics(), "symdex_fleet_waiting") == 3; }))
      << "the 3 callers are not waiting for the run: " << m;
  // They wait without holding the heavy-call threads: status (a heavy call too) is answered
  // while the gate is still shut. Were the daemon stuck behind the fetch, status would end at
  // its own 60 s deadline instead, the gate being opened only after it.
  CommandResult st = Cli(c + "--timeout 60 status");
  ASSERT_EQ(st.exit_code, 0) << st.out << st.err;
  json js = json::parse(st.out);
  ASSERT_EQ(js["fleet"]["kernels"].size(), 1u) << st.out;
  EXPECT_EQ(js["fleet"]["kernels"][0]["state"], "indexing") << st.out;
  EXPECT_EQ(slow.released(), 0) << "an answer passed the shut gate: the test proves nothing";
  // The slow transfer ends: they all get the answer from the one run.
  slow.OpenGate();
  for (auto& t : waiting) t.join();
  EXPECT_GE(slow.released(), 1);
  for (const CommandResult& p : patient) {
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err << d->Log();
    EXPECT_NE(p.out.find("\"symbol\": \"quiet_fn\""), std::string::npos) << p.out;
  }
  m = Metrics();
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"ok\"}"), 1) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"error\"}"), 0) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"negative\"}"), 0) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"miss\"}"), 1) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"waited\"}"), 3) << m;
  // Once in the cache, the slow server is no longer in the path: a hit, nothing asked of it.
  const int asked = slow.requests();
  const double hits = Metric(m, "symdex_fleet_requests_total{result=\"hit\"}");
  CommandResult hit = Cli(c + ask);
  EXPECT_EQ(hit.exit_code, 0) << hit.out << hit.err;
  EXPECT_NE(hit.out.find("\"symbol\": \"quiet_fn\""), std::string::npos) << hit.out;
  EXPECT_EQ(slow.requests(), asked) << "the cached kernel was fetched again";
  m = Metrics();
  EXPECT_EQ(Metric(m, "symdex_fleet_requests_total{result=\"hit\"}"), hits + 1) << m;
  EXPECT_EQ(Metric(m, "symdex_fleet_index_runs_total{result=\"ok\"}"), 1) << m;
  EXPECT_EQ(d->Stop(SIGTERM, kStopSeconds), 0) << d->Log();
}

}  // namespace
}  // namespace symdex
