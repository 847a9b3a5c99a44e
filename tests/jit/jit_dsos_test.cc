// `symdex jit dsos`: build-IDs of jitted DSOs on disk, matched to the ingested load and the scheme
// (perf era) that produced them; shared IDs on disk; unreadable files. DSOs come from `symdex jit
// export` under several schemes, from a hand-built dump (tests/jit/jitdump_writer.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/common/build_id.h"
#include "server/jit/jitted_dso_files.h"
#include "tests/jit/jitdump_writer.h"
#include "tests/jit/symdex_db_test.h"
#include "tests/unit/test_util.h"

namespace symdex::jit {
namespace {

using namespace symdex::ingest;  // the jitdump parser's types (server/ingest/jitdump.h)

namespace fs = std::filesystem;
using nlohmann::json;
using symdex::testing::CommandResult;
using symdex::testing::RunCommand;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;
using testing::JitdumpWriter;

using symdex::testing::Slurp;

using symdex::testing::kCodeA;
using symdex::testing::kCodeB;
using symdex::testing::kPid;

// foo and bar: identical code under two names (sha1-code collides); baz: other code.
std::string Dump() {
  JitdumpWriter w;
  w.Header({.pid = kPid, .timestamp = 77});
  w.CodeLoad(100, kPid, 1, 0x1000, 1, "JS:foo", kCodeA);
  w.CodeLoad(200, kPid, 1, 0x2000, 2, "JS:bar", kCodeA);
  w.CodeLoad(400, kPid, 1, 0x3000, 3, "JS:baz", kCodeB);
  return w.bytes();
}

class JitDsosTest : public symdex::testing::SymdexDbTest {
 protected:
  void SetUp() override {
    WriteFile(dir_ / "jit-4242.dump", Dump());
    Json("jit ingest '" + (dir_ / "jit-4242.dump") + "'");
  }
  void Export(const std::string& scheme, const std::string& sub) {
    json e = Json("jit export --out '" + (dir_ / sub) + "' --scheme " + scheme);
    ASSERT_EQ(e["written"], 3);
  }
  static std::map<std::string, json> ByName(const json& out) {
    std::map<std::string, json> m;
    for (const json& d : out["dsos"]) m[fs::path(d["path"].get<std::string>()).filename().string()] = d;
    return m;
  }
};

TEST_F(JitDsosTest, RecognizesLoadAndSchemeAndReportsSharedIds) {
  Export("sha1-code", "sha1/run");  // one directory down, as perf's ~/.debug/jit/<name>/
  Export("symdex", "own");
  Export("md5-addr", "md5");

  json s = Json("jit dsos '" + (dir_ / "sha1") + "'");
  ASSERT_EQ(s["dsos"].size(), 3u) << s.dump(2);
  for (const json& d : s["dsos"]) {
    EXPECT_EQ(d["status"], "matched") << d.dump(2);
    EXPECT_EQ(d["scheme"], "sha1-code");
    EXPECT_NE(d["era"].get<std::string>().find("perf 6.17"), std::string::npos);
    EXPECT_EQ(d["pid"], kPid);
    ASSERT_EQ(d["loads"].size(), 1u);
    EXPECT_EQ(d["loads"][0]["name"], d["symbol"]);
    EXPECT_EQ(d["loads"][0]["code_index"], d["code_index"]);
    EXPECT_EQ(d["loads"][0]["symbol_matches"], true);
    EXPECT_EQ(d["loads"][0]["build_ids"]["sha1-code"], d["build_id"]);
  }
  auto by = ByName(s);
  EXPECT_EQ(by["jitted-4242-1.so"]["symbol"], "JS:foo");
  EXPECT_EQ(by["jitted-4242-2.so"]["symbol"], "JS:bar");
  EXPECT_EQ(by["jitted-4242-1.so"]["build_id"], by["jitted-4242-2.so"]["build_id"]);
  ASSERT_EQ(s["shared_ids"].size(), 1u);
  EXPECT_EQ(s["shared_ids"][0]["build_id"], by["jitted-4242-1.so"]["build_id"]);
  EXPECT_EQ(s["shared_ids"][0]["functions"], json({"JS:bar", "JS:foo"}));
  EXPECT_EQ(s["shared_ids"][0]["schemes"], json({"sha1-code"}));
  EXPECT_EQ(s["shared_ids"][0]["dsos"].size(), 2u);

  json own = Json("jit dsos '" + (dir_ / "own") + "'");
  ASSERT_EQ(own["dsos"].size(), 3u);
  for (const json& d : own["dsos"]) {
    EXPECT_EQ(d["status"], "matched");
    EXPECT_EQ(d["scheme"], "symdex");
  }
  EXPECT_TRUE(own["shared_ids"].empty());

  json md5 = Json("jit dsos '" + (dir_ / "md5/jitted-4242-3.so") + "'");
  ASSERT_EQ(md5["dsos"].size(), 1u);
  EXPECT_EQ(md5["dsos"][0]["scheme"], "md5-addr");
  EXPECT_EQ(md5["dsos"][0]["symbol"], "JS:baz");

  // The parent directory: own/ and md5/ are one level down (sha1/run/ is two: not scanned).
  json all = Json("jit dsos '" + dir_.path() + "'");
  EXPECT_EQ(all["dsos"].size(), 6u);
  EXPECT_EQ(all["schemes"]["symdex"], 3);
  EXPECT_EQ(all["schemes"]["md5-addr"], 3);

  // Text: path, pid/idx, ID, load + era, the shared-ID summary.
  CommandResult t = Symdex("jit dsos '" + (dir_ / "sha1/run") + "'");
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("jitted-4242-2.so\n  pid 4242 idx 2  build-id " +
                       by["jitted-4242-2.so"]["build_id"].get<std::string>() + "  symbol JS:bar"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("load JS:bar (jitdump "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("scheme sha1-code = perf 6.17"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("(sha1-code) shared by 2 DSOs, 2 distinct functions: JS:bar, JS:foo"), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("3 DSOs read: 3 matched (sha1-code 3); 1 build-IDs shared on disk; 0 unreadable"),
            std::string::npos)
      << t.out;
}

TEST_F(JitDsosTest, AlteredNoteIsUnknownAndMissingLoadIsSaid) {
  Export("symdex", "own");
  std::string bytes = Slurp(dir_ / "own/jitted-4242-1.so");
  json before = Json("jit dsos '" + (dir_ / "own/jitted-4242-1.so") + "'");
  auto id = BuildId::FromHex(before["dsos"][0]["build_id"].get<std::string>());
  ASSERT_TRUE(id);
  size_t at = bytes.find(std::string("GNU\0", 4) + id->raw());
  ASSERT_NE(at, std::string::npos);
  bytes[at + 4] = static_cast<char>(bytes[at + 4] ^ 0x01);  // first byte of the note's ID
  WriteFile(dir_ / "altered/jitted-4242-1.so", bytes);
  json a = Json("jit dsos '" + (dir_ / "altered") + "'");
  ASSERT_EQ(a["dsos"].size(), 1u);
  const json& d = a["dsos"][0];
  EXPECT_EQ(d["status"], "unknown") << d.dump(2);
  EXPECT_TRUE(d["scheme"].is_null());
  EXPECT_NE(d["build_id"], before["dsos"][0]["build_id"]);
  ASSERT_EQ(d["loads"].size(), 1u);  // the load it claims to be, with every scheme's ID
  EXPECT_EQ(d["loads"][0]["name"], "JS:foo");
  EXPECT_TRUE(d["loads"][0]["schemes"].empty());
  EXPECT_EQ(d["loads"][0]["build_ids"].size(), 4u);
  EXPECT_EQ(d["loads_with_id"], 0);
  CommandResult t = Symdex("jit dsos '" + (dir_ / "altered") + "'");
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("unknown: the build-ID is none of the IDs"), std::string::npos) << t.out;

  // A DSO whose load was never ingested (renamed here): no-load, and its ID is known elsewhere.
  WriteFile(dir_ / "renamed/jitted-4242-99.so", Slurp(dir_ / "own/jitted-4242-2.so"));
  json r = Json("jit dsos '" + (dir_ / "renamed") + "'");
  EXPECT_EQ(r["dsos"][0]["status"], "no-load");
  EXPECT_EQ(r["dsos"][0]["loads_with_id"], 1);
  EXPECT_NE(r["dsos"][0]["message"].get<std::string>().find("no such load ingested"), std::string::npos);
  // Any name: read, but nothing to compare with.
  WriteFile(dir_ / "renamed/baz.so", Slurp(dir_ / "own/jitted-4242-3.so"));
  json u = Json("jit dsos '" + (dir_ / "renamed/baz.so") + "'");
  EXPECT_EQ(u["dsos"][0]["status"], "unnamed");
  EXPECT_TRUE(u["dsos"][0]["pid"].is_null());
}

TEST_F(JitDsosTest, UnreadableDsosAreNamedOthersStillReported) {
  Export("sha1-code", "d");
  WriteFile(dir_ / "d/jitted-1-2.so", "this is not an ELF file");
  std::string good = Slurp(dir_ / "d/jitted-4242-3.so");
  WriteFile(dir_ / "d/jitted-4242-7.so", good.substr(0, 100));  // ELF header + part of .text only
  json j = Json("jit dsos '" + (dir_ / "d") + "'", 3);
  EXPECT_EQ(j["dsos"].size(), 3u);
  ASSERT_EQ(j["unreadable"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["unreadable"][0]["path"], dir_ / "d/jitted-1-2.so");
  EXPECT_NE(j["unreadable"][0]["error"].get<std::string>().find("not an ELF file"), std::string::npos)
      << j["unreadable"][0];
  EXPECT_EQ(j["unreadable"][1]["path"], dir_ / "d/jitted-4242-7.so");
  EXPECT_NE(j["unreadable"][1]["error"].get<std::string>().find("truncated: the section headers end at byte"),
            std::string::npos)
      << j["unreadable"][1];
  EXPECT_EQ(j["shared_ids"].size(), 1u);

  CommandResult t = Symdex("jit dsos '" + (dir_ / "d") + "'");
  EXPECT_EQ(t.exit_code, 3);
  EXPECT_NE(t.err.find("cannot read " + (dir_ / "d/jitted-1-2.so") + ": not an ELF file"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find(dir_ / "d/jitted-4242-7.so"), std::string::npos) << t.err;
  EXPECT_NE(t.out.find("jitted-4242-1.so"), std::string::npos);
  EXPECT_NE(t.out.find("2 unreadable"), std::string::npos) << t.out;

  // A PATH that does not exist is also exit 3; no DSO at all is 1.
  EXPECT_EQ(Symdex("jit dsos '" + (dir_ / "nope") + "'").exit_code, 3);
  fs::create_directories(dir_ / "empty/sub");
  EXPECT_EQ(Symdex("jit dsos '" + (dir_ / "empty") + "'").exit_code, 1);
  // Without an index the IDs and on-disk collisions are still reported.
  CommandResult n = RunCommand(std::string(SYMDEX_BIN) + " --db '" + (dir_ / "none.db") + "' jit dsos --json '" +
                               (dir_ / "d/jitted-4242-1.so") + "'");
  EXPECT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(json::parse(n.out)["dsos"][0]["status"], "no-index");
}

// Real DSOs from `perf inject -j` (skipped when perf is missing or cannot record here). Which scheme
// they match depends on the perf: >= 6.17 SHA-1 (sha1-code, or sha1-symtab with the fix), older
// built with libcrypto md5-addr, older without it random IDs, which must come out "unknown" (but
// still named after their load).
TEST_F(JitDsosTest, PerfInjectDsosMatchThisPerfsEra) {
  if (RunCommand("command -v perf && command -v node").exit_code != 0) GTEST_SKIP() << "perf or node missing";
  const std::string w = dir_ / "perf";
  WriteFile(w + "/w.js",
            "function f(i){let s=0;for(let j=0;j<1000;j++)s+=j*i;return s}\n"
            "let t=0;for(let i=0;i<100000;i++)t+=f(i);console.log(t)\n");
  // No build-ID cache: perf would copy node (100 MB) into ~/.debug; an unusable --buildid-dir
  // makes it skip the cache and still write the jitted-*.so next to the dump.
  const std::string env = "cd '" + w + "' && perf --buildid-dir /dev/null/no-cache ";
  CommandResult rec = RunCommand(env +
                                 "record -N -k 1 -e cpu-clock -q -o perf.data node --perf-prof "
                                 "--interpreted-frames-native-stack w.js");
  if (rec.exit_code != 0) GTEST_SKIP() << "perf record cannot record here: " << rec.err;
  CommandResult inj = RunCommand(env + "inject -j -i perf.data -o perf.jit.data");
  ASSERT_EQ(inj.exit_code, 0) << inj.err;
  Json("jit ingest '" + w + "'");
  json d = Json("jit dsos '" + w + "'");
  ASSERT_GT(d["dsos"].size(), 10u) << "perf inject -j wrote no jitted-*.so";
  EXPECT_TRUE(d["unreadable"].empty());

  CommandResult ver = RunCommand("perf version --build-options");
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(ver.out.c_str(), "perf version %d.%d", &major, &minor), 2) << ver.out;
  const bool sha1_era = major > 6 || (major == 6 && minor >= 17);
  const bool libcrypto = ver.out.find("libcrypto: [ on") != std::string::npos;
  std::map<std::string, int> schemes;
  for (const json& x : d["dsos"]) {
    ASSERT_EQ(x["loads"].size(), 1u) << x.dump(2);
    EXPECT_EQ(x["loads"][0]["name"], x["symbol"]);
    schemes[x["status"] == "matched" ? x["scheme"].get<std::string>() : x["status"].get<std::string>()]++;
  }
  if (sha1_era) {
    EXPECT_EQ(schemes["sha1-code"] + schemes["sha1-symtab"], static_cast<int>(d["dsos"].size())) << d["counts"];
  } else if (libcrypto) {
    EXPECT_EQ(schemes["md5-addr"], static_cast<int>(d["dsos"].size())) << d["counts"];
  } else {
    EXPECT_EQ(schemes["unknown"], static_cast<int>(d["dsos"].size())) << "random IDs: " << d["counts"];
  }
}

TEST(JittedDso, NamesAndBounds) {
  auto n = ParseJittedDsoName("jitted-4242-17.so");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->pid, 4242u);
  EXPECT_EQ(n->code_index, 17u);
  EXPECT_EQ(ParseJittedDsoName("jitted-18446744073709551615-1.so"), std::nullopt);  // pid > u32
  EXPECT_TRUE(ParseJittedDsoName("jitted-1-18446744073709551615.so"));
  for (std::string bad : {"jitted-1.so", "jitted--1.so", "jitted-1-.so", "jitted-+1-2.so", "jitted-1-2.so.bak",
                          "jitted-1-2-3.so", "xjitted-1-2.so", "jitted-a-2.so"}) {
    EXPECT_EQ(ParseJittedDsoName(bad), std::nullopt) << bad;
  }
  TempDir d;
  WriteFile(d / "jitted-1-1.so", std::string(4096, 'x'));
  auto big = ReadJittedDso(d / "jitted-1-1.so", 1024);
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  EXPECT_NE(big.status().message().find(d / "jitted-1-1.so"), std::string::npos);
  auto missing = ReadJittedDso(d / "jitted-1-2.so");
  EXPECT_FALSE(missing.ok());
  fs::create_directories(d / "jitted-1-3.so");
  EXPECT_FALSE(ReadJittedDso(d / "jitted-1-3.so").ok());
}

}  // namespace
}  // namespace symdex::jit
