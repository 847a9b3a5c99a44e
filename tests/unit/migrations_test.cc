#include "server/store/migrations.h"
#include "server/store/open_index.h"

#include <gtest/gtest.h>

#include "tests/unit/test_util.h"

namespace symdex::store {
namespace {

using symdex::testing::TempDir;
using symdex::testing::WriteFile;

TEST(MigrationsTest, EmbeddedMigrationsAreNumberedFromOne) {
  const auto& m = Migrations();
  ASSERT_GE(m.size(), 2u);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i].version, static_cast<int>(i + 1));
}

TEST(MigrationsTest, FreshDatabaseGetsLatestSchemaInWalMode) {
  TempDir d;
  auto db = OpenIndex(d / "sub/dir/index.db", IndexUse::kCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*db->UserVersion(), Migrations().back().version);
  auto st = db->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(*st->Step());
  EXPECT_EQ(st->Text(0), "wal");
}

TEST(MigrationsTest, OldDatabaseIsMigratedKeepingItsData) {
  TempDir d;
  const std::string path = d / "old.db";
  {
    auto db = Db::Open(path, Db::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    std::vector<Migration> first{Migrations()[0]};
    ASSERT_TRUE(Migrate(*db, first).ok());
    ASSERT_EQ(*db->UserVersion(), 1);
    ASSERT_TRUE(db->Exec("INSERT INTO targets (name, kind, source, indexed_at, generation) "
                         "VALUES ('old', 'live', '/proc/kallsyms', 1, 4)")
                    .ok());
  }
  // A read-only open refuses a database that needs migrating...
  auto ro = OpenIndex(path, IndexUse::kRead);
  EXPECT_EQ(ro.status().code(), absl::StatusCode::kFailedPrecondition);
  // ...a writable one migrates it and keeps the rows.
  auto db = OpenIndex(path, IndexUse::kCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*db->UserVersion(), Migrations().back().version);
  auto st = db->Prepare("SELECT name, generation, warnings FROM targets");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(*st->Step());
  EXPECT_EQ(st->Text(0), "old");
  EXPECT_EQ(st->Int(1), 4);
  EXPECT_EQ(st->Text(2), "");  // column added by migration 2
  EXPECT_TRUE(db->Exec("SELECT COUNT(*) FROM target_files").ok());
}

// The embedded CLI's open (kAsk): an index of an older schema is migrated in place for a user
// who may write it, and answered through a read-only connection; a missing one says the cure.
TEST(MigrationsTest, AskingMigratesAnOlderIndexAndReadsItReadOnly) {
  TempDir d;
  const std::string path = d / "old.db";
  {
    auto db = Db::Open(path, Db::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(Migrate(*db, {Migrations()[0]}).ok());
  }
  auto db = OpenIndex(path, IndexUse::kAsk);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*db->UserVersion(), Migrations().back().version);
  EXPECT_FALSE(db->Exec("CREATE TABLE t (x)").ok()) << "the answering connection is read-only";
  auto missing = OpenIndex(d / "none.db", IndexUse::kAsk);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(missing.status().message()).find("run 'symdex index' first"), std::string::npos);
}

TEST(MigrationsTest, NewerDatabaseIsRefused) {
  TempDir d;
  {
    auto db = OpenIndex(d / "new.db", IndexUse::kCreate);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec("PRAGMA user_version=999").ok());
  }
  auto db = OpenIndex(d / "new.db", IndexUse::kCreate);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(std::string(db.status().message()).find("newer than this symdex"), std::string::npos);
}

TEST(MigrationsTest, NotADatabaseIsAClearError) {
  TempDir d;
  WriteFile(d / "junk.db", std::string(8192, 'x'));
  auto db = OpenIndex(d / "junk.db", IndexUse::kCreate);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(std::string(db.status().message()).find("junk.db"), std::string::npos) << db.status();
}

TEST(MigrationsTest, FailedMigrationRollsBack) {
  TempDir d;
  auto db = Db::Open(d / "x.db", Db::Mode::kReadWriteCreate);
  ASSERT_TRUE(db.ok());
  std::vector<Migration> bad{Migrations()[0], {2, "002_broken", "CREATE TABLE t2 (a); THIS IS NOT SQL;"}};
  EXPECT_FALSE(Migrate(*db, bad).ok());
  EXPECT_EQ(*db->UserVersion(), 1);
  EXPECT_FALSE(db->Exec("SELECT * FROM t2").ok());  // the partial migration left nothing behind
}

}  // namespace
}  // namespace symdex::store
