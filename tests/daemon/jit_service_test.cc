// symdex.v1.JitService (and SymbolService.LookupBuildId for jitted DSOs) through a real symdexd
// process and the generated gRPC client: the --jit-watch directory watcher (new and growing dumps),
// the Ingest RPC on good, truncated and corrupt dumps, Collisions, Addr's errors and limits, and a
// real `node --perf-prof` dump written straight into the watched directory.
//
// The truth every answer is checked against is independent of the daemon: the values written into
// the hand-built dumps (tests/jit/jitdump_writer.h), build-IDs recomputed here with coreutils
// (md5sum / sha1sum / sha256sum) from the layouts docs/jit.md gives, a jitdump record walker in
// this file, and `symdex --db <the daemon's index> ... --json` (the CLI) on the same index.
//
// Needs SYMDEX_BIN and SYMDEXD_BIN (paths of the built binaries) as compile definitions. The Node
// test is skipped when `node` is not installed.
// Over ~500 lines: one daemon fixture with its dump builders shared by every JIT scenario.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/query/caller_view.h"
#include "server/query/local_query.h"
#include "server/store/sqlite_db.h"
#include "symdex/v1/symdex.grpc.pb.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/jit/jitdump_writer.h"
#include "tests/jit/node_script.h"
#include "tests/unit/test_util.h"

#ifndef SYMDEX_BIN
#error "SYMDEX_BIN (path of the symdex binary) must be defined"
#endif
#ifndef SYMDEXD_BIN
#error "SYMDEXD_BIN (path of the symdexd binary) must be defined"
#endif

namespace symdex::jit_service_test {
namespace {

namespace fs = std::filesystem;
namespace pb = ::symdex::v1;
using nlohmann::json;
using symdex::jit::testing::JitdumpWriter;
using symdex::testing::CommandResult;
using symdex::testing::RunCommand;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;
using Clock = std::chrono::steady_clock;

using symdex::testing::Slurp;

std::string Le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i) & 0xff));
  return s;
}

// A file appears in a watched directory in one step: written under a name the watcher ignores,
// then renamed (what a dump copied in with `mv` looks like).
void PlaceFile(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string tmp = dir + "/." + name + ".tmp";
  WriteFile(tmp, bytes);
  fs::rename(tmp, dir + "/" + name);
}

void AppendFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f << bytes;
  f.flush();
  if (!f) throw std::runtime_error("cannot append to " + path);
}

// ---------------------------------------------------------------------------------------------
// Build-IDs recomputed outside symdex (docs/jit.md, "The problem" and "symdex's scheme").

std::string Digest(const std::string& tool, const std::string& data) {
  TempDir d;
  WriteFile(d / "in", data);
  CommandResult r = RunCommand(tool + " '" + (d / "in") + "'");
  if (r.exit_code != 0) return "<" + tool + " failed: " + r.err + ">";
  return r.out.substr(0, r.out.find(' '));
}

std::map<std::string, std::string> ExpectedBuildIds(uint32_t pid, uint64_t dump_ts, uint64_t code_index,
                                                    uint64_t code_addr, const std::string& name,
                                                    const std::string& code) {
  std::map<std::string, std::string> ids;
  ids["md5-addr"] = Digest("md5sum", Le(code_addr, 8) + code) + "00000000";
  ids["sha1-code"] = Digest("sha1sum", code);
  // genelf.c's symtab[2] (Elf64_Sym, little endian) and strtab, appended to the code.
  std::string symtab(24, '\0');
  symtab += Le(1, 4);            // st_name
  symtab += '\x02';              // st_info: STB_LOCAL, STT_FUNC
  symtab += '\0';                // st_other
  symtab += Le(1, 2);            // st_shndx
  symtab += Le(0x80, 8);         // st_value = GEN_ELF_TEXT_OFFSET
  symtab += Le(code.size(), 8);  // st_size
  std::string strtab = std::string(1, '\0') + name + std::string(1, '\0');
  ids["sha1-symtab"] = Digest("sha1sum", code + symtab + strtab);
  std::string in = "symdex-jit-build-id/v1";
  in += Le(pid, 4) + Le(dump_ts, 8) + Le(0, 8) /* no instance string */ + Le(code_index, 8) + Le(code_addr, 8);
  in += Le(name.size(), 8) + name + Le(code.size(), 8) + code;
  ids["symdex"] = Digest("sha256sum", in).substr(0, 40);
  return ids;
}

std::map<std::string, std::string> BuildIdsOf(const pb::JitLoad& l) {
  return std::map<std::string, std::string>(l.build_ids().begin(), l.build_ids().end());
}

uint64_t HexValue(const json& j) { return std::stoull(j.get<std::string>(), nullptr, 16); }

// ---------------------------------------------------------------------------------------------
// symdexd as a child process.

// Starts `symdexd` on a unix socket in `dir` with its index in `dir` (live indexing off), watching
// `watch`; the destructor sends SIGTERM and expects exit status 0 and the socket removed.
class Symdexd {
 public:
  Symdexd(const std::string& dir, const std::vector<std::string>& watch)
      : socket_(dir + "/s.sock"), db_(dir + "/index.db"), log_(dir + "/symdexd.log") {
    std::vector<std::string> args = {
        "--listen", "unix:" + socket_,  "--db",        db_,           "--no-index-live", "--modules-poll",
        "0",        "--metrics-listen", "127.0.0.1:0", "--log-level", "debug",           "--jit-poll",
        "0.2"};
    for (const auto& w : watch) {
      args.push_back("--jit-watch");
      args.push_back(w);
    }
    process_ = std::make_unique<testing::DaemonProcess>(args, log_, "unix:" + socket_);
    if (!process_->ready()) {
      error_ = process_->exit_status()
                   ? "symdexd exited while starting (status " + std::to_string(*process_->exit_status()) + ")"
                   : "symdexd did not accept connections on " + socket_ + " within 120 s";
      return;
    }
    channel_ = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
    if (!channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(120))) {
      error_ = "gRPC channel to " + socket_ + " did not connect within 120 s";
    }
  }
  Symdexd(const Symdexd&) = delete;
  Symdexd& operator=(const Symdexd&) = delete;
  ~Symdexd() { Stop(); }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& db() const { return db_; }
  const std::string& socket() const { return socket_; }
  std::string log() const { return Slurp(log_); }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  bool Alive() { return process_ && process_->running(); }

  void Stop() {
    channel_.reset();
    if (!process_) return;
    if (!process_->running()) {
      if (process_->exit_status())
        ADD_FAILURE() << "symdexd died: status " << *process_->exit_status() << "\n" << log();
      process_.reset();
      return;
    }
    int rc = process_->Stop(SIGTERM, 20);
    if (rc == -1) {
      ADD_FAILURE() << "symdexd did not exit within 20 s of SIGTERM\n" << log();
    } else {
      EXPECT_EQ(rc, 0) << "symdexd after SIGTERM: exit status " << rc << "\n" << log();
      EXPECT_FALSE(fs::exists(socket_)) << "symdexd left its socket " << socket_ << " behind";
    }
    process_.reset();
  }

 private:
  std::string socket_, db_, log_;
  std::string error_;
  std::unique_ptr<testing::DaemonProcess> process_;
  std::shared_ptr<grpc::Channel> channel_;
};

// ---------------------------------------------------------------------------------------------

constexpr auto kRpcDeadline = std::chrono::seconds(60);

class JitServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    watch_ = dir_ / "watch";
    fs::create_directories(watch_);
    daemon_ = std::make_unique<Symdexd>(dir_.path(), std::vector<std::string>{watch_});
    ASSERT_TRUE(daemon_->ok()) << daemon_->error() << "\n" << daemon_->log();
    jit_ = pb::JitService::NewStub(daemon_->channel());
    symbols_ = pb::SymbolService::NewStub(daemon_->channel());
  }
  void TearDown() override {
    jit_.reset();
    symbols_.reset();
    daemon_.reset();  // SIGTERM; expects exit 0
  }

  static void Deadline(grpc::ClientContext& ctx) { ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline); }

  grpc::Status Addr(uint32_t pid, const std::vector<uint64_t>& addrs, pb::JitAddrResponse* out,
                    std::optional<uint64_t> time = std::nullopt) {
    pb::JitAddrRequest req;
    req.set_pid(pid);
    if (time) req.set_time(*time);
    for (uint64_t a : addrs) req.add_addresses(a);
    grpc::ClientContext ctx;
    Deadline(ctx);
    out->Clear();
    return jit_->Addr(&ctx, req, out);
  }
  grpc::Status Ingest(const std::vector<std::string>& paths, pb::JitIngestResponse* out) {
    pb::JitIngestRequest req;
    for (const auto& p : paths) req.add_paths(p);
    grpc::ClientContext ctx;
    Deadline(ctx);
    out->Clear();
    return jit_->Ingest(&ctx, req, out);
  }
  grpc::Status Collisions(const std::string& scheme, pb::JitCollisionsResponse* out) {
    pb::JitCollisionsRequest req;
    req.set_scheme(scheme);
    grpc::ClientContext ctx;
    Deadline(ctx);
    out->Clear();
    return jit_->Collisions(&ctx, req, out);
  }
  grpc::Status LookupBuildId(const std::string& hex, pb::LookupBuildIdResponse* out) {
    pb::LookupBuildIdRequest req;
    req.set_build_id(hex);
    grpc::ClientContext ctx;
    Deadline(ctx);
    out->Clear();
    return symbols_->LookupBuildId(&ctx, req, out);
  }

  // Polls Addr(pid, addr) until a load covers addr (and `accept` takes it), for up to `seconds`.
  // Returns that load, or nullopt with the last answer in `why`.
  std::optional<pb::JitLoad> WaitForLoad(uint32_t pid, uint64_t addr, double seconds, std::string* why,
                                         const std::function<bool(const pb::JitLoad&)>& accept = nullptr) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    while (true) {
      pb::JitAddrResponse resp;
      grpc::Status s = Addr(pid, {addr}, &resp);
      if (s.ok() && resp.results_size() == 1 && resp.results(0).has_load() &&
          (!accept || accept(resp.results(0).load()))) {
        return resp.results(0).load();
      }
      *why = s.ok() ? resp.ShortDebugString() : "status " + std::to_string(s.error_code()) + ": " + s.error_message();
      if (!daemon_->Alive()) {
        *why += " (symdexd is gone)";
        return std::nullopt;
      }
      if (Clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // `symdex --db <the daemon's index> ARGS --json`, expecting exit code `want_exit`.
  json Cli(const std::string& args, int want_exit = 0) {
    CommandResult r = RunCommand(std::string(SYMDEX_BIN) + " --db '" + daemon_->db() + "' " + args + " --json");
    EXPECT_EQ(r.exit_code, want_exit) << "symdex " << args << "\n" << r.out << r.err;
    try {
      return json::parse(r.out.empty() ? "{}" : r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "symdex " << args << ": not JSON: " << e.what() << "\n" << r.out;
      return json::object();
    }
  }

  // `symdex ARGS` embedded and through the daemon: the same bytes on stdout and stderr, the same
  // exit code. Returns the embedded run.
  CommandResult ExpectSameThroughDaemon(const std::string& args) {
    CommandResult local = RunCommand(std::string(SYMDEX_BIN) + " --local --db '" + daemon_->db() + "' " + args);
    CommandResult remote = RunCommand(std::string(SYMDEX_BIN) + " --connect 'unix:" + daemon_->socket() + "' " + args);
    EXPECT_EQ(local.exit_code, remote.exit_code) << args << "\n" << local.err << "\n---\n" << remote.err;
    EXPECT_EQ(local.out, remote.out) << args;
    EXPECT_EQ(local.err, remote.err) << args;
    return local;
  }

  // One gRPC JitLoad against the CLI's `function` object for the same address.
  static void ExpectSameAsCli(const pb::JitLoad& l, const json& f, const std::string& where) {
    SCOPED_TRACE(where);
    ASSERT_TRUE(f.is_object()) << f.dump();
    EXPECT_EQ(l.name(), f["name"].get<std::string>());
    EXPECT_EQ(l.pid(), f["pid"].get<uint32_t>());
    EXPECT_EQ(l.code_index(), f["code_index"].get<uint64_t>());
    EXPECT_EQ(l.dso(), f["dso"].get<std::string>());
    EXPECT_EQ(l.address(), HexValue(f["code_start"]));
    EXPECT_EQ(l.address() + l.code_size(), HexValue(f["code_end"]));
    EXPECT_EQ(l.code_size(), f["code_size"].get<uint64_t>());
    EXPECT_EQ(l.code_address(), HexValue(f["loaded_at"]));
    using IdMap = std::map<std::string, std::string>;
    EXPECT_EQ(BuildIdsOf(l), f["build_ids"].get<IdMap>());
    EXPECT_EQ(l.dump_timestamp(), f["instance"]["dump_timestamp"].get<uint64_t>());
    EXPECT_EQ(l.dump_path(), f["instance"]["path"].get<std::string>());
    if (f["source"].is_null()) {
      EXPECT_EQ(l.source_file(), "");
      EXPECT_EQ(l.source_line(), 0u);
    } else {
      EXPECT_EQ(l.source_file(), f["source"]["file"].get<std::string>());
      EXPECT_EQ(l.source_line(), f["source"]["line"].get<uint32_t>());
      EXPECT_EQ(l.source_column(), f["source"]["column"].get<uint32_t>());
    }
  }

  // Addr through the daemon and `jit addr` through the CLI for the same addresses: every answer
  // must agree (found or not, and every field when found).
  void ExpectAddrMatchesCli(uint32_t pid, const std::vector<uint64_t>& addrs) {
    pb::JitAddrResponse resp;
    grpc::Status s = Addr(pid, addrs, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.results_size(), static_cast<int>(addrs.size()));
    std::string args = "jit addr --pid " + std::to_string(pid);
    bool all_found = true;
    for (size_t i = 0; i < addrs.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " 0x%llx", static_cast<unsigned long long>(addrs[i]));
      args += buf;
      all_found = all_found && resp.results(static_cast<int>(i)).has_load();
    }
    json cli = Cli(args, all_found ? 0 : 1);
    ASSERT_EQ(cli["addresses"].size(), addrs.size()) << cli.dump();
    for (size_t i = 0; i < addrs.size(); ++i) {
      const pb::JitAddrResult& r = resp.results(static_cast<int>(i));
      const json& c = cli["addresses"][i];
      EXPECT_EQ(r.address(), addrs[i]);
      EXPECT_EQ(r.address(), HexValue(c["address"]));
      const bool cli_jitdump = c["found"].get<bool>() && c["from"] == "jitdump";
      ASSERT_EQ(r.has_load(), cli_jitdump) << "address 0x" << std::hex << addrs[i] << ": " << c.dump();
      if (r.has_load()) ExpectSameAsCli(r.load(), c["function"], "CLI comparison at " + std::to_string(addrs[i]));
    }
  }

  TempDir dir_;
  std::string watch_;
  std::unique_ptr<Symdexd> daemon_;
  std::unique_ptr<pb::JitService::Stub> jit_;
  std::unique_ptr<pb::SymbolService::Stub> symbols_;
};

// Code bytes with distinct contents.
std::string Code(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + static_cast<size_t>(seed) * 31 + 1) & 0xff);
  s.back() = '\xc3';
  return s;
}

// ---------------------------------------------------------------------------------------------
// 1. The watcher: a dump dropped into the watched directory, then growing.

TEST_F(JitServiceTest, WatchedDumpIsIngestedAndFollowedAsItGrows) {
  constexpr uint32_t kPid = 5151;
  constexpr uint64_t kDumpTs = 1000;
  const std::string alpha_name = "JS:alpha /src/app.js:10";
  const std::string alpha = Code(64, 1), beta = Code(48, 2), gamma = Code(32, 3);

  JitdumpWriter w;
  w.Header({.pid = kPid, .timestamp = kDumpTs});
  w.DebugInfo(99, 0x10000, {{0x10000, 10, 3, "/src/app.js"}, {0x10020, 42, 7, "\xff"}});
  w.CodeLoad(100, kPid, 1, 0x10000, 1, alpha_name, alpha);
  w.CodeLoad(200, kPid, 1, 0x20000, 2, "JS:beta", beta);

  // Nothing yet: the pid is unknown.
  pb::JitAddrResponse resp;
  EXPECT_EQ(Addr(kPid, {0x10024}, &resp).error_code(), grpc::StatusCode::NOT_FOUND);

  const std::string dump = watch_ + "/jit-5151.dump";
  PlaceFile(watch_, "jit-5151.dump", w.bytes());
  std::string why;
  auto first = WaitForLoad(kPid, 0x10024, 120, &why);
  ASSERT_TRUE(first) << "the watcher did not ingest " << dump << " within 120 s; last answer: " << why << "\n"
                     << daemon_->log();

  ASSERT_TRUE(Addr(kPid, {0x10024, 0x10005, 0x1003f, 0x10040, 0xffff, 0x20010}, &resp).ok());
  ASSERT_EQ(resp.results_size(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(resp.results(i).perf_map_symbol(), "") << i;

  const pb::JitLoad& a = resp.results(0).load();
  EXPECT_EQ(a.name(), alpha_name);
  EXPECT_EQ(a.pid(), kPid);
  EXPECT_EQ(a.code_index(), 1u);
  EXPECT_EQ(a.code_address(), 0x10000u);
  EXPECT_EQ(a.address(), 0x10000u);
  EXPECT_EQ(a.code_size(), alpha.size());
  EXPECT_EQ(a.dso(), "jitted-5151-1.so");
  EXPECT_EQ(a.dump_timestamp(), kDumpTs);
  EXPECT_EQ(a.dump_path(), dump);
  // Nearest DEBUG_INFO entry at or before 0x10024: 0x10020, line 42 column 7, "\xff" = same file.
  EXPECT_EQ(a.source_file(), "/src/app.js");
  EXPECT_EQ(a.source_line(), 42u);
  EXPECT_EQ(a.source_column(), 7u);
  EXPECT_EQ(BuildIdsOf(a), ExpectedBuildIds(kPid, kDumpTs, 1, 0x10000, alpha_name, alpha));

  ASSERT_TRUE(resp.results(1).has_load());
  EXPECT_EQ(resp.results(1).load().name(), alpha_name);
  EXPECT_EQ(resp.results(1).load().source_line(), 10u);
  EXPECT_EQ(resp.results(1).load().source_column(), 3u);
  ASSERT_TRUE(resp.results(2).has_load()) << "last byte of alpha";
  EXPECT_EQ(resp.results(2).load().name(), alpha_name);
  EXPECT_FALSE(resp.results(3).has_load()) << "0x10040 is one past alpha's end: " << resp.results(3).ShortDebugString();
  EXPECT_FALSE(resp.results(4).has_load()) << "below alpha: " << resp.results(4).ShortDebugString();

  ASSERT_TRUE(resp.results(5).has_load());
  const pb::JitLoad& b = resp.results(5).load();
  EXPECT_EQ(b.name(), "JS:beta");
  EXPECT_EQ(b.code_index(), 2u);
  EXPECT_EQ(b.address(), 0x20000u);
  EXPECT_EQ(b.code_size(), beta.size());
  EXPECT_EQ(b.dso(), "jitted-5151-2.so");
  EXPECT_EQ(b.source_file(), "") << "beta has no DEBUG_INFO";
  EXPECT_EQ(b.source_line(), 0u);
  EXPECT_EQ(BuildIdsOf(b), ExpectedBuildIds(kPid, kDumpTs, 2, 0x20000, "JS:beta", beta));

  ExpectAddrMatchesCli(kPid, {0x10024, 0x10005, 0x10040, 0x20010});

  // The dump grows: first half a record (a writer caught mid-write), then the rest.
  JitdumpWriter more;
  more.DebugInfo(299, 0x30000, {{0x30000, 7, 1, "/src/more.js"}, {0x30010, 8, 2, "/src/more.js"}});
  more.CodeLoad(300, kPid, 1, 0x30000, 3, "JS:gamma", gamma);
  const size_t cut = more.record_offsets()[1] + 20;
  // Each ingest of the dump is logged (at debug level, also when nothing new is complete).
  auto ingests = [&] {
    const std::string log = daemon_->log(), line = "jit ingest " + dump + ": ";
    size_t n = 0;
    for (size_t at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) ++n;
    return n;
  };
  const size_t before = ingests();
  AppendFile(dump, more.bytes().substr(0, cut));
  ASSERT_TRUE(symdex::testing::WaitUntil([&] { return ingests() > before; })) << "the partial record was never read\n"
                                                                              << daemon_->log();
  ASSERT_TRUE(Addr(kPid, {0x30008, 0x10024}, &resp).ok());
  EXPECT_FALSE(resp.results(0).has_load()) << "an incomplete CODE_LOAD answered: " << resp.ShortDebugString();
  ASSERT_TRUE(resp.results(1).has_load());
  EXPECT_EQ(resp.results(1).load().name(), alpha_name);

  AppendFile(dump, more.bytes().substr(cut));
  auto g = WaitForLoad(kPid, 0x30018, 120, &why);
  ASSERT_TRUE(g) << "the appended CODE_LOAD was not picked up within 120 s; last answer: " << why << "\n"
                 << daemon_->log();
  EXPECT_EQ(g->name(), "JS:gamma");
  EXPECT_EQ(g->code_index(), 3u);
  EXPECT_EQ(g->address(), 0x30000u);
  EXPECT_EQ(g->code_size(), gamma.size());
  EXPECT_EQ(g->dso(), "jitted-5151-3.so");
  EXPECT_EQ(g->source_file(), "/src/more.js");
  EXPECT_EQ(g->source_line(), 8u);
  EXPECT_EQ(g->source_column(), 2u);
  EXPECT_EQ(g->dump_timestamp(), kDumpTs) << "same process instance";
  EXPECT_EQ(BuildIdsOf(*g), ExpectedBuildIds(kPid, kDumpTs, 3, 0x30000, "JS:gamma", gamma));

  ExpectAddrMatchesCli(kPid, {0x10024, 0x20010, 0x30004, 0x30018, 0x30020});

  // Re-reading the grown file added nothing twice: every load still has its own symdex ID.
  pb::JitCollisionsResponse col;
  ASSERT_TRUE(Collisions("symdex", &col).ok());
  EXPECT_EQ(col.collisions_size(), 0) << col.ShortDebugString();
  json inst = Cli("jit addr --pid 5151 0x10000");
  EXPECT_EQ(inst["instance"]["loads"], 3) << inst.dump();
}

// ---------------------------------------------------------------------------------------------
// 2. Ingest on explicit paths: good, truncated, corrupt and not-a-dump files.

TEST_F(JitServiceTest, IngestRpcReportsTruncatedAndCorruptDumpsAndKeepsServing) {
  const std::string given = dir_ / "given";
  const std::string code1 = Code(16, 11), code2 = Code(24, 12);

  JitdumpWriter good;
  good.Header({.pid = 6001, .timestamp = 2000});
  good.CodeLoad(10, 6001, 1, 0x1000, 1, "JS:good1", code1);
  good.CodeLoad(20, 6001, 1, 0x2000, 2, "JS:good2", code2);
  WriteFile(given + "/jit-6001.dump", good.bytes());

  JitdumpWriter trunc;
  trunc.Header({.pid = 6002, .timestamp = 2000});
  trunc.CodeLoad(10, 6002, 1, 0x1000, 1, "JS:kept", code1);
  trunc.CodeLoad(20, 6002, 1, 0x2000, 2, "JS:cut", code2);
  const size_t cut_record = trunc.record_offsets()[1];
  WriteFile(given + "/jit-6002.dump", trunc.bytes().substr(0, cut_record + 20));

  JitdumpWriter bad;
  bad.Header({.pid = 6003, .timestamp = 2000});
  bad.CodeLoad(10, 6003, 1, 0x1000, 1, "JS:before", code1);
  const size_t bad_at = bad.bytes().size();
  bad.Record(0, 30, std::string(10, 'x'), 8);  // total_size 8 < the 16-byte prefix: cannot be skipped
  bad.CodeLoad(40, 6003, 1, 0x2000, 2, "JS:after", code2);
  WriteFile(given + "/jit-6003.dump", bad.bytes());

  WriteFile(given + "/jit-6004.dump", "hello, this is not a jitdump at all");

  const std::vector<std::string> paths = {given + "/jit-6001.dump", given + "/jit-6002.dump", given + "/jit-6003.dump",
                                          given + "/jit-6004.dump"};
  pb::JitIngestResponse in;
  grpc::Status s = Ingest(paths, &in);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(in.files_size(), 4) << in.ShortDebugString();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(in.files(i).path(), paths[i]);

  EXPECT_EQ(in.files(0).kind(), "jitdump");
  EXPECT_EQ(in.files(0).status(), "complete") << in.files(0).message();
  EXPECT_EQ(in.files(0).loads(), 2u);

  EXPECT_EQ(in.files(1).kind(), "jitdump");
  EXPECT_EQ(in.files(1).status(), "truncated");
  EXPECT_EQ(in.files(1).loads(), 1u);
  EXPECT_NE(in.files(1).message().find("offset " + std::to_string(cut_record)), std::string::npos)
      << "should name where the incomplete record starts (" << cut_record << "): " << in.files(1).message();

  EXPECT_EQ(in.files(2).kind(), "jitdump");
  EXPECT_EQ(in.files(2).status(), "error");
  EXPECT_NE(in.files(2).message().find(std::to_string(bad_at)), std::string::npos)
      << "should name the malformed record's offset " << bad_at << ": " << in.files(2).message();

  EXPECT_EQ(in.files(3).status(), "error");
  EXPECT_NE(in.files(3).message().find("offset 0"), std::string::npos) << in.files(3).message();

  // Ingest is synchronous: answers right away, no polling.
  pb::JitAddrResponse resp;
  ASSERT_TRUE(Addr(6001, {0x1008, 0x2008}, &resp).ok());
  ASSERT_TRUE(resp.results(0).has_load() && resp.results(1).has_load()) << resp.ShortDebugString();
  EXPECT_EQ(resp.results(0).load().name(), "JS:good1");
  EXPECT_EQ(resp.results(1).load().name(), "JS:good2");
  EXPECT_EQ(resp.results(1).load().dump_path(), paths[0]);
  // Truncated: the complete record is in, the cut one is not.
  ASSERT_TRUE(Addr(6002, {0x1008, 0x2008}, &resp).ok());
  ASSERT_TRUE(resp.results(0).has_load());
  EXPECT_EQ(resp.results(0).load().name(), "JS:kept");
  EXPECT_FALSE(resp.results(1).has_load()) << resp.ShortDebugString();
  // Corrupt: the record before the bad one is kept, nothing after it is read.
  ASSERT_TRUE(Addr(6003, {0x1008, 0x2008}, &resp).ok());
  ASSERT_TRUE(resp.results(0).has_load()) << resp.ShortDebugString();
  EXPECT_EQ(resp.results(0).load().name(), "JS:before");
  EXPECT_FALSE(resp.results(1).has_load()) << resp.ShortDebugString();
  // Not a dump: nothing for that pid.
  EXPECT_EQ(Addr(6004, {0x1008}, &resp).error_code(), grpc::StatusCode::NOT_FOUND);

  // The truncated dump completes; the next Ingest reads on from where it stopped.
  WriteFile(given + "/jit-6002.dump", trunc.bytes());
  ASSERT_TRUE(Ingest({given + "/jit-6002.dump", given + "/jit-6001.dump"}, &in).ok());
  ASSERT_EQ(in.files_size(), 2);
  EXPECT_EQ(in.files(0).status(), "complete") << in.files(0).message();
  EXPECT_EQ(in.files(0).loads(), 1u);
  EXPECT_EQ(in.files(1).status(), "unchanged");
  EXPECT_EQ(in.files(1).loads(), 0u);
  ASSERT_TRUE(Addr(6002, {0x2008}, &resp).ok());
  ASSERT_TRUE(resp.results(0).has_load()) << resp.ShortDebugString();
  EXPECT_EQ(resp.results(0).load().name(), "JS:cut");
  EXPECT_EQ(resp.results(0).load().code_index(), 2u);

  // A directory expands to its jit-*.dump / perf-*.map files, sorted; other files are ignored.
  WriteFile(given + "/notes.txt", "not for symdex");
  ASSERT_TRUE(Ingest({given}, &in).ok());
  ASSERT_EQ(in.files_size(), 4) << in.ShortDebugString();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(in.files(i).path(), paths[i]);
  EXPECT_EQ(in.files(0).status(), "unchanged");
  EXPECT_EQ(in.files(1).status(), "unchanged");
  EXPECT_EQ(in.files(2).status(), "error") << "the malformed record is still there";

  // A path that does not exist fails the call.
  s = Ingest({given + "/no-such-file.dump"}, &in);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find("no-such-file.dump"), std::string::npos) << s.error_message();

  // The daemon is still up and serving after all of it.
  EXPECT_TRUE(daemon_->Alive()) << daemon_->log();
  ASSERT_TRUE(Addr(6001, {0x1008}, &resp).ok());
  ASSERT_TRUE(resp.results(0).has_load());
  EXPECT_EQ(resp.results(0).load().name(), "JS:good1");
  pb::StatusRequest sreq;
  pb::StatusResponse sresp;
  grpc::ClientContext ctx;
  Deadline(ctx);
  EXPECT_TRUE(symbols_->Status(&ctx, sreq, &sresp).ok());
  ExpectAddrMatchesCli(6003, {0x1008, 0x2008});
}

// ---------------------------------------------------------------------------------------------
// 3. Collisions.

const std::string kSameCode = Code(40, 21);
const std::string kOtherCode = Code(40, 22);

// pid 7001: JS:one and JS:two with identical code (at different addresses), JS:three other code.
JitdumpWriter CollisionDump() {
  JitdumpWriter w;
  w.Header({.pid = 7001, .timestamp = 3000});
  w.CodeLoad(10, 7001, 1, 0x1000, 1, "JS:one", kSameCode);
  w.CodeLoad(20, 7001, 1, 0x2000, 2, "JS:two", kSameCode);
  w.CodeLoad(30, 7001, 1, 0x3000, 3, "JS:three", kOtherCode);
  return w;
}

TEST_F(JitServiceTest, CollisionsGroupIdenticalCodeUnderSha1Code) {
  WriteFile(dir_ / "c/jit-7001.dump", CollisionDump().bytes());
  pb::JitIngestResponse in;
  ASSERT_TRUE(Ingest({dir_ / "c/jit-7001.dump"}, &in).ok());
  ASSERT_EQ(in.files_size(), 1);
  ASSERT_EQ(in.files(0).loads(), 3u) << in.ShortDebugString();

  const std::string sha1 = Digest("sha1sum", kSameCode);
  pb::JitCollisionsResponse col;
  grpc::Status s = Collisions("sha1-code", &col);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(col.collisions_size(), 1) << col.ShortDebugString();
  const pb::JitCollision& c = col.collisions(0);
  EXPECT_EQ(c.scheme(), "sha1-code");
  EXPECT_EQ(c.build_id(), sha1);
  EXPECT_EQ(c.distinct_names(), 2u);
  ASSERT_EQ(c.loads_size(), 2);
  std::set<std::string> names, dsos;
  for (const auto& l : c.loads()) {
    names.insert(l.name());
    dsos.insert(l.dso());
    EXPECT_EQ(l.pid(), 7001u);
    EXPECT_EQ(l.code_size(), kSameCode.size());
    EXPECT_EQ(l.code_address(), l.name() == "JS:one" ? 0x1000u : 0x2000u);
    // jit::JitCollisions fills name/pid/index/instance only, so the daemon sends these loads with
    // an empty build_ids map today; when it is filled it must carry the group's ID.
    if (!l.build_ids().empty()) {
      EXPECT_EQ(l.build_ids().at("sha1-code"), sha1) << l.ShortDebugString();
    }
    EXPECT_EQ(l.dump_timestamp(), 3000u);
  }
  EXPECT_EQ(names, (std::set<std::string>{"JS:one", "JS:two"}));
  EXPECT_EQ(dsos, (std::set<std::string>{"jitted-7001-1.so", "jitted-7001-2.so"}));

  // Names in the hash (sha1-symtab), the address (md5-addr) or the instance (symdex): no collision.
  for (const char* scheme : {"sha1-symtab", "md5-addr", "symdex"}) {
    ASSERT_TRUE(Collisions(scheme, &col).ok()) << scheme;
    EXPECT_EQ(col.collisions_size(), 0) << scheme << ": " << col.ShortDebugString();
  }
  ASSERT_TRUE(Collisions("", &col).ok());
  ASSERT_EQ(col.collisions_size(), 1) << "all schemes: " << col.ShortDebugString();
  EXPECT_EQ(col.collisions(0).scheme(), "sha1-code");

  json cli = Cli("jit collisions --scheme sha1-code");
  EXPECT_EQ(cli["shared_ids"], 1) << cli.dump();
  ASSERT_EQ(cli["schemes"].size(), 1u) << cli.dump();
  ASSERT_EQ(cli["schemes"][0]["groups"].size(), 1u) << cli.dump();
  EXPECT_EQ(cli["schemes"][0]["groups"][0]["build_id"], sha1);
  EXPECT_EQ(cli["schemes"][0]["groups"][0]["loads"], 2);

  // Another process instance runs the same function at the same address: perf's md5-addr and
  // sha1-symtab IDs collide across the two runs, sha1-code now merges three loads, symdex none.
  JitdumpWriter again;
  again.Header({.pid = 7002, .timestamp = 4000});
  again.CodeLoad(10, 7002, 1, 0x1000, 1, "JS:one", kSameCode);
  WriteFile(dir_ / "c/jit-7002.dump", again.bytes());
  ASSERT_TRUE(Ingest({dir_ / "c/jit-7002.dump"}, &in).ok());
  ASSERT_EQ(in.files(0).loads(), 1u) << in.ShortDebugString();

  ASSERT_TRUE(Collisions("sha1-code", &col).ok());
  ASSERT_EQ(col.collisions_size(), 1);
  EXPECT_EQ(col.collisions(0).loads_size(), 3);
  EXPECT_EQ(col.collisions(0).distinct_names(), 2u);
  for (const char* scheme : {"sha1-symtab", "md5-addr"}) {
    ASSERT_TRUE(Collisions(scheme, &col).ok()) << scheme;
    ASSERT_EQ(col.collisions_size(), 1) << scheme << ": " << col.ShortDebugString();
    EXPECT_EQ(col.collisions(0).distinct_names(), 1u) << scheme;
    std::set<uint32_t> pids;
    for (const auto& l : col.collisions(0).loads()) {
      EXPECT_EQ(l.name(), "JS:one") << scheme;
      pids.insert(l.pid());
    }
    EXPECT_EQ(pids, (std::set<uint32_t>{7001, 7002})) << scheme;
  }
  EXPECT_EQ(col.collisions(0).build_id(), Digest("md5sum", Le(0x1000, 8) + kSameCode) + "00000000");
  ASSERT_TRUE(Collisions("symdex", &col).ok());
  EXPECT_EQ(col.collisions_size(), 0) << col.ShortDebugString();
  ASSERT_TRUE(Collisions("", &col).ok());
  EXPECT_EQ(col.collisions_size(), 3) << col.ShortDebugString();

  s = Collisions("bogus", &col);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("bogus"), std::string::npos) << s.error_message();
}

// ---------------------------------------------------------------------------------------------
// 4. Addr errors and limits.

TEST_F(JitServiceTest, AddrUnknownPidIsNotFoundAndTooManyAddressesIsInvalid) {
  JitdumpWriter w;
  w.Header({.pid = 8001, .timestamp = 5000});
  w.CodeLoad(10, 8001, 1, 0x1000, 1, "JS:only", Code(16, 31));
  WriteFile(dir_ / "a/jit-8001.dump", w.bytes());
  pb::JitIngestResponse in;
  ASSERT_TRUE(Ingest({dir_ / "a/jit-8001.dump"}, &in).ok());
  ASSERT_EQ(in.files(0).loads(), 1u) << in.ShortDebugString();

  pb::JitAddrResponse resp;
  grpc::Status s = Addr(9999, {0x1000}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find("9999"), std::string::npos) << s.error_message();
  EXPECT_EQ(Cli("jit addr --pid 9999 0x1000", 3)["error"].is_object(), true) << "the CLI agrees: nothing for 9999";

  // The limit is 65,536 addresses per request: one more is refused, exactly that many answered.
  std::vector<uint64_t> addrs(65537);
  for (size_t i = 0; i < addrs.size(); ++i) addrs[i] = 0x100000 + i;
  addrs[0] = 0x1008;
  s = Addr(8001, addrs, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("65537"), std::string::npos) << s.error_message();

  addrs.pop_back();
  addrs.back() = 0x100f;  // the last byte of JS:only
  s = Addr(8001, addrs, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.results_size(), 65536);
  ASSERT_TRUE(resp.results(0).has_load());
  EXPECT_EQ(resp.results(0).load().name(), "JS:only");
  ASSERT_TRUE(resp.results(65535).has_load());
  EXPECT_EQ(resp.results(65535).address(), 0x100fu);
  EXPECT_EQ(resp.results(65535).load().name(), "JS:only");
  size_t covered = 0;
  for (int i = 0; i < resp.results_size(); ++i) {
    EXPECT_EQ(resp.results(i).address(), addrs[static_cast<size_t>(i)]) << i;
    covered += resp.results(i).has_load();
  }
  EXPECT_EQ(covered, 2u);

  // No addresses: a valid, empty answer.
  ASSERT_TRUE(Addr(8001, {}, &resp).ok());
  EXPECT_EQ(resp.results_size(), 0);
  EXPECT_TRUE(daemon_->Alive()) << daemon_->log();
}

TEST_F(JitServiceTest, PerfMapOnlyPidAnswersWithTheMapSymbol) {
  PlaceFile(watch_, "perf-8002.map", "1000 40 LazyCompile:~foo /app/a.js:1\n2000 10 Builtin:bar\n");
  std::string why;
  // No jitdump for 8002: Addr answers, but from the map (no load).
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  pb::JitAddrResponse resp;
  grpc::Status s;
  while (true) {
    s = Addr(8002, {0x1004, 0x2009, 0x3000}, &resp);
    if (s.ok() || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(s.ok()) << "perf-8002.map not ingested within 120 s: " << s.error_message() << "\n" << daemon_->log();
  ASSERT_EQ(resp.results_size(), 3);
  EXPECT_FALSE(resp.results(0).has_load());
  EXPECT_EQ(resp.results(0).perf_map_symbol(), "LazyCompile:~foo /app/a.js:1");
  EXPECT_EQ(resp.results(1).perf_map_symbol(), "Builtin:bar");
  EXPECT_EQ(resp.results(2).perf_map_symbol(), "");
  json cli = Cli("jit addr --pid 8002 0x1004 0x2009");
  EXPECT_EQ(cli["addresses"][0]["function"]["name"], resp.results(0).perf_map_symbol());
  EXPECT_EQ(cli["addresses"][1]["function"]["name"], resp.results(1).perf_map_symbol());
  // The perf map's answer in full through the daemon: map path, line, range.
  for (const char* args : {"jit addr --pid 8002 0x1004 0x2009 0x3000", "--json jit addr --pid 8002 0x1004 0x2009"}) {
    CommandResult r = ExpectSameThroughDaemon(args);
    EXPECT_NE(r.out.find("perf-8002.map"), std::string::npos) << r.out;
  }
}

// A perf map written while another process holds the index's write lock past the daemon's busy
// timeout (10 s; a `symdex index` does for the length of its store phase): the ingest fails as
// busy, and a scan after the lock is gone ingests the map, though the map never changes again.
TEST_F(JitServiceTest, PerfMapWrittenWhileTheIndexIsLockedIsIngestedOnceItIsFree) {
  auto db = store::Db::Open(daemon_->db(), store::Db::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  std::optional<store::Transaction> lock;
  {
    auto tx = store::Transaction::Begin(*db);
    ASSERT_TRUE(tx.ok()) << tx.status();
    lock.emplace(std::move(*tx));
  }
  PlaceFile(watch_, "perf-8003.map", "5000 40 LazyCompile:~locked /app/b.js:7\n");
  const auto busy_deadline = Clock::now() + std::chrono::seconds(120);
  while (daemon_->log().find("perf-8003.map: ") == std::string::npos && Clock::now() < busy_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(daemon_->log().find("(retrying at the next scan)"), std::string::npos) << daemon_->log();
  pb::JitAddrResponse resp;
  EXPECT_EQ(Addr(8003, {0x5004}, &resp).error_code(), grpc::StatusCode::NOT_FOUND);  // not in the index yet
  lock.reset();  // ROLLBACK: the lock is gone, the map file untouched since it was written
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  grpc::Status s;
  while (true) {
    s = Addr(8003, {0x5004}, &resp);
    if (s.ok() || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(s.ok()) << "perf-8003.map not ingested within 120 s of the lock's release: " << s.error_message() << "\n"
                      << daemon_->log();
  ASSERT_EQ(resp.results_size(), 1);
  EXPECT_EQ(resp.results(0).perf_map_symbol(), "LazyCompile:~locked /app/b.js:7");
}

// ---------------------------------------------------------------------------------------------
// 5. SymbolService.LookupBuildId finds jitted DSOs.

TEST_F(JitServiceTest, LookupBuildIdFindsTheJittedDso) {
  WriteFile(dir_ / "b/jit-7001.dump", CollisionDump().bytes());
  pb::JitIngestResponse in;
  ASSERT_TRUE(Ingest({dir_ / "b/jit-7001.dump"}, &in).ok());
  ASSERT_EQ(in.files(0).loads(), 3u) << in.ShortDebugString();

  const auto expected = ExpectedBuildIds(7001, 3000, 1, 0x1000, "JS:one", kSameCode);
  pb::JitAddrResponse addr;
  ASSERT_TRUE(Addr(7001, {0x1000}, &addr).ok());
  ASSERT_TRUE(addr.results(0).has_load());
  ASSERT_EQ(BuildIdsOf(addr.results(0).load()), expected);
  const std::string& id = expected.at("symdex");

  // The symdex ID names exactly one DSO; upper-case input is accepted and answered lower-case.
  std::string upper = id;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  pb::LookupBuildIdResponse resp;
  grpc::Status s = LookupBuildId(upper, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.build_id(), id);
  ASSERT_EQ(resp.hits_size(), 1) << resp.ShortDebugString();
  const pb::BuildIdHit& h = resp.hits(0);
  EXPECT_EQ(h.kind(), "jitted");
  EXPECT_EQ(h.name(), "jitted-7001-1.so");
  EXPECT_EQ(h.scheme(), "symdex");
  EXPECT_EQ(h.load().name(), "JS:one");
  EXPECT_EQ(h.load().pid(), 7001u);
  EXPECT_EQ(h.load().code_index(), 1u);
  EXPECT_EQ(h.load().code_address(), 0x1000u);
  EXPECT_EQ(h.load().code_size(), kSameCode.size());
  EXPECT_EQ(h.load().dump_timestamp(), 3000u);
  EXPECT_EQ(BuildIdsOf(h.load()), expected);

  json cli = Cli("buildid " + id);
  ASSERT_EQ(cli["jitted"].size(), 1u) << cli.dump();
  EXPECT_EQ(cli["jitted"][0]["dso"], h.name());

  // perf 6.17's sha1-code ID of JS:one is also JS:two's; md5-addr (perf <= 6.16) is JS:one's alone.
  ASSERT_TRUE(LookupBuildId(expected.at("sha1-code"), &resp).ok());
  ASSERT_EQ(resp.hits_size(), 2) << resp.ShortDebugString();
  std::set<std::string> dsos;
  for (const auto& hit : resp.hits()) {
    EXPECT_EQ(hit.kind(), "jitted");
    EXPECT_EQ(hit.scheme(), "sha1-code");
    dsos.insert(hit.name());
  }
  EXPECT_EQ(dsos, (std::set<std::string>{"jitted-7001-1.so", "jitted-7001-2.so"}));
  EXPECT_EQ(Cli("buildid " + expected.at("sha1-code"))["jitted"].size(), 2u);
  ASSERT_TRUE(LookupBuildId(expected.at("md5-addr"), &resp).ok());
  ASSERT_EQ(resp.hits_size(), 1) << resp.ShortDebugString();
  EXPECT_EQ(resp.hits(0).scheme(), "md5-addr");
  EXPECT_EQ(resp.hits(0).name(), "jitted-7001-1.so");

  s = LookupBuildId(std::string(40, '0'), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  s = LookupBuildId("not-hex", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

// Jitted loads are other users' processes: through the view an unprivileged peer gets
// (query::CallerView, which every declared verb's handler asks), a build-ID's jitted hits are
// left out and its kernel owners kept; a privileged one sees them.
TEST_F(JitServiceTest, JittedBuildIdHitsAreForPrivilegedCallersOnly) {
  WriteFile(dir_ / "b/jit-7001.dump", CollisionDump().bytes());
  pb::JitIngestResponse in;
  ASSERT_TRUE(Ingest({dir_ / "b/jit-7001.dump"}, &in).ok());
  const std::string id = ExpectedBuildIds(7001, 3000, 1, 0x1000, "JS:one", kSameCode).at("symdex");
  auto q = query::LocalQuery::Open(daemon_->db(), {});
  ASSERT_TRUE(q.ok()) << q.status();
  auto privileged = query::CallerView(**q, query::AddressAccess::kAbsolute).Ask<query::LookupBuildId>({.build_id = id});
  ASSERT_TRUE(privileged.ok()) << privileged.status();
  EXPECT_EQ(privileged->jitted.size(), 1u);
  auto other = query::CallerView(**q, query::AddressAccess::kKaslrFree).Ask<query::LookupBuildId>({.build_id = id});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(other->jitted.empty());
  EXPECT_EQ(other->build_id, id);
  EXPECT_TRUE(other->empty()) << "nothing else has a jitted load's ID: the daemon answers such a peer NOT_FOUND";
  // The view asks the index without the jitted loads for such a caller: not looked for at all.
  auto without = (*q)->Ask<query::LookupBuildId>({.build_id = id, .jitted = false});
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(without->jitted.empty());
}

// Every JIT lookup is refused to an unprivileged caller, naming the RPC and why; a privileged one
// is answered.
TEST_F(JitServiceTest, JitLookupsAreRefusedToUnprivilegedCallersSayingWhy) {
  WriteFile(dir_ / "b/jit-7001.dump", CollisionDump().bytes());
  pb::JitIngestResponse in;
  ASSERT_TRUE(Ingest({dir_ / "b/jit-7001.dump"}, &in).ok());
  auto q = query::LocalQuery::Open(daemon_->db(), {});
  ASSERT_TRUE(q.ok()) << q.status();
  query::CallerView other(**q, query::AddressAccess::kKaslrFree), root(**q, query::AddressAccess::kAbsolute);
  const std::string why =
      " is for privileged callers (root, CAP_SYSLOG, or a group/certificate the daemon trusts): JIT records hold "
      "other users' process addresses and paths";
  const query::JitAddrRequest addr{.pid = 7001, .addresses = {0x1000}};
  EXPECT_EQ(other.Ask<query::JitAddr>(addr).status(), absl::PermissionDeniedError("JitService.Addr" + why));
  EXPECT_EQ(other.Ask<query::JitCollisions>({}).status(), absl::PermissionDeniedError("JitService.Collisions" + why));
  EXPECT_EQ(other.Ask<query::MatchJittedDsos>({}).status(), absl::PermissionDeniedError("JitService.MatchDsos" + why));
  auto a = root.Ask<query::JitAddr>(addr);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->results.size(), 1u);
  EXPECT_TRUE(a->results[0].function.has_value());
  auto c = root.Ask<query::JitCollisions>({.scheme = "symdex"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->counts.count("symdex"), 1u);
}

// ---------------------------------------------------------------------------------------------
// 6. A real Node dump, written by node straight into the watched directory.

struct ParsedLoad {
  uint64_t timestamp = 0, code_addr = 0, code_size = 0, code_index = 0;
  uint32_t pid = 0;
  std::string name;
};

// A jitdump record walker independent of server/jit: header total_size, then (id, total_size,
// timestamp) prefixes; CODE_LOAD (id 0) bodies give pid, code_addr, code_size, code_index, name.
std::vector<ParsedLoad> WalkCodeLoads(const std::string& b, std::string* error) {
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
    return v;
  };
  auto u64 = [&](size_t at) { return uint64_t{u32(at)} | uint64_t{u32(at + 4)} << 32; };
  std::vector<ParsedLoad> out;
  if (b.size() < 40 || u32(0) != 0x4A695444) {
    *error = "not a little-endian jitdump";
    return out;
  }
  size_t at = u32(8);  // header total_size (after magic and version)
  while (at + 16 <= b.size()) {
    uint32_t id = u32(at), size = u32(at + 4);
    if (size < 16) {
      *error = "record of size " + std::to_string(size) + " at " + std::to_string(at);
      return out;
    }
    if (at + size > b.size()) break;  // incomplete tail
    if (id == 0) {
      ParsedLoad l;
      l.timestamp = u64(at + 8);
      l.pid = u32(at + 16);
      l.code_addr = u64(at + 32);
      l.code_size = u64(at + 40);
      l.code_index = u64(at + 48);
      size_t name_at = at + 56;
      size_t nul = b.find('\0', name_at);
      l.name = b.substr(name_at, nul - name_at);
      out.push_back(l);
    }
    at += size;
  }
  return out;
}

TEST_F(JitServiceTest, RealNodeDumpThroughTheWatchDir) {
  if (RunCommand("command -v node").exit_code != 0) {
    GTEST_SKIP() << "node is not installed";
  }
  WriteFile(dir_ / "script.js", symdex::testing::kNodeJitScript);
  CommandResult node = RunCommand("cd '" + watch_ + "' && node --perf-prof --interpreted-frames-native-stack '" +
                                  (dir_ / "script.js") + "'");
  ASSERT_EQ(node.exit_code, 0) << node.err;
  ASSERT_EQ(node.out, "2448875000\n") << node.err;
  std::string dump;
  for (const auto& e : fs::directory_iterator(watch_)) {
    std::string n = e.path().filename().string();
    if (n.starts_with("jit-") && n.ends_with(".dump")) dump = e.path().string();
  }
  ASSERT_FALSE(dump.empty()) << "node wrote no jit-<pid>.dump in " << watch_;
  std::string error;
  std::vector<ParsedLoad> loads = WalkCodeLoads(Slurp(dump), &error);
  ASSERT_EQ(error, "");
  ASSERT_GT(loads.size(), 500u);
  const uint32_t pid = loads.front().pid;
  ASSERT_EQ(dump, watch_ + "/jit-" + std::to_string(pid) + ".dump");

  // The dump was being ingested while node wrote it; wait until its last CODE_LOAD is in.
  const ParsedLoad& last = loads.back();
  std::string why;
  auto got = WaitForLoad(pid, last.code_addr, 120, &why,
                         [&](const pb::JitLoad& l) { return l.code_index() == last.code_index; });
  ASSERT_TRUE(got) << "the last CODE_LOAD (index " << last.code_index << ") was not answered within 120 s: " << why
                   << "\n"
                   << daemon_->log();
  EXPECT_EQ(got->name(), last.name);
  EXPECT_EQ(got->code_size(), last.code_size);
  EXPECT_EQ(got->dso(), "jitted-" + std::to_string(pid) + "-" + std::to_string(last.code_index) + ".so");
  EXPECT_EQ(got->build_ids_size(), 4);
  EXPECT_EQ(daemon_->log().find("warn: jit ingest"), std::string::npos) << daemon_->log();

  // Every load of our 50 functions, asked at its own load time: exactly that load answers.
  std::vector<uint64_t> mids;
  size_t checked = 0;
  std::set<std::string> fns;
  for (const ParsedLoad& l : loads) {
    if (l.name.find("fn_") == std::string::npos || l.code_size == 0) continue;
    pb::JitAddrResponse resp;
    const uint64_t mid = l.code_addr + l.code_size / 2;
    ASSERT_TRUE(Addr(pid, {mid}, &resp, l.timestamp).ok());
    ASSERT_TRUE(resp.results(0).has_load()) << l.name << " at 0x" << std::hex << mid;
    const pb::JitLoad& j = resp.results(0).load();
    EXPECT_EQ(j.name(), l.name);
    EXPECT_EQ(j.code_index(), l.code_index);
    EXPECT_EQ(j.code_address(), l.code_addr);
    EXPECT_EQ(j.code_size(), l.code_size);
    fns.insert(l.name.substr(0, l.name.find(' ')));
    if (mids.size() < 200) mids.push_back(mid);
    ++checked;
  }
  EXPECT_GE(fns.size(), 50u) << "one name per JS function at least";
  EXPECT_GE(checked, 50u);
  // Latest placements (no time) for those addresses: the daemon and the CLI agree on all fields.
  mids.push_back(last.code_addr);
  ExpectAddrMatchesCli(pid, mids);

  // perf 6.17's merge: one sha1-code ID covers the trampoline copies of (at least) all 50 functions.
  pb::JitCollisionsResponse col;
  ASSERT_TRUE(Collisions("sha1-code", &col).ok());
  json cli = Cli("jit collisions --scheme sha1-code");
  EXPECT_EQ(static_cast<size_t>(col.collisions_size()), cli["shared_ids"].get<size_t>());
  size_t biggest = 0;
  for (const auto& c : col.collisions()) biggest = std::max(biggest, static_cast<size_t>(c.distinct_names()));
  EXPECT_GE(biggest, 50u);
  ASSERT_TRUE(Collisions("symdex", &col).ok());
  EXPECT_EQ(col.collisions_size(), 0) << "symdex IDs are unique per load";

  // Every JIT verb answers the same bytes embedded and through the daemon, errors included.
  std::string addr_args;
  for (size_t i = 0; i < mids.size() && i < 40; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), " 0x%llx", static_cast<unsigned long long>(mids[i]));
    addr_args += buf;
  }
  const std::string p = " --pid " + std::to_string(pid);
  const std::string some_id = got->build_ids().at("sha1-code");
  const std::vector<std::string> verbs = {"jit addr" + p + addr_args,
                                          "--json jit addr" + p + addr_args,
                                          "jit addr" + p + " 0x10",
                                          "jit addr" + p + " --time 1" + addr_args,
                                          "jit addr --pid 424242 0x10",
                                          "jit collisions",
                                          "jit collisions --scheme sha1-code",
                                          "--json jit collisions --scheme md5-addr",
                                          "jit collisions --show 3",
                                          "buildid " + some_id,
                                          "--json buildid " + some_id,
                                          "buildid 0011223344556677",
                                          "buildid xyz"};
  size_t found = 0;
  for (const auto& v : verbs) found += ExpectSameThroughDaemon(v).exit_code == 0;
  EXPECT_GE(found, 7u) << "most of the verbs found what they asked for";

  // jit dsos: DSOs on disk (exported here from the index) matched by the daemon as embedded.
  const std::string out = dir_ / "dsos";
  CommandResult exp = RunCommand(std::string(SYMDEX_BIN) + " --db '" + daemon_->db() + "' jit export" + p +
                                 " --scheme sha1-code --out '" + out + "'");
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  CommandResult dsos = ExpectSameThroughDaemon("--json jit dsos '" + out + "'");
  EXPECT_EQ(dsos.exit_code, 0) << dsos.err;
  EXPECT_NE(dsos.out.find("\"matched\""), std::string::npos) << dsos.out.substr(0, 2000);
  ExpectSameThroughDaemon("jit dsos '" + out + "'");
  // jit export says why it does not go through the daemon.
  CommandResult remote_export = RunCommand(std::string(SYMDEX_BIN) + " --connect 'unix:" + daemon_->socket() +
                                           "' jit export" + p + " --out '" + out + "'");
  EXPECT_EQ(remote_export.exit_code, 3);
  EXPECT_NE(remote_export.err.find("without --connect"), std::string::npos) << remote_export.err;
}

}  // namespace
}  // namespace symdex::jit_service_test
