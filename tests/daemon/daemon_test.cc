// symdexd end to end: a real daemon process over a Unix socket and TLS on loopback, real gRPC
// clients (generated stubs and the symdex CLI), on the miniature kernel indexed as a live host
// (a sysroot with kallsyms, modules, notes and sections; debug files by build-ID).
// Over ~500 lines: one fixture (a compiled miniature kernel, the slow part) shared by every
// daemon scenario; splitting it would compile the kernel once per file.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "google/rpc/status.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "server/common/strings.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/ingest/decompress.h"
#include "server/ingest/pprof_wire.h"
#include "server/query/local_query.h"
#include "server/store/migrations.h"
#include "symdex/v1/symdex.grpc.pb.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/unit/kernel_fixture.h"

namespace symdex {
namespace {

using nlohmann::json;
using testing::CommandResult;
using testing::DaemonProcess;
using testing::KernelFixture;
using testing::RunCommand;
using testing::WriteFile;
namespace pb = ::symdex::v1;

using testing::kFixtureRelease;

void Must(const std::string& cmd) {
  CommandResult r = RunCommand(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.out << r.err;
}

// One fixture kernel, one sysroot, one index for the whole suite (compiling the kernel is the
// slow part).
class DaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fx_ = new KernelFixture(5);
    root_ = fx_->dir / "root";
    dbg_ = fx_->dir / "dbg";
    db_ = fx_->dir / "index.db";
    testing::MakeLiveSysroot(*fx_, root_, kFixtureRelease, /*with_module=*/true);
    CommandResult r = testing::IndexLiveSysroot(*fx_, SYMDEX_BIN, root_, dbg_, db_, kFixtureRelease);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete fx_;
    fx_ = nullptr;
  }

  static CommandResult Cli(const std::string& args, const std::string& stdin_file = "") {
    return RunCommand("env -u DEBUGINFOD_URLS -u SYMDEX_DB " + std::string(SYMDEX_BIN) + " " + args +
                      (stdin_file.empty() ? "" : " < '" + stdin_file + "'"));
  }

  // A daemon on a fresh socket serving db_.
  std::unique_ptr<DaemonProcess> StartDaemon(const std::vector<std::string>& extra = {}) {
    sock_ = dir_ / "s.sock";
    std::vector<std::string> args = {"--listen",        "unix:" + sock_,  "--db", db_,
                                     "--no-index-live", "--modules-poll", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = std::make_unique<DaemonProcess>(args, dir_ / "daemon.log", "unix:" + sock_);
    EXPECT_TRUE(d->ready()) << d->Log();
    return d;
  }

  std::unique_ptr<pb::SymbolService::Stub> Stub(const std::string& address = "") {
    auto ch = grpc::CreateChannel(address.empty() ? "unix:" + sock_ : address, grpc::InsecureChannelCredentials());
    return pb::SymbolService::NewStub(ch);
  }

  // A daemon tracking the live sysroot `root` (/proc/modules polled every 0.2 s), its index `db`,
  // the fixture's debug files; logging to dir_/d.log.
  std::unique_ptr<DaemonProcess> StartLiveDaemon(const std::string& root, const std::string& db,
                                                 const std::vector<std::string>& extra = {}) {
    sock_ = dir_ / "s.sock";
    std::vector<std::string> args = {"--listen", "unix:" + sock_,  "--db",           db,    "--sysroot",
                                     root,       "--index-live",   "--modules-poll", "0.2", "--debug-dir",
                                     dbg_,       "--no-debuginfod"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<DaemonProcess>(args, dir_ / "d.log", "unix:" + sock_);
  }

  // The module count of the first target the daemon on sock_ lists (-1: no answer, no target).
  int64_t ModulesSeen() {
    grpc::ClientContext ctx;
    pb::ListTargetsResponse t;
    if (!Stub()->ListTargets(&ctx, pb::ListTargetsRequest(), &t).ok() || t.targets_size() == 0) return -1;
    return t.targets(0).modules();
  }
  // Polls ModulesSeen() until it is `want` (WaitUntil's ceiling).
  bool WaitForModules(int64_t want) {
    return testing::WaitUntil([&] { return ModulesSeen() == want; });
  }
  // The daemon's live_updates (-1: no answer).
  int64_t LiveUpdates() {
    grpc::ClientContext ctx;
    pb::StatusResponse st;
    return Stub()->Status(&ctx, pb::StatusRequest(), &st).ok() ? st.live_updates() : -1;
  }
  // Whether the daemon's log holds `text`.
  static bool Logged(const testing::DaemonProcess& d, const std::string& text) {
    return d.Log().find(text) != std::string::npos;
  }

  static json Json(const std::string& args) {
    CommandResult r = Cli("--local --db '" + db_ + "' --json " + args);
    return json::parse(r.out.empty() ? "null" : r.out);
  }

  // The live target re-read from a kallsyms that `damage` (given its path) spoils is refused
  // and the reason logged (`log_has`); the daemon keeps serving the index it had.
  void LiveReindexIsRefused(const std::function<void(const std::string&)>& damage,
                            const std::vector<std::string>& log_has) {
    std::string root = dir_ / "live";
    std::string db = dir_ / "live.db";
    testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, true);
    Must("cp '" + db_ + "' '" + db + "'");
    damage(root + "/proc/kallsyms");
    auto d = StartLiveDaemon(root, db);
    ASSERT_TRUE(d->ready()) << d->Log();
    EXPECT_TRUE(testing::WaitUntil([&] { return Logged(*d, "previous index is kept"); })) << d->Log();
    for (const auto& want : log_has) EXPECT_NE(d->Log().find(want), std::string::npos) << want << "\n" << d->Log();
    CommandResult local = Cli("--local --db '" + db_ + "' dups");
    CommandResult remote = Cli("--connect unix:" + sock_ + " dups");
    EXPECT_EQ(remote.exit_code, 0) << remote.err;
    EXPECT_EQ(local.out, remote.out);
    EXPECT_EQ(d->Stop(), 0);
  }

  static KernelFixture* fx_;
  static std::string root_, dbg_, db_;
  testing::TempDir dir_;
  std::string sock_;
};

KernelFixture* DaemonTest::fx_ = nullptr;
std::string DaemonTest::root_, DaemonTest::dbg_, DaemonTest::db_;

// The commands whose output must not depend on who answered: built from what the index holds
// (every duplicated name, each instance's canonical spec and address, each entry line).
std::vector<std::string> ComparisonCommands(const json& dups, const std::string& addr_file) {
  std::vector<std::string> cmds = {
      "dups", "--json dups", "dups --module fake_mod", "dups --traceable", "--json dups --traceable",
      "which no_such_function_x", "resolve no_such_function_x", "resolve 'bad spec with spaces'",
      "-t no_such_target which foo", "lines no/such/file.c:1", "addr zz 0x0", "addr - < '" + addr_file + "'",
      "--json addr - < '" + addr_file + "'",
      // Whole-target listings and the index's state.
      "status", "status -v", "--json status", "symbols", "--json symbols", "symbols --all-types", "symbols --canonical",
      "--json symbols --canonical", "symbols -m fake_mod", "--json symbols -m vmlinux --all-types",
      "symbols -m no_such_module", "-t no_such_target symbols", "kallsyms", "kallsyms --aliases",
      "kallsyms --aliases --separator %", "-t no_such_target kallsyms",
      // Where a function was inlined (hdr_helper: into a_entry and b_entry), and where not.
      "inlined hdr_helper", "--json inlined hdr_helper", "inlined name_show", "-t no_such_target inlined hdr_helper",
      // One copy's variables: an ambiguous spec, none.
      "vars name_show", "vars no_such_function_x", "kprobe -n vmlinux:a_entry x no_such_variable",
      // One copy's callers: an ambiguous spec, none, a place inside a copy.
      "callers name_show", "callers no_such_function_x", "callers vmlinux:a_entry+1",
      // Lines of a copy's body: each place with its fetches, a line it does not have.
      "kprobe -n --rel-line 0 vmlinux:a_entry '$vars'", "kprobe -n --rel-line 1 vmlinux:a_entry '$vars'",
      "--json kprobe -n --rel-line 1 vmlinux:a_entry '$params'", "kprobe -n --line 99999 vmlinux:a_entry",
      "--json kprobe -n --format perf --rel-line 1 vmlinux:a_entry",
      // The places a function was inlined, each with its own fetches; none; a file without it.
      "kprobe -n --inlined hdr_helper x", "--json kprobe -n --inlined hdr_helper '$params'",
      "kprobe -n --inlined 'hdr_helper@include/linux/common.h'", "kprobe -n --inlined 'hdr_helper@nosuch.h'",
      "kprobe -n --inlined no_such_function_x", "--json kprobe -n --format bpftrace --inlined hdr_helper",
      // Arguments in the programs of bpftrace and libbpf, on the target's architecture.
      "kprobe -n --format bpftrace --rel-line 1 vmlinux:a_entry '$vars'",
      "--json kprobe -n --format libbpf --rel-line 0 vmlinux:a_entry '$params' '$comm'",
      "kprobe -n --format bpftrace --inlined hdr_helper x"};
  std::ofstream addrs(addr_file);
  for (const auto& g : dups["duplicates"]) {
    std::string name = g["name"];
    cmds.push_back("which " + name);
    cmds.push_back("--json which " + name);
    cmds.push_back("which --exact " + name);
    cmds.push_back("resolve " + name);
    cmds.push_back("--json resolve " + name);
    cmds.push_back("kprobe -n " + name);
    for (const auto& in : g["instances"]) {
      if (in["address"].is_string()) {
        std::string a = in["address"];
        cmds.push_back("addr " + a);
        addrs << a << "\n";
        cmds.push_back("resolve " + a);
      }
      if (!in["dwarf"].is_null()) {
        std::string where =
            in["dwarf"]["file"].get<std::string>() + ":" + std::to_string(in["dwarf"]["line"].get<int>());
        cmds.push_back("resolve '" + name + "@" + where + "'");
        cmds.push_back("kprobe -n -e grp/ev '" + name + "@" + where + "' 'x=%di:u64'");
        // Arguments by name, and the variables in scope, from the copy's DWARF (the module
        // named: the fixture's vmlinux and fake_mod share sources).
        const std::string module = in["module"].get<std::string>();
        const std::string copy = (module.empty() ? "vmlinux" : module) + ":" + name + "@" + where;
        cmds.push_back("kprobe -n '" + copy + "' '$params'");
        cmds.push_back("vars '" + copy + "'");
        cmds.push_back("--json vars '" + copy + "'");
        cmds.push_back("callers '" + copy + "'");
        cmds.push_back("--json callers '" + copy + "'");
        cmds.push_back("-t host --json kprobe -n -r '" + name + "@" + where + "'");
        cmds.push_back("lines '" + where + "'");
        cmds.push_back("--json lines '" + where + "'");
      }
    }
  }
  return cmds;
}

TEST_F(DaemonTest, CliOutputIsIdenticalEmbeddedAndThroughTheDaemon) {
  json dups = Json("dups");
  ASSERT_GE(dups["duplicates"].size(), 3u) << dups.dump();
  auto d = StartDaemon();
  auto cmds = ComparisonCommands(dups, dir_ / "addrs");
  ASSERT_GT(cmds.size(), 40u);
  size_t resolved = 0;
  for (const auto& c : cmds) {
    CommandResult local = Cli("--local --db '" + db_ + "' " + c);
    CommandResult remote = Cli("--connect 'unix:" + sock_ + "' " + c);
    EXPECT_EQ(local.exit_code, remote.exit_code) << c << "\n" << local.err << "\n---\n" << remote.err;
    EXPECT_EQ(local.out, remote.out) << c;
    EXPECT_EQ(local.err, remote.err) << c;
    resolved += local.exit_code == 0;
    // The listings and the index's state answer with something on this index.
    for (const char* listing : {"status", "symbols", "symbols --canonical", "kallsyms --aliases"}) {
      if (c != listing) continue;
      EXPECT_EQ(local.exit_code, 0) << c << "\n" << local.err;
      EXPECT_GT(std::count(local.out.begin(), local.out.end(), '\n'), 5) << c << "\n" << local.out;
    }
  }
  // The comparison means something only if most commands found what they asked for.
  EXPECT_GT(resolved, cmds.size() / 2);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Decode over gRPC (the Decode RPC) and `symdex decode` through the daemon (SymbolizeFrames,
// carrying each frame's place in its stack) answer as the embedded CLI does: a.c's name_show is
// told from b.c's by a_entry's call to it (objdump says which copy a_entry calls).
TEST_F(DaemonTest, DecodeOverGrpcPinsTheCopyTheCallerCalls) {
  const testing::DirectCall call = testing::ObjdumpDirectCall(fx_->vmlinux, "a_entry", "name_show");
  ASSERT_NE(call.callee, 0u) << "a_entry calls name_show directly";
  const uint64_t entry = testing::NmValue(fx_->vmlinux, "a_entry");
  const std::string log =
      "[    2.000000] RIP: 0010:name_show+0x1/0x10\n"
      "[    2.000001] Call Trace:\n"
      "[    2.000002]  a_entry+" +
      testing::HexAddress(call.return_address - entry) + "/0x80\n";
  const std::string file = dir_ / "oops.txt";
  testing::WriteFile(file, log);
  auto d = StartDaemon();
  auto stub = Stub();
  grpc::ClientContext ctx;
  pb::DecodeRequest req;
  req.set_log(log);
  pb::DecodeResponse resp;
  grpc::Status s = stub->Decode(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.target_info().name(), "host");
  ASSERT_EQ(resp.frames_size(), 2);
  const pb::DecodedFrame& top = resp.frames(0);
  EXPECT_EQ(top.line(), 0u);
  EXPECT_TRUE(top.regs());
  EXPECT_EQ(top.frame().result().symbol().name(), "name_show");
  EXPECT_EQ(top.frame().target_address(), call.callee + 1);
  EXPECT_NE(top.frame().note().find("its caller's call"), std::string::npos) << top.frame().note();
  EXPECT_EQ(log.substr(top.begin(), top.end() - top.begin()), "name_show+0x1/0x10");
  EXPECT_EQ(resp.pinned(), 2u);

  for (const std::string& c : {std::string("decode '") + file + "'", std::string("--json decode '") + file + "'"}) {
    CommandResult local = Cli("--local --db '" + db_ + "' " + c);
    CommandResult remote = Cli("--connect 'unix:" + sock_ + "' " + c);
    EXPECT_EQ(local.exit_code, 0) << c << "\n" << local.out << local.err;
    EXPECT_EQ(remote.exit_code, local.exit_code) << c << "\n" << remote.err;
    EXPECT_EQ(local.out, remote.out) << c;
  }
  // A bad build-ID is refused with a reason; the daemon keeps serving.
  grpc::ClientContext c2;
  req.set_kernel_build_id("not-hex");
  s = stub->Decode(&c2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  grpc::ClientContext c3;
  req.clear_kernel_build_id();
  req.set_log("no frames here\n");
  s = stub->Decode(&c3, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.frames_size(), 0);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// SymbolizePprof: a profile with one kernel location (a_entry+1) comes back with its function and
// line; the location of another mapping is left as it was.
TEST_F(DaemonTest, SymbolizePprofOverGrpc) {
  auto varint = [](std::string& o, uint64_t v) {
    while (v >= 0x80) {
      o.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    o.push_back(static_cast<char>(v));
  };
  auto num = [&](std::string& o, uint32_t n, uint64_t v) {
    varint(o, n << 3);
    varint(o, v);
  };
  auto msg = [&](std::string& o, uint32_t n, const std::string& b) {
    varint(o, (n << 3) | 2);
    varint(o, b.size());
    o += b;
  };
  const uint64_t entry = testing::NmValue(fx_->vmlinux, "a_entry");
  std::string prof, m1, m2, l1, l2, sample;
  num(m1, 1, 1), num(m1, 5, 1);  // mapping 1: "[kernel.kallsyms]"
  num(m2, 1, 2), num(m2, 5, 2);  // mapping 2: "/usr/bin/cat"
  num(l1, 1, 1), num(l1, 2, 1), num(l1, 3, entry + 1);
  num(l2, 1, 2), num(l2, 2, 2), num(l2, 3, 0x401000);
  std::string ids;
  varint(ids, 1), varint(ids, 2);
  msg(sample, 1, ids);
  num(sample, 2, 7);
  msg(prof, 2, sample);
  msg(prof, 3, m1), msg(prof, 3, m2), msg(prof, 4, l1), msg(prof, 4, l2);
  for (const char* str : {"", "[kernel.kallsyms]", "/usr/bin/cat"}) msg(prof, 6, str);
  auto d = StartDaemon();
  auto stub = Stub();
  grpc::ClientContext ctx;
  pb::SymbolizePprofRequest req;
  req.set_profile(prof);
  pb::SymbolizePprofResponse resp;
  grpc::Status s = stub->SymbolizePprof(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.kernel_locations(), 1u);
  EXPECT_EQ(resp.symbolized(), 1u);
  EXPECT_EQ(resp.locations(), 2u);
  auto out = ingest::Decompress(resp.profile(), ingest::Compression::kGzip, 1 << 20);
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto parsed = ingest::ParsePprof(*out);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->locations.at(0).lines, 1u) << "a_entry+1 has no inlined frames: one line";
  EXPECT_EQ(parsed->locations.at(1).lines, 0u) << "the user-space location is left alone";
  EXPECT_NE(std::find(parsed->strings.begin(), parsed->strings.end(), "a_entry"), parsed->strings.end());
  EXPECT_NE(std::find(parsed->strings.begin(), parsed->strings.end(), "drivers/a/a.c"), parsed->strings.end());
  // Not a profile: a clear error, and the daemon keeps serving.
  grpc::ClientContext c2;
  req.set_profile(std::string("\x0a\xff\xff\xff\x0f", 5));
  s = stub->SymbolizePprof(&c2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("not a pprof profile"), std::string::npos) << s.error_message();
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

TEST_F(DaemonTest, DefaultSocketRuleAndLocalOverride) {
  // --db (or $SYMDEX_DB) means "this index": the CLI never silently asks a daemon then.
  auto d = StartDaemon();
  CommandResult bad = Cli("--connect unix:" + (dir_ / "nobody.sock") + " which name_show");
  EXPECT_EQ(bad.exit_code, 3) << bad.out;
  EXPECT_NE(bad.err.find("unavailable"), std::string::npos) << bad.err;
  EXPECT_EQ(d->Stop(), 0);
}

TEST_F(DaemonTest, ResolveErrorsCarryCandidatesAsStatusDetails) {
  json dups = Json("dups");
  auto d = StartDaemon();
  auto stub = Stub();
  std::string name = dups["duplicates"][0]["name"];
  size_t n = dups["duplicates"][0]["count"];
  grpc::ClientContext ctx;
  pb::ResolveRequest req;
  req.set_spec(name);
  pb::ResolveResponse resp;
  grpc::Status s = stub->Resolve(&ctx, req, &resp);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << s.error_message();
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(s.error_details()));
  ASSERT_EQ(details.details_size(), 1);
  pb::Ambiguity amb;
  ASSERT_TRUE(details.details(0).UnpackTo(&amb));
  EXPECT_EQ(amb.spec(), name);
  EXPECT_EQ(amb.target().name(), "host");
  ASSERT_EQ(static_cast<size_t>(amb.candidates_size()), n);
  std::set<uint64_t> addrs;
  for (const auto& c : amb.candidates()) {
    // Every candidate's canonical spec resolves, over the wire, to exactly that candidate.
    grpc::ClientContext c2;
    pb::ResolveRequest r2;
    r2.set_spec(c.canonical());
    pb::ResolveResponse out;
    grpc::Status s2 = stub->Resolve(&c2, r2, &out);
    ASSERT_TRUE(s2.ok()) << c.canonical() << ": " << s2.error_message();
    EXPECT_EQ(out.match().instance().address(), c.instance().address());
    addrs.insert(out.match().instance().address());
  }
  EXPECT_EQ(addrs.size(), n);

  grpc::ClientContext c3;
  req.set_spec("no_such_function_x");
  s = stub->Resolve(&c3, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext c4;
  req.set_spec("a b");
  s = stub->Resolve(&c4, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(d->Stop(), 0);
}

TEST_F(DaemonTest, HostileRequestsGetClearErrorsAndTheDaemonKeepsServing) {
  auto d = StartDaemon();
  auto stub = Stub();
  {
    grpc::ClientContext ctx;
    pb::SymbolizeRequest req;
    for (int i = 0; i < 70000; ++i) req.add_addresses(0xffffffff81000000ull + i);
    pb::SymbolizeResponse resp;
    grpc::Status s = stub->Symbolize(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("limit is 65536"), std::string::npos) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    pb::ResolveRequest req;
    req.set_spec(std::string(20 << 20, 'a'));  // 20 MB: over the daemon's 16 MB message limit
    pb::ResolveResponse resp;
    grpc::Status s = stub->Resolve(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    pb::ResolveRequest req;
    req.set_spec(std::string(5000, 'a'));
    pb::ResolveResponse resp;
    grpc::Status s = stub->Resolve(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    pb::WhichRequest req;
    req.set_target("no_such_target");
    req.set_name("x");
    pb::WhichResponse resp;
    grpc::Status s = stub->Which(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    pb::LookupBuildIdRequest req;
    req.set_build_id("not hex");
    pb::LookupBuildIdResponse resp;
    EXPECT_EQ(stub->LookupBuildId(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    pb::LinesRequest req;
    req.set_file("x.c");
    req.set_line(-4);
    pb::LinesResponse resp;
    EXPECT_EQ(stub->Lines(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Every string field has a limit; a refusal names the field and never echoes the value.
  auto expect_refused = [](const grpc::Status& s, const char* field) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
    EXPECT_LT(s.error_message().size(), 300u) << field;
  };
  const std::string huge(10 << 20, 'x');  // 10 MB: under the message limit, over every field's
  {
    grpc::ClientContext ctx;
    pb::WhichRequest req;
    req.set_target(huge);
    req.set_name("x");
    pb::WhichResponse resp;
    expect_refused(stub->Which(&ctx, req, &resp), "target");
  }
  {
    grpc::ClientContext ctx;
    pb::WhichRequest req;
    req.set_name(huge);
    pb::WhichResponse resp;
    expect_refused(stub->Which(&ctx, req, &resp), "name");
  }
  {
    grpc::ClientContext ctx;
    pb::LinesRequest req;
    req.set_file(huge);
    req.set_line(3);
    pb::LinesResponse resp;
    expect_refused(stub->Lines(&ctx, req, &resp), "file");
  }
  {
    grpc::ClientContext ctx;
    pb::ProbeDefinitionRequest req;
    req.set_spec("x");
    for (int i = 0; i < 200; ++i) req.add_fetchargs("arg=%di");
    pb::ProbeDefinitionResponse resp;
    expect_refused(stub->ProbeDefinition(&ctx, req, &resp), "fetchargs");
  }
  {
    grpc::ClientContext ctx;
    pb::ProbeDefinitionRequest req;
    req.set_spec("x");
    req.set_event(std::string(5000, 'e'));
    pb::ProbeDefinitionResponse resp;
    expect_refused(stub->ProbeDefinition(&ctx, req, &resp), "event");
  }
  {
    grpc::ClientContext ctx;
    pb::CallersRequest req;
    req.set_spec(huge);
    pb::CallersResponse resp;
    expect_refused(stub->Callers(&ctx, req, &resp), "spec");
  }
  {
    grpc::ClientContext ctx;
    pb::ListDuplicatesRequest req;
    req.set_module(huge);
    auto reader = stub->ListDuplicates(&ctx, req);
    pb::DuplicateGroup g;
    while (reader->Read(&g)) {
    }
    expect_refused(reader->Finish(), "module");
  }
  // Bytes that are no protobuf (to every method that takes one request: each unary method decodes
  // its own, the server-streaming ones are left to the interceptor), and a string field that is not
  // UTF-8 (WhichRequest.name).
  const std::string garbage("\xff\xff\xff\xff\xff\x01garbage", 13);
  std::vector<std::pair<std::string, std::string>> undecodable = {
      {"/symdex.v1.SymbolService/Which", std::string("\x12\x03\xc3\x28\xff", 5)}};
  for (const char* service : {"SymbolService", "JitService"}) {
    const auto* svc = pb::ResolveRequest::descriptor()->file()->FindServiceByName(service);
    ASSERT_NE(svc, nullptr) << service;
    for (int i = 0; i < svc->method_count(); ++i) {
      if (!svc->method(i)->client_streaming())
        undecodable.emplace_back(StrCat("/", svc->full_name(), "/", svc->method(i)->name()), garbage);
    }
  }
  ASSERT_GT(undecodable.size(), 20u) << "every method that takes one request, and the UTF-8 one";
  for (const auto& [method, payload] : undecodable) {
    grpc::ClientContext ctx;
    grpc::ByteBuffer out;
    grpc::Slice slice(payload);
    grpc::ByteBuffer in(&slice, 1);
    auto channel = grpc::CreateChannel("unix:" + sock_, grpc::InsecureChannelCredentials());
    grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, channel), &ctx,
        in, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_code() << " " << s.error_message();
    EXPECT_NE(s.error_message().find(StrCat("the request to ", method, " could not be decoded")), std::string::npos)
        << s.error_message();
  }
  {  // an unknown method stays UNIMPLEMENTED
    grpc::ClientContext ctx;
    grpc::ByteBuffer out;
    grpc::Slice slice(std::string("\x0a\x01x", 3));
    grpc::ByteBuffer in(&slice, 1);
    auto channel = grpc::CreateChannel("unix:" + sock_, grpc::InsecureChannelCredentials());
    grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(),
        grpc::internal::RpcMethod("/symdex.v1.SymbolService/NoSuchMethod", grpc::internal::RpcMethod::NORMAL_RPC,
                                  channel),
        &ctx, in, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  }
  // Still serving, same answers as before.
  grpc::ClientContext ctx;
  pb::ListTargetsResponse targets;
  ASSERT_TRUE(stub->ListTargets(&ctx, pb::ListTargetsRequest(), &targets).ok());
  ASSERT_EQ(targets.targets_size(), 1);
  EXPECT_EQ(targets.targets(0).name(), "host");
  EXPECT_GT(targets.targets(0).text_symbols(), 10);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

TEST_F(DaemonTest, HealthReflectionAndMetrics) {
  int mport = testing::FreeTcpPort();
  auto d = StartDaemon({"--metrics-listen", "127.0.0.1:" + std::to_string(mport)});
  auto ch = grpc::CreateChannel("unix:" + sock_, grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(ch);
  for (const char* svc : {"", "symdex.v1.SymbolService", "symdex.v1.JitService"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(svc);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << svc << ": " << s.error_message();
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << svc;
  }
  {
    auto refl = grpc::reflection::v1alpha::ServerReflection::NewStub(ch);
    grpc::ClientContext ctx;
    auto stream = refl->ServerReflectionInfo(&ctx);
    grpc::reflection::v1alpha::ServerReflectionRequest req;
    req.set_list_services("");
    ASSERT_TRUE(stream->Write(req));
    grpc::reflection::v1alpha::ServerReflectionResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    std::set<std::string> names;
    for (const auto& s : resp.list_services_response().service()) names.insert(s.name());
    EXPECT_TRUE(names.count("symdex.v1.SymbolService"));
    EXPECT_TRUE(names.count("symdex.v1.JitService"));
    EXPECT_TRUE(names.count("grpc.health.v1.Health"));
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    auto stub = pb::SymbolService::NewStub(ch);
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext ctx;
      pb::WhichRequest req;
      req.set_name("no_such_function_x");
      pb::WhichResponse resp;
      ASSERT_TRUE(stub->Which(&ctx, req, &resp).ok());
    }
  }
  // A call is counted when the server is done with it, which may be a moment after the client
  // has its answer.
  CommandResult m;
  EXPECT_TRUE(testing::WaitUntil([&] {
    m = RunCommand("curl -sS http://127.0.0.1:" + std::to_string(mport) + "/metrics");
    return m.out.find("symdex_rpc_duration_seconds_count{method=\"Which\"} 3") != std::string::npos;
  })) << m.out;
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("symdex_rpc_requests_total{code=\"OK\",method=\"Which\"} 3"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("symdex_rpc_duration_seconds_count{method=\"Which\"} 3"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("symdex_index_symbols{owner=\"vmlinux\",target=\"host\"}"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("symdex_debug_files 2"), std::string::npos) << m.out;
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

// Certificates made with openssl for this test: a CA, the daemon's (localhost / 127.0.0.1) and a
// client's.
void MakeCerts(const std::string& dir) {
  std::string sh = "set -e; cd '" + dir + "'; " +
                   "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=symdex-test-ca -keyout ca.key "
                   "-out ca.pem 2>/dev/null; "
                   "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr "
                   "2>/dev/null; "
                   "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext; "
                   "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
                   "-extfile san.ext -out server.pem 2>/dev/null; "
                   "openssl req -newkey rsa:2048 -nodes -subj /CN=client -keyout client.key -out client.csr "
                   "2>/dev/null; "
                   "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
                   "-out client.pem 2>/dev/null";
  Must(sh);
}

TEST_F(DaemonTest, TlsOnLoopbackWithClientCertificates) {
  std::string certs = dir_ / "certs";
  Must("mkdir -p '" + certs + "'");
  MakeCerts(certs);
  int port = testing::FreeTcpPort();
  std::string addr = "127.0.0.1:" + std::to_string(port);
  sock_ = dir_ / "s.sock";
  DaemonProcess d({"--listen", addr, "--listen", "unix:" + sock_, "--db", db_, "--no-index-live", "--modules-poll", "0",
                   "--tls-cert", certs + "/server.pem", "--tls-key", certs + "/server.key", "--tls-client-ca",
                   certs + "/ca.pem", "--privileged-cert-name", "client"},
                  dir_ / "d.log", addr);
  ASSERT_TRUE(d.ready()) << d.Log();
  json dups = Json("dups");
  std::string name = dups["duplicates"][0]["name"];
  const std::string tls = "--tls-ca '" + certs + "/ca.pem' --tls-cert '" + certs + "/client.pem' --tls-key '" + certs +
                          "/client.key' --connect " + addr;
  CommandResult local = Cli("--local --db '" + db_ + "' which " + name);
  CommandResult remote = Cli(tls + " which " + name);
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(local.out, remote.out);
  // The name in the certificate, not the address, is what is checked.
  CommandResult by_name = Cli("--tls-ca '" + certs + "/ca.pem' --tls-cert '" + certs + "/client.pem' --tls-key '" +
                              certs + "/client.key' --tls-server-name localhost --connect " + addr + " which " + name);
  EXPECT_EQ(by_name.exit_code, 0) << by_name.err;
  // No client certificate: refused. Plaintext: refused. Wrong CA: refused.
  CommandResult no_cert = Cli("--tls-ca '" + certs + "/ca.pem' --connect " + addr + " which " + name);
  EXPECT_EQ(no_cert.exit_code, 3) << no_cert.out << no_cert.err;
  CommandResult plain = Cli("--connect " + addr + " which " + name);
  EXPECT_EQ(plain.exit_code, 3) << plain.out << plain.err;
  CommandResult wrong_ca = Cli("--tls-ca '" + certs + "/client.pem' --tls-cert '" + certs + "/client.pem' --tls-key '" +
                               certs + "/client.key' --connect " + addr + " which " + name);
  EXPECT_EQ(wrong_ca.exit_code, 3) << wrong_ca.out << wrong_ca.err;
  // The Unix socket next to it needs no certificate.
  CommandResult unix_sock = Cli("--connect unix:" + sock_ + " which " + name);
  EXPECT_EQ(unix_sock.out, local.out);
  EXPECT_EQ(d.Stop(), 0) << d.Log();

  // A verified certificate whose name is not a --privileged-cert-name gets the live target's
  // answers without absolute addresses (_text+N instead).
  int port2 = testing::FreeTcpPort();
  std::string addr2 = "127.0.0.1:" + std::to_string(port2);
  DaemonProcess d2({"--listen", addr2, "--db", db_, "--no-index-live", "--modules-poll", "0", "--tls-cert",
                    certs + "/server.pem", "--tls-key", certs + "/server.key", "--tls-client-ca", certs + "/ca.pem"},
                   dir_ / "d2.log", addr2);
  ASSERT_TRUE(d2.ready()) << d2.Log();
  const std::string tls2 = "--tls-ca '" + certs + "/ca.pem' --tls-cert '" + certs + "/client.pem' --tls-key '" + certs +
                           "/client.key' --connect " + addr2;
  CommandResult hidden = Cli(tls2 + " --json which " + name);
  ASSERT_EQ(hidden.exit_code, 0) << hidden.err;
  json hj = json::parse(hidden.out);
  ASSERT_FALSE(hj["instances"].empty()) << hidden.out;
  for (const auto& in : hj["instances"]) {
    EXPECT_FALSE(in.contains("address") && !in["address"].is_null()) << in.dump();
  }
  EXPECT_EQ(hidden.out.find("0xffffffff"), std::string::npos) << hidden.out;
  // The same for the callers of an inlined copy, which the privileged socket shows by address.
  CommandResult inl = Cli(tls2 + " --json inlined hdr_helper");
  ASSERT_EQ(inl.exit_code, 0) << inl.err;
  json ij = json::parse(inl.out);
  ASSERT_FALSE(ij["sites"].empty()) << inl.out;
  for (const auto& s : ij["sites"]) {
    ASSERT_TRUE(s["caller"].is_object()) << s.dump();
    EXPECT_TRUE(s["caller"]["address"].is_null()) << s.dump();
  }
  json il = json::parse(Cli("--local --db '" + db_ + "' --json inlined hdr_helper").out);
  ASSERT_EQ(il["sites"].size(), ij["sites"].size()) << il.dump();
  for (const auto& s : il["sites"]) {
    const std::string a = s["caller"]["address"];
    EXPECT_EQ(inl.out.find(a), std::string::npos) << a << " " << inl.out;
  }
  CommandResult oracle = Cli(tls2 + " addr 0xffffffff81000000");
  EXPECT_EQ(oracle.exit_code, 3) << oracle.out;
  EXPECT_NE(oracle.err.find("KASLR"), std::string::npos) << oracle.err;
  EXPECT_EQ(d2.Stop(), 0) << d2.Log();
}

TEST_F(DaemonTest, PlaintextTcpIsRefusedUnlessAskedFor) {
  int port = testing::FreeTcpPort();
  std::string addr = "127.0.0.1:" + std::to_string(port);
  DaemonProcess d({"--listen", addr, "--db", db_, "--no-index-live"}, dir_ / "d.log", "");
  EXPECT_EQ(d.Wait(30), 2);
  EXPECT_NE(d.Log().find("TCP needs --tls-cert"), std::string::npos) << d.Log();
  DaemonProcess ok({"--listen", addr, "--db", db_, "--no-index-live", "--insecure-tcp"}, dir_ / "ok.log", addr);
  ASSERT_TRUE(ok.ready()) << ok.Log();
  CommandResult r = Cli("--connect " + addr + " which no_such_function_x");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(ok.Stop(), 0);
}

TEST_F(DaemonTest, BadIndexOrBusySocketFailsWithAReason) {
  std::string junk = dir_ / "junk.db";
  WriteFile(junk, std::string(8192, 'x'));
  DaemonProcess d({"--listen", "unix:" + (dir_ / "a.sock"), "--db", junk, "--no-index-live"}, dir_ / "d.log", "");
  EXPECT_EQ(d.Wait(30), 3);
  EXPECT_NE(d.Log().find("not a database"), std::string::npos) << d.Log();
  auto first = StartDaemon();
  DaemonProcess second({"--listen", "unix:" + sock_, "--db", db_, "--no-index-live"}, dir_ / "2.log", "");
  EXPECT_EQ(second.Wait(30), 3);
  EXPECT_NE(second.Log().find("another daemon is listening"), std::string::npos) << second.Log();
  EXPECT_TRUE(testing::Accepts("unix:" + sock_));  // the first one is untouched
  EXPECT_EQ(first->Stop(), 0);
}

TEST_F(DaemonTest, ConfigFileSetsOptionsAndFlagsWin) {
  std::string conf = dir_ / "symdexd.conf";
  sock_ = dir_ / "c.sock";
  WriteFile(conf, "# test config\nlisten = unix:" + sock_ + "\ndb = " + db_ +
                      "\nindex-live = false\nmodules-poll = 0\nlog-level = debug\nsocket-mode = 0600\n");
  DaemonProcess d({"--config", conf}, dir_ / "d.log", "unix:" + sock_);
  ASSERT_TRUE(d.ready()) << d.Log();
  struct stat st {};
  ASSERT_EQ(::stat(sock_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  CommandResult r = Cli("--connect unix:" + sock_ + " which no_such_function_x");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_NE(d.Log().find("not indexing the live host"), std::string::npos) << d.Log();

  // A misspelt key is refused, naming it, before anything starts.
  WriteFile(conf, "db = " + db_ + "\nmodule-poll = 0\n");
  CommandResult bad = RunCommand(std::string(SYMDEXD_BIN) + " --config '" + conf + "'");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("module-poll"), std::string::npos) << bad.err;
  // So is a repeated key with other lines between (CLI11 would keep only the first run).
  WriteFile(conf, "listen = unix:" + sock_ + "\ndb = " + db_ + "\nlisten = unix:" + sock_ + ".2\n");
  CommandResult split = RunCommand(std::string(SYMDEXD_BIN) + " --config '" + conf + "'");
  EXPECT_EQ(split.exit_code, 2);
  EXPECT_NE(split.err.find(":3: 'listen' repeats line 1's key"), std::string::npos) << split.err;
}

// Both programs name, beside their version, the index schema they write (the last migration),
// the address-map format and the API — what a bug report or a fleet inventory needs to tell
// which index a binary reads — and say the same after their own name.
TEST(VersionTest, BothProgramsNameTheirVersionAndTheIndexSchema) {
  const std::string want = StrCat("index schema ", store::Migrations().back().version, ", address maps v",
                                  debuginfo::addrmap::kVersion, ", gRPC API symdex.v1)");
  std::vector<std::string> rest;
  for (const std::string name : {"symdex", "symdexd"}) {
    CommandResult r = RunCommand(std::string(name == "symdex" ? SYMDEX_BIN : SYMDEXD_BIN) + " --version");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(name + " ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    rest.push_back(r.out.substr(std::min(r.out.size(), name.size())));
  }
  EXPECT_EQ(rest[0], rest[1]);
}

TEST_F(DaemonTest, ConcurrentClientsGetTheEmbeddedAnswers) {
  json dups = Json("dups");
  // Expected answers from the query layer in-process, uncached.
  auto local = query::LocalQuery::Open(db_, {.cache = false});
  ASSERT_TRUE(local.ok());
  struct Expect {
    std::string spec, canonical;
    uint64_t addr;
  };
  std::vector<Expect> expect;
  std::vector<uint64_t> addrs;
  for (const auto& g : dups["duplicates"]) {
    auto r = (*local)->Resolve("", g["name"]);
    ASSERT_TRUE(r.ok());
    for (const auto& m : r->matches) {
      if (!m.match.instance.addr) continue;
      expect.push_back({m.canonical, m.canonical, *m.match.instance.addr});
      addrs.push_back(*m.match.instance.addr + 1);
    }
  }
  ASSERT_GE(expect.size(), 6u);
  auto sym_expect = (*local)->Symbolize("", addrs);
  ASSERT_TRUE(sym_expect.ok());
  auto d = StartDaemon();
  std::atomic<int> failures{0}, calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto stub = Stub();  // one channel per client
      for (int i = 0; i < 100; ++i) {
        const Expect& e = expect[(t + i) % expect.size()];
        grpc::ClientContext ctx;
        pb::ResolveRequest req;
        req.set_spec(e.spec);
        pb::ResolveResponse resp;
        grpc::Status s = stub->Resolve(&ctx, req, &resp);
        ++calls;
        if (!s.ok() || resp.match().instance().address() != e.addr || resp.match().canonical() != e.canonical) {
          ++failures;
        }
        if (i % 10 == 0) {
          grpc::ClientContext c2;
          pb::SymbolizeRequest sr;
          for (uint64_t a : addrs) sr.add_addresses(a);
          pb::SymbolizeResponse sresp;
          ++calls;
          if (!stub->Symbolize(&c2, sr, &sresp).ok() || sresp.results_size() != static_cast<int>(addrs.size())) {
            ++failures;
            continue;
          }
          for (int k = 0; k < sresp.results_size(); ++k) {
            const auto& want = *sym_expect->results[k];
            const auto& got = sresp.results(k);
            if (got.frames_size() != static_cast<int>(want.frames.size()) ||
                (got.frames_size() && (got.frames(0).function() != want.frames[0].function ||
                                       got.frames(0).line() != want.frames[0].line))) {
              ++failures;
            }
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(calls.load(), 8 * 110);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
}

TEST_F(DaemonTest, ReindexUnderQueryLoadFailsNoQueryAndSwapsAtomically) {
  // A private copy of the index and sysroot: this test rewrites both.
  std::string db = dir_ / "copy.db";
  std::string root = dir_ / "root";
  Must("cp '" + db_ + "' '" + db + "'");
  testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, true);
  sock_ = dir_ / "s.sock";
  DaemonProcess d({"--listen", "unix:" + sock_, "--db", db, "--no-index-live", "--modules-poll", "0"}, dir_ / "d.log",
                  "unix:" + sock_);
  ASSERT_TRUE(d.ready()) << d.Log();
  json dups = Json("dups");
  // vmlinux names keep their answers whatever the module does.
  std::vector<std::pair<std::string, size_t>> vmlinux_names;
  for (const auto& g : dups["duplicates"]) {
    size_t n = 0;
    for (const auto& in : g["instances"]) n += in["module"] == "vmlinux";
    if (n > 0) vmlinux_names.emplace_back(g["name"], n);
  }
  ASSERT_FALSE(vmlinux_names.empty());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, calls{0};
  std::mutex mu;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto stub = Stub();
      for (int i = 0; !stop; ++i) {
        const auto& [name, n] = vmlinux_names[(t + i) % vmlinux_names.size()];
        grpc::ClientContext ctx;
        pb::WhichRequest req;
        req.set_name(name);
        req.set_exact(true);
        pb::WhichResponse resp;
        grpc::Status s = stub->Which(&ctx, req, &resp);
        ++calls;
        size_t in_vmlinux = 0;
        for (const auto& in : resp.instances()) in_vmlinux += in.module().empty();
        if (!s.ok() || in_vmlinux != n) {
          ++failures;
          std::lock_guard<std::mutex> l(mu);
          if (first_failure.empty()) first_failure = name + ": " + s.error_message();
        }
      }
    });
  }
  // Three re-indexes by another process while the queries run: unload, load, unload.
  int64_t generation = 0;
  for (bool with_module : {false, true, false}) {
    testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, with_module);
    CommandResult r =
        Cli("--db '" + db + "' --json index -q --sysroot '" + root + "' --debug-dir '" + dbg_ + "' --no-debuginfod");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    generation = json::parse(r.out)["generation"];
    // Queries answered against each generation before the next: at least 30 more calls.
    const int64_t before = calls.load();
    EXPECT_TRUE(testing::WaitUntil([&] { return calls.load() >= before + 30; })) << calls.load();
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GE(calls.load(), 90);
  // The daemon sees the last index (module unloaded), not a cached older one.
  grpc::ClientContext ctx;
  pb::ListTargetsResponse targets;
  ASSERT_TRUE(Stub()->ListTargets(&ctx, pb::ListTargetsRequest(), &targets).ok());
  EXPECT_EQ(targets.targets(0).generation(), generation);
  EXPECT_EQ(targets.targets(0).modules(), 0);
  CommandResult r = Cli("--connect unix:" + sock_ + " dups --module fake_mod");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

TEST_F(DaemonTest, LiveTargetFollowsModuleLoadAndUnload) {
  std::string root = dir_ / "live";
  std::string db = dir_ / "live.db";
  testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, /*with_module=*/false);
  auto d = StartLiveDaemon(root, db, {"--log-level", "debug"});
  ASSERT_TRUE(d->ready()) << d->Log();
  ASSERT_TRUE(WaitForModules(0)) << d->Log();  // indexed at start, no module
  testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, true);
  ASSERT_TRUE(WaitForModules(1)) << d->Log();
  // The module's functions are there, with the debug info of its build-ID.
  CommandResult w = Cli("--connect unix:" + sock_ + " --json dups --module fake_mod");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  json j = json::parse(w.out);
  bool with_dwarf = false;
  for (const auto& g : j["duplicates"]) {
    for (const auto& in : g["instances"]) with_dwarf |= in["module"] == "fake_mod" && !in["dwarf"].is_null();
  }
  EXPECT_TRUE(with_dwarf) << w.out;
  // Only the module was replaced, and the result is what a whole re-index gives.
  auto same_as_full_index = [&](const std::string& label) {
    const std::string full = dir_ / ("full-" + label + ".db");
    CommandResult r =
        Cli("--db '" + full + "' index -q --sysroot '" + root + "' --debug-dir '" + dbg_ + "' --no-debuginfod");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string verb : {"symbols --all-types", "symbols --canonical", "dups --with-init", "status"}) {
      auto rows = [&](const std::string& path) {
        CommandResult c = Cli("--local --db '" + path + "' " + verb);
        EXPECT_EQ(c.exit_code, 0) << verb << ": " << c.err;
        std::vector<std::string> v;
        std::istringstream in(c.out);
        for (std::string l; std::getline(in, l);) {
          // status: the db path, the time and the generation differ
          if (verb != "status" || (!l.starts_with("index ") && !l.starts_with("  indexed "))) v.push_back(l);
        }
        std::sort(v.begin(), v.end());
        return v;
      };
      auto live = rows(db), whole = rows(full);
      EXPECT_FALSE(live.empty()) << verb;
      EXPECT_EQ(live, whole) << label << ": " << verb << " differs between the updated and a freshly indexed target";
    }
  };
  same_as_full_index("loaded");
  testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, false);
  ASSERT_TRUE(WaitForModules(0)) << d->Log();
  same_as_full_index("unloaded");
  // Queries see a generation once it is committed, a moment before the daemon counts it.
  EXPECT_TRUE(testing::WaitUntil([&] { return LiveUpdates() >= 2; })) << LiveUpdates();
  grpc::ClientContext ctx;
  pb::StatusResponse st;
  ASSERT_TRUE(Stub()->Status(&ctx, pb::StatusRequest(), &st).ok());
  EXPECT_NE(st.live_tracking().find("polling"), std::string::npos);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
  EXPECT_NE(d->Log().find("modules changed: +fake_mod"), std::string::npos) << d->Log();
  EXPECT_NE(d->Log().find("modules changed: -fake_mod"), std::string::npos) << d->Log();
  EXPECT_NE(d->Log().find("replaced modules fake_mod"), std::string::npos) << d->Log();
}

// A module loaded while kallsyms cannot be read (addresses hidden for a while): the re-index
// fails and the previous index is kept; once kallsyms reads again the daemon retries on its own
// and the module is there — the change is not lost because the first attempt failed, though
// /proc/modules does not change again.
TEST_F(DaemonTest, FailedLiveReindexIsRetriedUntilTheChangeIsIndexed) {
  std::string root = dir_ / "live", loaded = dir_ / "loaded";
  std::string db = dir_ / "live.db";
  testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, /*with_module=*/false);
  testing::MakeLiveSysroot(*fx_, loaded, kFixtureRelease, /*with_module=*/true);
  const int mport = testing::FreeTcpPort();
  auto behind_since = [&]() -> std::string {  // the gauge's value, as /metrics prints it
    CommandResult m = RunCommand("curl -sS http://127.0.0.1:" + std::to_string(mport) + "/metrics");
    std::istringstream in(m.out);
    for (std::string l; std::getline(in, l);) {
      if (l.starts_with("symdex_live_behind_since_seconds ")) return l.substr(l.find(' ') + 1);
    }
    return "(absent)\n" + m.out + m.err;
  };
  auto d = StartLiveDaemon(root, db, {"--metrics-listen", "127.0.0.1:" + std::to_string(mport)});
  ASSERT_TRUE(d->ready()) << d->Log();
  ASSERT_TRUE(WaitForModules(0)) << d->Log();
  EXPECT_EQ(behind_since(), "0");
  // The module appears with kallsyms zeroed; /proc/modules is written last, so the daemon's
  // poll sees the change only once the zeroed kallsyms is in place.
  Must("sed 's/^[0-9a-f]*/0000000000000000/' '" + loaded + "/proc/kallsyms' > '" + root + "/proc/kallsyms' && cp -r '" +
       loaded + "/sys/module/fake_mod' '" + root + "/sys/module/' && cp '" + loaded + "/proc/modules' '" + root +
       "/proc/modules'");
  ASSERT_TRUE(testing::WaitUntil([&] { return Logged(*d, "retrying in"); })) << d->Log();
  ASSERT_NE(d->Log().find("previous index is kept"), std::string::npos) << d->Log();
  ASSERT_NE(d->Log().find("retrying in"), std::string::npos) << d->Log();
  EXPECT_EQ(ModulesSeen(), 0);
  // `symdex status` through the daemon says the live target is behind, since when and why.
  CommandResult st = Cli("--connect unix:" + sock_ + " status");
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(st.out.find("live tracking     polling "), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("BEHIND the host since "), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("reads as 0"), std::string::npos) << st.out;
  json behind = json::parse(Cli("--connect unix:" + sock_ + " --json status").out)["live"]["behind"];
  ASSERT_TRUE(behind.is_object()) << behind.dump();
  EXPECT_GE(behind["failures"].get<int64_t>(), 1);
  EXPECT_GE(behind["next_attempt"].get<int64_t>(), behind["since"].get<int64_t>());
  EXPECT_NE(behind["attempt"].get<std::string>().find("modules changed: +fake_mod"), std::string::npos)
      << behind.dump();
  EXPECT_EQ(behind_since(), std::to_string(behind["since"].get<int64_t>()));
  // kallsyms readable again (renamed into place: a retry may read it any moment); /proc/modules
  // stays as it was.
  Must("cp '" + loaded + "/proc/kallsyms' '" + root + "/proc/kallsyms.new' && mv '" + root + "/proc/kallsyms.new' '" +
       root + "/proc/kallsyms'");
  // The retries' interval has doubled while the test looked (up to 60 s): WaitUntil's ceiling
  // is past it.
  ASSERT_TRUE(WaitForModules(1)) << d->Log();
  // Queries see the new generation once it is committed, a moment before the daemon logs it and
  // counts it: wait for the count.
  EXPECT_TRUE(testing::WaitUntil([&] { return LiveUpdates() >= 1; })) << d->Log();
  EXPECT_EQ(LiveUpdates(), 1);  // the one that succeeded; failed attempts are not updates
  json live = json::parse(Cli("--connect unix:" + sock_ + " --json status").out)["live"];
  EXPECT_TRUE(live["behind"].is_null()) << live.dump();
  EXPECT_EQ(live["updates"], 1) << live.dump();
  st = Cli("--connect unix:" + sock_ + " status");
  EXPECT_NE(st.out.find("  current (the last re-index succeeded)"), std::string::npos) << st.out;
  EXPECT_EQ(behind_since(), "0");
  EXPECT_EQ(d->Stop(), 0) << d->Log();
  EXPECT_NE(d->Log().find("(retry, modules changed: +fake_mod)"), std::string::npos) << d->Log();
}

// SIGHUP re-indexes the whole live target though /proc/modules did not change: a new generation,
// logged as such, counted as an update.
TEST_F(DaemonTest, SighupReindexesTheWholeLiveTarget) {
  std::string root = dir_ / "live";
  std::string db = dir_ / "live.db";
  testing::MakeLiveSysroot(*fx_, root, kFixtureRelease, /*with_module=*/true);
  auto d = StartLiveDaemon(root, db);
  ASSERT_TRUE(d->ready()) << d->Log();
  ASSERT_TRUE(WaitForModules(1)) << d->Log();
  auto state = [&]() -> std::pair<int64_t, int64_t> {  // generation, live updates
    grpc::ClientContext c1, c2;
    pb::ListTargetsResponse t;
    pb::StatusResponse st;
    if (!Stub()->ListTargets(&c1, pb::ListTargetsRequest(), &t).ok() || t.targets_size() == 0) return {-1, -1};
    if (!Stub()->Status(&c2, pb::StatusRequest(), &st).ok()) return {-1, -1};
    return {t.targets(0).generation(), st.live_updates()};
  };
  auto [gen0, updates0] = state();
  EXPECT_EQ(updates0, 0);
  ASSERT_EQ(::kill(d->pid(), SIGHUP), 0);
  const int64_t before = updates0;  // (clang 14 cannot capture a structured binding)
  EXPECT_TRUE(testing::WaitUntil([&] { return state().second > before; })) << d->Log();
  auto [gen1, updates1] = state();
  EXPECT_EQ(updates1, 1);
  EXPECT_EQ(gen1, gen0 + 1);
  EXPECT_EQ(ModulesSeen(), 1);
  EXPECT_EQ(d->Stop(), 0) << d->Log();
  std::string log = d->Log();
  size_t at = log.find("indexed the live host (SIGHUP): ");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.substr(at, log.find('\n', at) - at).find(", whole target,"), std::string::npos) << log;
}

TEST_F(DaemonTest, KptrRestrictedKallsymsKeepsThePreviousIndex) {
  LiveReindexIsRefused([&](const std::string& k) { Must("sed -i 's/^[0-9a-f]*/0000000000000000/' '" + k + "'"); },
                       {"kptr_restrict"});
}

// A kallsyms that stopped short (fewer than 90% of the indexed vmlinux symbols): the daemon has
// no --force.
TEST_F(DaemonTest, ShrunkenKallsymsKeepsThePreviousIndex) {
  LiveReindexIsRefused(
      [&](const std::string& k) { Must("head -n 3 '" + k + "' > '" + k + ".3' && mv '" + k + ".3' '" + k + "'"); },
      {"has 3 vmlinux symbols, the current index of target host has", "refusing to replace it"});
}

TEST_F(DaemonTest, SigtermDrainsCallsInFlightThenExitsZero) {
  json dups = Json("dups");
  std::vector<uint64_t> addrs;
  for (const auto& g : dups["duplicates"]) {
    for (const auto& in : g["instances"]) {
      if (in["address"].is_string()) addrs.push_back(std::stoull(in["address"].get<std::string>(), nullptr, 16));
    }
  }
  ASSERT_FALSE(addrs.empty());
  auto d = StartDaemon({"--drain-seconds", "20"});
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->SymbolizeStream(&ctx);
  pb::SymbolizeRequest req;
  for (uint64_t a : addrs) req.add_addresses(a);
  pb::SymbolizeResponse resp;
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_EQ(resp.results_size(), static_cast<int>(addrs.size()));
  // The stream is in flight; SIGTERM now, and wait until the daemon says it drains.
  ::kill(d->pid(), SIGTERM);
  ASSERT_TRUE(testing::WaitUntil([&] { return Logged(*d, "SIGTERM: draining 1 call(s)"); })) << d->Log();
  // The daemon is draining, not gone: the open call is still answered ...
  EXPECT_EQ(d->Wait(0.1), -1);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.results_size(), static_cast<int>(addrs.size()));
  EXPECT_TRUE(resp.results(0).has_symbol());
  // ... while new calls are refused.
  {
    grpc::ClientContext c2;
    c2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    pb::ListTargetsResponse t;
    EXPECT_FALSE(stub->ListTargets(&c2, pb::ListTargetsRequest(), &t).ok());
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(d->Wait(20), 0) << d->Log();
  EXPECT_NE(d->Log().find("SIGTERM: draining 1 call(s)"), std::string::npos) << d->Log();
}

TEST_F(DaemonTest, SigtermCancelsWhatOutlivesTheDrainDeadline) {
  auto d = StartDaemon({"--drain-seconds", "1"});
  auto stub = Stub();
  grpc::ClientContext ctx;
  auto stream = stub->SymbolizeStream(&ctx);  // opened, never finished by the client
  pb::SymbolizeRequest req;
  req.add_addresses(0);
  pb::SymbolizeResponse resp;
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  // The client never finishes the stream: only the drain deadline can end the daemon (Stop's
  // ceiling is far past the deadline).
  EXPECT_EQ(d->Stop(SIGTERM), 0) << d->Log();
  EXPECT_FALSE(stream->Finish().ok());
}

}  // namespace
}  // namespace symdex

namespace symdex {
namespace {

// What a daemon keeps of a frames answer (each address's answer, and its symbol's canonical spec
// beside it) is what it answered: the same frames answered by the CLI alone, by the daemon cold,
// warm, and in small pipelined batches (the CLI's, and the remote client's parts) are the same.
TEST_F(DaemonTest, FramesAnsweredFromTheCacheAreTheFirstAnswers) {
  json dups = Json("dups");
  std::vector<std::string> lines;
  for (const auto& g : dups["duplicates"]) {
    for (const auto& in : g["instances"]) {
      if (in["address"].is_string() && in["module"] == "vmlinux") {
        lines.push_back(testing::HexAddress(std::stoull(in["address"].get<std::string>(), nullptr, 16) + 1));
      }
    }
  }
  ASSERT_GE(lines.size(), 4u);
  uint64_t entry = 0;  // a_entry of vmlinux: a name vmlinux has once
  const json which = Json("which a_entry");
  for (const auto& in : which["instances"]) {
    if (in["module"] == "vmlinux") {
      ASSERT_EQ(entry, 0u);
      entry = std::stoull(in["address"].get<std::string>(), nullptr, 16);
    }
  }
  ASSERT_NE(entry, 0u) << which.dump();
  lines.push_back(testing::HexAddress(entry + 2));
  lines.push_back(lines.front());  // the same address twice in one request
  lines.push_back("0x10");         // no symbol there
  lines.push_back("a_entry+0x1");
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  const std::string file = dir_ / "frames.txt";
  WriteFile(file, text);

  auto d = StartDaemon();
  auto frames = [&](const std::string& how, const std::string& batch) {
    ::setenv("SYMDEX_FRAMES_BATCH", batch.c_str(), 1);
    CommandResult r = Cli(how + " --json frames -", file);
    ::unsetenv("SYMDEX_FRAMES_BATCH");
    EXPECT_EQ(r.exit_code, 1) << r.err;  // 0x10: not found
    return r.out;
  };
  const std::string alone = frames("--local --db '" + db_ + "'", "4096");
  const std::string cold = frames("--connect unix:" + sock_, "4096");
  const std::string warm = frames("--connect unix:" + sock_, "4096");
  const std::string small = frames("--connect unix:" + sock_, "3");
  EXPECT_EQ(cold, alone);
  EXPECT_EQ(warm, alone);
  EXPECT_EQ(small, alone);
  // The answers are real ones: every line answered, canonical specs that tell copies apart.
  json j = json::parse(alone);
  ASSERT_EQ(j["results"].size(), lines.size());
  size_t with_spec = 0, pinned = 0;
  for (const auto& r : j["results"]) {
    if (!r.contains("spec")) continue;
    ++with_spec;
    pinned += r["spec"].get<std::string>().find_first_of("@#") != std::string::npos;  // one copy of several
  }
  EXPECT_EQ(with_spec, lines.size() - 1) << alone;
  EXPECT_GE(pinned, 4u) << alone;
  EXPECT_EQ(d->Stop(SIGTERM, 20), 0) << d->Log();
}

TEST_F(DaemonTest, ReleasingDebugInfoKeepsAnswersAndReopensOnDemand) {
  auto q = query::LocalQuery::Open(db_, {});
  ASSERT_TRUE(q.ok());
  json dups = Json("dups");
  std::vector<uint64_t> addrs;
  for (const auto& g : dups["duplicates"]) {
    for (const auto& in : g["instances"]) {
      if (in["address"].is_string() && in["module"] == "vmlinux") {
        addrs.push_back(std::stoull(in["address"].get<std::string>(), nullptr, 16) + 1);
      }
    }
  }
  ASSERT_GE(addrs.size(), 2u);
  std::vector<uint64_t> first(addrs.begin(), addrs.begin() + addrs.size() / 2);
  std::vector<uint64_t> rest(addrs.begin() + addrs.size() / 2, addrs.end());
  auto before = (*q)->Symbolize("", first);
  ASSERT_TRUE(before.ok());
  ASSERT_FALSE(before->results[0]->frames.empty());
  EXPECT_FALSE((*q)->TrimIfIdle(3600));  // just used: kept
  EXPECT_TRUE((*q)->TrimIfIdle(0));
  EXPECT_FALSE((*q)->TrimIfIdle(0));  // nothing left to release
  auto again = (*q)->Symbolize("", first);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(again->results[i]->frames.size(), before->results[i]->frames.size());
  }
  EXPECT_FALSE((*q)->TrimIfIdle(0));       // answered from the cache: no debug file opened
  auto fresh = (*q)->Symbolize("", rest);  // needs DWARF again: reopened
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->results[0]->frames.empty());
  EXPECT_FALSE(fresh->results[0]->frames[0].file.empty());
  EXPECT_TRUE((*q)->TrimIfIdle(0));
}

}  // namespace
}  // namespace symdex
