// `symdex jit ...` and `symdex buildid` through the built binary: what a user or a script sees.
// Hand-built dumps (tests/jit/jitdump_writer.h) for MOVE/time/DEBUG_INFO/truncation/errors, and a
// real Node 20 dump for the build-ID schemes and the exported DSOs (node is required).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "server/ingest/jitdump.h"
#include "server/jit/build_ids.h"
#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "tests/jit/jitdump_writer.h"
#include "tests/jit/node_script.h"
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

class JitCliTest : public symdex::testing::SymdexDbTest {};

using symdex::testing::kCodeA;
using symdex::testing::kCodeB;
using symdex::testing::kPid;

// pid 4242: foo at 0x1000 (t=100, lines), bar at 0x2000 (t=200, same code as foo), foo moved to
// 0x3000 at t=300, baz loaded into foo's old place 0x1000 at t=400.
JitdumpWriter HandDump() {
  JitdumpWriter w;
  w.Header({.pid = kPid, .timestamp = 77});
  w.DebugInfo(99, 0x1000, {{0x1000, 10, 1, "/src/app.js"}, {0x1010, 11, 5, "\xff"}, {0x1020, 20, 2, "/src/lib.js"}});
  w.CodeLoad(100, kPid, 1, 0x1000, 1, "JS:foo", kCodeA);
  w.CodeLoad(200, kPid, 1, 0x2000, 2, "JS:bar", kCodeA);
  w.CodeMove(300, kPid, 1, 0x1000, 0x3000, kCodeA.size(), 1);
  w.CodeLoad(400, kPid, 1, 0x1000, 3, "JS:baz", kCodeB);
  return w;
}

TEST_F(JitCliTest, AddrFollowsMovesAndTime) {
  WriteFile(dir_ / "d/jit-4242.dump", HandDump().bytes());
  json in = Json("jit ingest '" + (dir_ / "d") + "'");
  ASSERT_EQ(in["files"].size(), 1u);
  EXPECT_EQ(in["files"][0]["loads"], 3);
  EXPECT_EQ(in["files"][0]["moves"], 1);
  EXPECT_EQ(in["files"][0]["status"], "complete");

  // At t=150 foo is at 0x1000; line: nearest entry <= 0x1014 is line 11 of app.js ("\xff" repeat).
  json a = Json("jit addr --pid 4242 --time 150 0x1014");
  json f = a["addresses"][0]["function"];
  EXPECT_EQ(f["name"], "JS:foo");
  EXPECT_EQ(f["code_index"], 1);
  EXPECT_EQ(f["dso"], "jitted-4242-1.so");
  EXPECT_EQ(f["source"]["file"], "/src/app.js");
  EXPECT_EQ(f["source"]["line"], 11);
  EXPECT_EQ(f["build_ids"].size(), 4u);
  // After the move (t=350) foo is at 0x3000 and its lines moved with it; 0x1014 is nothing.
  json moved = Json("jit addr --pid 4242 --time 350 0x3024");
  EXPECT_EQ(moved["addresses"][0]["function"]["name"], "JS:foo");
  EXPECT_EQ(moved["addresses"][0]["function"]["source"]["file"], "/src/lib.js");
  EXPECT_EQ(moved["addresses"][0]["function"]["placed_by"], "move");
  // Latest (no --time): baz owns 0x1000.
  json latest = Json("jit addr --pid 4242 0x1004");
  EXPECT_EQ(latest["addresses"][0]["function"]["name"], "JS:baz");
  EXPECT_TRUE(latest["addresses"][0]["function"]["source"].is_null());
  // Before anything was loaded: not found, exit 1; text mode says so.
  Json("jit addr --pid 4242 --time 50 0x1004", 1);
  CommandResult miss = Symdex("jit addr --pid 4242 0x9999");
  EXPECT_EQ(miss.exit_code, 1);
  EXPECT_NE(miss.out.find("not covered"), std::string::npos) << miss.out;
  // Unknown pid: exit 3 with advice; bad address: usage error 2.
  EXPECT_EQ(Symdex("jit addr --pid 1 0x1000").exit_code, 3);
  EXPECT_EQ(Symdex("jit addr --pid 4242 zz").exit_code, 2);
}

TEST_F(JitCliTest, ReingestIsIdempotentAndTruncatedDumpsGrow) {
  std::string full = HandDump().bytes();
  const std::string path = dir_ / "jit-4242.dump";
  // Cut inside the second CODE_LOAD: the first load (with its DEBUG_INFO) is ingested.
  size_t cut = HandDump().record_offsets()[2] + 20;
  WriteFile(path, full.substr(0, cut));
  json t = Json("jit ingest '" + path + "'");
  EXPECT_EQ(t["files"][0]["status"], "truncated");
  EXPECT_EQ(t["files"][0]["loads"], 1);
  EXPECT_NE(t["files"][0]["message"].get<std::string>().find("offset"), std::string::npos);
  WriteFile(path, full);
  json g = Json("jit ingest '" + path + "'");
  EXPECT_EQ(g["files"][0]["loads"], 2);
  EXPECT_EQ(g["files"][0]["moves"], 1);
  json again = Json("jit ingest '" + path + "'");
  EXPECT_EQ(again["files"][0]["loads"], 0);
  EXPECT_EQ(again["files"][0]["status"], "unchanged");
  // "unchanged" is that run's report; the source keeps what it was found to be (a watcher that
  // rescans an idle dump must not change answers between two identical queries).
  json after = Json("jit addr --pid 4242 0x2004");
  EXPECT_EQ(after["addresses"][0]["function"]["instance"]["status"], "complete") << after.dump();
  // A copy at another path is the same process instance: nothing new.
  WriteFile(dir_ / "copy/jit-4242.dump", full);
  json copy = Json("jit ingest '" + (dir_ / "copy/jit-4242.dump") + "'");
  EXPECT_EQ(copy["files"][0]["loads"], 0);
  EXPECT_EQ(copy["files"][0]["duplicates"], 4);  // 3 loads + 1 move
  json c = Json("jit collisions --scheme symdex", 1);
  EXPECT_EQ(c["shared_ids"], 0);
}

TEST_F(JitCliTest, MalformedRecordNamesOffsetAndKeepsData) {
  JitdumpWriter w = HandDump();
  size_t bad_at = w.bytes().size();
  w.Record(0, 500, std::string(10, 'x'), 8);  // total_size 8 < 16: cannot be skipped
  const std::string path = dir_ / "jit-4242.dump";
  WriteFile(path, w.bytes());
  CommandResult r = Symdex("jit ingest '" + path + "'");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(bad_at)), std::string::npos) << r.err;
  // The records before it are in.
  EXPECT_EQ(Json("jit addr --pid 4242 0x2004")["addresses"][0]["function"]["name"], "JS:bar");
  // Not a jitdump at all.
  WriteFile(dir_ / "jit-1.dump", "hello world, not a dump");
  CommandResult bad = Symdex("jit ingest '" + (dir_ / "jit-1.dump") + "'");
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_NE(bad.err.find("offset 0"), std::string::npos) << bad.err;
  EXPECT_EQ(Symdex("jit ingest '" + (dir_ / "missing") + "'").exit_code, 3);
}

TEST_F(JitCliTest, PerfMapAnswersWhenNoDumpExists) {
  WriteFile(dir_ / "perf-77.map", "1000 40 LazyCompile:~foo /app/a.js:1\n0x1020 0x10 later wins\n2000 10 part");
  json in = Json("jit ingest '" + (dir_ / "perf-77.map") + "'");
  EXPECT_EQ(in["files"][0]["kind"], "perf-map");
  EXPECT_EQ(in["files"][0]["map_entries"], 2);
  EXPECT_EQ(in["files"][0]["status"], "truncated");
  json a = Json("jit addr --pid 77 1004 1024");
  EXPECT_EQ(a["addresses"][0]["from"], "perf-map");
  EXPECT_EQ(a["addresses"][0]["function"]["name"], "LazyCompile:~foo /app/a.js:1");
  EXPECT_EQ(a["addresses"][1]["function"]["name"], "later wins");
  Json("jit addr --pid 77 2004", 1);
  WriteFile(dir_ / "perf-77.map", "1000 40 LazyCompile:~foo /app/a.js:1\n0x1020 0x10 later wins\n2000 10 part\n");
  Json("jit ingest '" + (dir_ / "perf-77.map") + "'");
  EXPECT_EQ(Json("jit addr --pid 77 2004")["addresses"][0]["function"]["name"], "part");
}

TEST_F(JitCliTest, ExportedDsosAreCleanAndSymbolize) {
  WriteFile(dir_ / "jit-4242.dump", HandDump().bytes());
  Json("jit ingest '" + (dir_ / "jit-4242.dump") + "'");
  json e = Json("jit export --out '" + (dir_ / "out") + "' --pid 4242");
  EXPECT_EQ(e["written"], 3);
  EXPECT_EQ(e["distinct_build_ids"], 3);
  EXPECT_EQ(e["with_debug_line"], 1);
  const std::string foo = dir_ / "out/jitted-4242-1.so";
  for (std::string tool : {"readelf -a -W", "eu-readelf -a", "eu-elflint --gnu-ld"}) {
    CommandResult r = RunCommand(tool + " '" + foo + "'");
    EXPECT_EQ(r.exit_code, 0) << tool << r.err;
    EXPECT_EQ(r.err, "") << tool;
  }
  CommandResult re = RunCommand("readelf -h -l -s -n -W '" + foo + "'");
  EXPECT_NE(re.out.find("DYN"), std::string::npos);
  EXPECT_NE(re.out.find("FUNC    LOCAL  DEFAULT    1 JS:foo"), std::string::npos) << re.out;
  EXPECT_NE(re.out.find("0x0000000000000080 0x0000000000000080"), std::string::npos) << re.out;  // PT_LOAD
  json a = Json("jit addr --pid 4242 --time 150 0x1000");
  std::string id = a["addresses"][0]["build_id"];
  EXPECT_NE(re.out.find("Build ID: " + id), std::string::npos) << re.out;
  // 0x80 + 0x14 -> line 11, 0x80 + 0x24 -> lib.js:20.
  CommandResult ls = RunCommand("llvm-symbolizer-14 --obj='" + foo + "' 0x94 0xa4");
  EXPECT_NE(ls.out.find("JS:foo\n/src/app.js:11:5"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("JS:foo\n/src/lib.js:20:2"), std::string::npos) << ls.out;
  CommandResult ea = RunCommand("eu-addr2line -f -e '" + foo + "' 0x94");
  EXPECT_EQ(ea.out, "JS:foo\n/src/app.js:11:5\n") << ea.err;
  // buildid finds the jitted DSO; the sha1-code ID names foo and bar (same code).
  json b = Json("buildid " + id);
  EXPECT_EQ(b["jitted"].size(), 1u);
  EXPECT_EQ(b["jitted"][0]["dso"], "jitted-4242-1.so");
  std::string sha1 = a["addresses"][0]["function"]["build_ids"]["sha1-code"];
  EXPECT_EQ(Json("buildid " + sha1)["jitted"].size(), 2u);
  Json("buildid 00112233", 1);
  // sha1-code export: two files, one ID.
  json e2 = Json("jit export --out '" + (dir_ / "out2") + "' --scheme sha1-code");
  EXPECT_EQ(e2["distinct_build_ids"], 2);
  EXPECT_EQ(Symdex("jit export --out x --scheme sha2").exit_code, 2);
}

// ---- real Node dump ----------------------------------------------------------------------

constexpr const char* kScript = symdex::testing::kNodeJitScript;

TEST_F(JitCliTest, NodeDumpSchemesCollisionsAndExport) {
  WriteFile(dir_ / "node/script.js", kScript);
  CommandResult node =
      RunCommand("cd '" + (dir_ / "node") + "' && node --perf-prof --interpreted-frames-native-stack script.js");
  ASSERT_EQ(node.exit_code, 0) << "node is required: " << node.err;
  json in = Json("jit ingest '" + (dir_ / "node") + "'");
  ASSERT_EQ(in["files"].size(), 1u);
  const std::string dump_path = in["files"][0]["path"];
  EXPECT_GT(in["files"][0]["loads"].get<int>(), 500);

  // Every stored ID equals an independent computation from the parsed dump.
  auto dump = ParseJitdump(Slurp(dump_path), dump_path);
  ASSERT_TRUE(dump.ok()) << dump.status();
  auto db = store::OpenIndex(dir_ / "index.db", store::IndexUse::kRead);
  ASSERT_TRUE(db.ok()) << db.status();
  auto q = db->Prepare(
      "SELECT b.scheme, b.build_id FROM jit_build_ids b JOIN jit_loads l ON l.id=b.load_id "
      "WHERE l.file_offset=?");
  ASSERT_TRUE(q.ok());
  size_t checked = 0;
  for (const Record& r : dump->records) {
    const auto* load = std::get_if<CodeLoad>(&r);
    if (!load) continue;
    q->Reset();
    q->Bind(1, static_cast<int64_t>(load->prefix.file_offset));
    std::map<std::string, std::string> stored;
    while (*q->Step()) stored[q->Text(0)] = q->Text(1);
    for (JitBuildIdScheme s : {JitBuildIdScheme::kMd5Addr, JitBuildIdScheme::kSha1Code, JitBuildIdScheme::kSha1Symtab,
                               JitBuildIdScheme::kSymdex}) {
      auto id = JitBuildId(s, dump->header, *load);
      ASSERT_TRUE(id.ok());
      EXPECT_EQ(stored[std::string(JitBuildIdSchemeName(s))], id->ToHex()) << load->name;
    }
    ++checked;
  }
  EXPECT_EQ(static_cast<int>(checked), in["files"][0]["loads"].get<int>());

  json c = Json("jit collisions");
  std::map<std::string, json> per;
  for (const json& s : c["schemes"]) per[s["scheme"]] = s;
  EXPECT_GT(per["sha1-code"]["ids_merging_distinct_names"].get<int>(), 0);
  size_t biggest = 0;
  for (const json& g : per["sha1-code"]["groups"]) biggest = std::max<size_t>(biggest, g["distinct_names"]);
  EXPECT_GE(biggest, 50u) << "the interpreter trampoline copies of fn_0..fn_49 share one sha1-code ID";
  EXPECT_EQ(per["sha1-symtab"]["ids_merging_distinct_names"], 0);
  EXPECT_EQ(per["symdex"]["shared_ids"], 0);

  // Export: clean ELF; the symbolizers name the JS function and, with DEBUG_INFO, its line.
  json e = Json("jit export --out '" + (dir_ / "out") + "'");
  EXPECT_EQ(e["written"], in["files"][0]["loads"]);
  EXPECT_EQ(e["distinct_build_ids"], e["written"]);
  EXPECT_GT(e["with_debug_line"].get<int>(), 0);
  size_t checked_lines = 0, checked_names = 0;
  for (const json& f : e["files"]) {
    std::string name = f["name"];
    bool lines = f["lines"].get<int>() > 0;
    if (!lines && !(name.starts_with("JS:~fn_") && checked_names < 5)) continue;
    if (lines && checked_lines >= 5) continue;
    (lines ? checked_lines : checked_names)++;
    std::string p = f["path"];
    for (std::string tool : {"readelf -a -W", "eu-readelf -a"}) {
      CommandResult r = RunCommand(tool + " '" + p + "' >/dev/null");
      EXPECT_EQ(r.exit_code, 0);
      EXPECT_EQ(r.err, "") << tool << " " << p;
    }
    CommandResult ls = RunCommand("llvm-symbolizer-14 --obj='" + p + "' 0x80");
    EXPECT_TRUE(ls.out.starts_with(name + "\n")) << ls.out;
    CommandResult ea = RunCommand("eu-addr2line -f -e '" + p + "' 0x80");
    EXPECT_TRUE(ea.out.starts_with(name + "\n")) << ea.out;
    if (lines) {
      EXPECT_EQ(ls.out.find("??:0"), std::string::npos) << ls.out;
      EXPECT_EQ(ea.out.find("??:0"), std::string::npos) << ea.out;
    }
  }
  EXPECT_EQ(checked_lines, 5u);
  EXPECT_EQ(checked_names, 5u);
}

}  // namespace
}  // namespace symdex::jit
