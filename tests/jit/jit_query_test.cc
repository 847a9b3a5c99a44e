// server/query/jit_query.h on an index ingested from synthetic dumps and maps: the one JIT
// lookup the CLI and the daemon both call (jitdump first, then the perf map; CODE_MOVE; lines;
// instance choice), build-ID lookup with and without JIT hits, export data, scheme arguments.
#include "server/query/jit_query.h"

#include <gtest/gtest.h>

#include "server/jit/ingest.h"
#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "tests/jit/jitdump_writer.h"
#include "tests/unit/test_util.h"

namespace symdex::query {
namespace {

using jit::testing::JitdumpWriter;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

class JitQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = store::OpenIndex(dir_ / "index.db", store::IndexUse::kCreate);
    ASSERT_TRUE(db.ok()) << db.status();
    db_.emplace(std::move(*db));
    // pid 4242: f at 0x1000 (lines at +0x4 and +0x10), g at 0x2000 moved to 0x3000 at time 50.
    JitdumpWriter w;
    w.Header()
        .DebugInfo(9, 0x1000, {{0x1004, 7, 3, "app.js"}, {0x1010, 9, 1, "\xff"}})
        .CodeLoad(10, 4242, 1, 0x1000, 1, "JS:f app.js:1", std::string(0x40, '\x90'))
        .CodeLoad(20, 4242, 1, 0x2000, 2, "JS:g app.js:5", std::string(0x20, '\xc3'))
        .CodeMove(50, 4242, 1, 0x2000, 0x3000, 0x20, 2)
        .Close(60);
    WriteFile(dir_ / "jit-4242.dump", w.bytes());
    // pid 77: a perf map only.
    WriteFile(dir_ / "perf-77.map", "5000 100 mapped_fn\n");
    for (const char* f : {"jit-4242.dump", "perf-77.map"}) {
      jit::IngestReport r = jit::IngestJitFile(*db_, dir_ / f);
      ASSERT_NE(r.status, "error") << f << ": " << r.message;
    }
  }

  TempDir dir_;
  std::optional<store::Db> db_;
};

TEST_F(JitQueryTest, AddrFindsLoadLineMoveAndMisses) {
  auto a = JitAddresses(*db_, {.pid = 4242, .addresses = {0x1012, 0x1002, 0x3008, 0x2008, 0x9999}});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->instance);
  EXPECT_EQ(a->instance->pid, 4242u);
  ASSERT_EQ(a->results.size(), 5u);

  const auto& f = a->results[0].function;
  ASSERT_TRUE(f);
  EXPECT_EQ(f->name, "JS:f app.js:1");
  EXPECT_EQ(f->DsoName(), "jitted-4242-1.so");
  ASSERT_TRUE(f->line);
  EXPECT_EQ(f->line->file, "app.js");  // the repeat marker resolved
  EXPECT_EQ(f->line->line, 9u);
  EXPECT_EQ(f->line_entries, 2);
  EXPECT_EQ(f->build_ids.size(), 4u);  // every scheme

  ASSERT_TRUE(a->results[1].function);
  EXPECT_FALSE(a->results[1].function->line) << "before the first DEBUG_INFO entry";

  const auto& moved = a->results[2].function;
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->name, "JS:g app.js:5");
  EXPECT_EQ(moved->placed_by, "move");
  EXPECT_EQ(moved->addr, 0x3000u);

  // The old place still answers (nothing else is there), marked as moved away at 50.
  const auto& old = a->results[3].function;
  ASSERT_TRUE(old);
  EXPECT_EQ(old->until, std::optional<uint64_t>(50));

  EXPECT_FALSE(a->results[4].found());

  // At time 30 the code of g was still at 0x2000 (from its load; it leaves at 50) and nothing
  // was at 0x3000.
  auto at30 = JitAddresses(*db_, {.pid = 4242, .time = 30, .addresses = {0x2008, 0x3008}});
  ASSERT_TRUE(at30.ok()) << at30.status();
  ASSERT_TRUE(at30->results[0].function);
  EXPECT_EQ(at30->results[0].function->placed_by, "load");
  EXPECT_EQ(at30->results[0].function->until, std::optional<uint64_t>(50));
  EXPECT_FALSE(at30->results[1].found());
}

TEST_F(JitQueryTest, PerfMapWhenNoDumpAndNotFoundWhenNothing) {
  auto a = JitAddresses(*db_, {.pid = 77, .addresses = {0x5010, 0x6000}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->instance);
  ASSERT_TRUE(a->results[0].perf_map);
  EXPECT_EQ(a->results[0].perf_map->name, "mapped_fn");
  EXPECT_EQ(a->results[0].perf_map->map_line, 1u);
  EXPECT_FALSE(a->results[1].found());

  auto none = JitAddresses(*db_, {.pid = 1, .addresses = {0x10}});
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  EXPECT_NE(none.status().message().find("jit-1.dump"), std::string::npos) << none.status();
}

TEST_F(JitQueryTest, BuildIdWithAndWithoutJitHits) {
  auto a = JitAddresses(*db_, {.pid = 4242, .addresses = {0x1000}});
  ASSERT_TRUE(a.ok() && a->results[0].function) << a.status();
  const std::string id = a->results[0].function->build_ids.at("symdex");
  std::string upper = id;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));

  auto with = LookupBuildId(*db_, upper, true);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->build_id, id);  // canonical lower-case
  ASSERT_EQ(with->jitted.size(), 1u);
  EXPECT_EQ(with->jitted[0].scheme, "symdex");
  EXPECT_EQ(with->jitted[0].load.name, "JS:f app.js:1");
  EXPECT_EQ(with->jitted[0].load.instance.pid, 4242u);

  auto without = LookupBuildId(*db_, id, false);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(without->empty()) << "an unprivileged daemon peer must not see JIT loads";

  auto bad = LookupBuildId(*db_, std::string(200, 'z'), true, 80);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_LT(bad.status().message().size(), 120u) << "quoted in at most 80 characters";
}

TEST_F(JitQueryTest, SchemesCollisionsAndExport) {
  EXPECT_EQ(*JitSchemeArg("sha1-code"), "sha1-code");
  auto bad = JitSchemeArg("bogus");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("bogus"), std::string::npos);

  auto groups = JitCollisionGroups(*db_, std::string("sha1-code"));
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_TRUE(groups->empty()) << "two different codes";
  auto counts = JitSchemeCounts(*db_, std::string("symdex"));
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ(counts->at("symdex").loads, 2);

  auto inst = JitExportInstances(*db_, 4242, std::nullopt);
  ASSERT_TRUE(inst.ok()) << inst.status();
  ASSERT_EQ(inst->size(), 1u);
  auto loads = JitExportLoads(*db_, inst->front(), "symdex");
  ASSERT_TRUE(loads.ok()) << loads.status();
  ASSERT_EQ(loads->size(), 2u);
  EXPECT_EQ((*loads)[0].code, std::string(0x40, '\x90'));
  ASSERT_EQ((*loads)[0].lines.size(), 2u);
  EXPECT_EQ((*loads)[0].lines[0].offset, 4u);
  EXPECT_EQ((*loads)[0].build_id.ToHex(), (*loads)[0].function.build_ids.at("symdex"));
  EXPECT_TRUE(absl::IsNotFound(JitExportInstances(*db_, 5, std::nullopt).status()));
}

}  // namespace
}  // namespace symdex::query
