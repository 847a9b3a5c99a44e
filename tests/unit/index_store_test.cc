#include "server/store/index_store.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "tests/unit/store_fixture.h"
#include "tests/unit/test_util.h"

namespace symdex::store {
namespace {

using symdex::testing::SmallTarget;
using symdex::testing::TempDir;

TEST(IndexStoreTest, WritesAndReadsBackATarget) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  ASSERT_TRUE(db.ok());
  auto t = SmallTarget("host");
  t.files.push_back({"kallsyms",
                     "/proc/kallsyms",
                     kernel::InputFileStatus::kUsed,
                     "",
                     {{"module local labels (.L, L0)", 66}, {"module mapping symbols ($x, $d)", 3}}});
  t.files.push_back({"modules", "/proc/modules", kernel::InputFileStatus::kMissing, "no such file"});
  t.warnings = {"w1", "w2"};
  auto gen = ReplaceTarget(*db, t, 1700000000);
  ASSERT_TRUE(gen.ok()) << gen.status();
  EXPECT_EQ(*gen, 1);

  auto info = FindTarget(*db, "host");
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->release, "6.1.0-test");
  EXPECT_EQ((*info)->build_id, "00112233445566778899aabbccddeeff00112233");
  EXPECT_EQ((*info)->text_addr, 0xffffffff81000000ull);
  EXPECT_EQ((*info)->warnings, "w1\nw2");
  auto counts = CountTarget(*db, (*info)->id);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->modules, 2);
  EXPECT_EQ(counts->vmlinux_symbols + counts->module_symbols, static_cast<int64_t>(t.symbols.size()));
  auto files = TargetFiles(*db, (*info)->id);
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[1].detail, "no such file");
  // What the run left out of an input, by rule, as it was written.
  EXPECT_EQ((*files)[0].dropped, t.files[0].dropped);
  EXPECT_TRUE((*files)[1].dropped.empty());

  auto rows = SymbolsByName(*db, (*info)->id, "name_show", false);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 4u);  // 2 vmlinux + uio + mei; not .cold
  EXPECT_EQ((*rows)[0].module, "");
  EXPECT_EQ((*rows)[0].addr, 0xffffffff81111dd0ull);  // upper-half addresses survive int64 storage
  auto clones = SymbolsByName(*db, (*info)->id, "name_show", true);
  EXPECT_EQ(clones->size(), 5u);
  auto mod = FindModule(*db, (*info)->id, "uio");
  ASSERT_TRUE(mod.ok() && mod->has_value());
  EXPECT_EQ((*mod)->text_addr, 0xffffffffc0a00000ull);
}

TEST(IndexStoreTest, ReindexReplacesAndBumpsGeneration) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  auto t = SmallTarget("host");
  ASSERT_TRUE(ReplaceTarget(*db, t, 1).ok());
  t.symbols.resize(3);
  auto gen = ReplaceTarget(*db, t, 2);
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(*gen, 2);
  auto info = FindTarget(*db, "host");
  EXPECT_EQ(CountTarget(*db, (*info)->id)->vmlinux_symbols + CountTarget(*db, (*info)->id)->module_symbols, 3);
  EXPECT_EQ(ListTargets(*db)->size(), 1u);
  // No orphans from the first version.
  auto st = db->Prepare("SELECT COUNT(*) FROM symbols");
  ASSERT_TRUE(*st->Step());
  EXPECT_EQ(st->Int(0), 3);
}

int64_t Rows(Db& db, const std::string& sql) {
  auto st = db.Prepare(sql);
  EXPECT_TRUE(st.ok()) << st.status();
  auto row = st->Step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return st->Int(0);
}

// The only target of a database is replaced by emptying whole tables; nothing of the old
// version may survive, and foreign keys are enforced again afterwards.
TEST(IndexStoreTest, ReindexOfTheOnlyTargetLeavesNoOrphans) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  auto t = SmallTarget("host");
  t.modules[0].sections = {{".text", 0xffffffffc0a00000ull}, {".data", 0xffffffffc0a10000ull}};
  t.files.push_back({"kallsyms", "/proc/kallsyms", kernel::InputFileStatus::kUsed, ""});
  t.debuginfo.push_back({.module = "uio", .status = kernel::DebugFileStatus::kNotFound});
  ASSERT_TRUE(ReplaceTarget(*db, t, 1).ok());
  auto next = SmallTarget("host");
  next.modules.resize(1);  // mei gone, uio without sections
  std::erase_if(next.symbols, [](const kernel::SymbolEntry& s) { return s.module == 1; });
  ASSERT_TRUE(ReplaceTarget(*db, next, 2).ok());
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM symbols"), static_cast<int64_t>(next.symbols.size()));
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM modules"), 1);
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM module_sections"), 0);
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM target_files"), 0);
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM target_debuginfo"), 0);
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM symbols s LEFT JOIN targets t ON t.id = s.target_id WHERE t.id IS NULL"),
            0);
  EXPECT_EQ(Rows(*db, "PRAGMA foreign_keys"), 1);
}

// With two targets in one database, replacing one must not touch the other's rows.
TEST(IndexStoreTest, ReplacingOneOfTwoTargetsLeavesTheOtherWhole) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  auto a = SmallTarget("a");
  auto b = SmallTarget("b");
  b.modules[0].sections = {{".text", 0xffffffffc0a00000ull}};
  b.files.push_back({"kallsyms", "/b/kallsyms", kernel::InputFileStatus::kUsed, ""});
  b.debuginfo.push_back({.module = "uio", .status = kernel::DebugFileStatus::kNotFound});
  ASSERT_TRUE(ReplaceTarget(*db, a, 1).ok());
  ASSERT_TRUE(ReplaceTarget(*db, b, 1).ok());
  a.symbols.resize(4);
  a.modules[0].sections = {{".text", 0xffffffffc0b00000ull}};
  ASSERT_TRUE(ReplaceTarget(*db, a, 2).ok());
  auto bi = FindTarget(*db, "b");
  ASSERT_TRUE(bi.ok() && bi->has_value());
  auto bc = CountTarget(*db, (*bi)->id);
  EXPECT_EQ(bc->modules, 2);
  EXPECT_EQ(bc->vmlinux_symbols + bc->module_symbols, static_cast<int64_t>(b.symbols.size()));
  EXPECT_EQ(TargetFiles(*db, (*bi)->id)->size(), 1u);
  EXPECT_EQ(TargetDebugInfo(*db, (*bi)->id)->size(), 1u);
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM symbols"), static_cast<int64_t>(b.symbols.size() + 4));
  EXPECT_EQ(Rows(*db, "SELECT COUNT(*) FROM module_sections"), 2);  // b's and a's new one
  EXPECT_EQ(Rows(*db, "PRAGMA foreign_keys"), 1);
}

TEST(IndexStoreTest, FailedReindexLeavesThePreviousVersionIntact) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  auto good = SmallTarget("host");
  ASSERT_TRUE(ReplaceTarget(*db, good, 1).ok());
  auto bad = SmallTarget("host");
  bad.symbols.resize(2);
  // A debug file that does not exist: violates the foreign key, after all other inserts.
  bad.debuginfo.push_back({.module = "", .debug_file_id = 424242, .status = kernel::DebugFileStatus::kCached});
  EXPECT_FALSE(ReplaceTarget(*db, bad, 2).ok());
  auto info = FindTarget(*db, "host");
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->generation, 1);
  auto c = CountTarget(*db, (*info)->id);
  EXPECT_EQ(c->vmlinux_symbols + c->module_symbols, static_cast<int64_t>(good.symbols.size()));
}

TEST(IndexStoreTest, ReaderSnapshotNeverSeesHalfAReindex) {
  TempDir d;
  auto writer = OpenIndex(d / "i.db", IndexUse::kCreate);
  auto t = SmallTarget("host");
  ASSERT_TRUE(ReplaceTarget(*writer, t, 1).ok());
  auto reader = OpenIndex(d / "i.db", IndexUse::kRead);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE(reader->Exec("BEGIN").ok());
  auto before = FindTarget(*reader, "host");
  ASSERT_EQ((*before)->generation, 1);
  t.symbols.resize(5);
  ASSERT_TRUE(ReplaceTarget(*writer, t, 2).ok());
  // Same read transaction: still the whole old version.
  auto during = FindTarget(*reader, "host");
  EXPECT_EQ((*during)->generation, 1);
  auto c = CountTarget(*reader, (*during)->id);
  EXPECT_EQ(c->vmlinux_symbols + c->module_symbols, static_cast<int64_t>(SmallTarget("host").symbols.size()));
  ASSERT_TRUE(reader->Exec("COMMIT").ok());
  auto after = FindTarget(*reader, "host");
  EXPECT_EQ((*after)->generation, 2);
}

// The only target's symbols are loaded into an empty table and indexed afterwards
// (IndexesAfterLoad): the schema's indexes are all there after the write, and used.
TEST(IndexStoreTest, ReplacingTheOnlyTargetKeepsTheSchemasIndexes) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  ASSERT_TRUE(db.ok());
  auto indexes = [&] {
    auto st = db->Prepare(
        "SELECT name || ': ' || sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL "
        "ORDER BY name");
    EXPECT_TRUE(st.ok());
    return *st->TextColumn();
  };
  const std::vector<std::string> schema = indexes();
  ASSERT_GE(std::count_if(schema.begin(), schema.end(), [](const std::string& s) { return s.starts_with("symbols_"); }),
            4);
  for (int round = 0; round < 2; ++round) {  // a new database, then a re-index of its target
    ASSERT_TRUE(ReplaceTarget(*db, SmallTarget("host"), 1700000000 + round).ok());
    EXPECT_EQ(indexes(), schema) << round;
  }
  auto plan = db->Prepare("EXPLAIN QUERY PLAN SELECT id FROM symbols WHERE target_id = 1 AND name = 'x'");
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(*plan->Step());
  EXPECT_NE(plan->Text(3).find("symbols_by_name"), std::string::npos) << plan->Text(3);
}

}  // namespace
}  // namespace symdex::store
