// BulkInsert (server/store/sqlite_db.h): rows go through multi-row statements of kBatchRows and
// one shorter statement for the rest; every row lands once, in order, whatever the count, and a
// batch that fails leaves none of its rows behind.
#include "server/store/sqlite_db.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/unit/test_util.h"

namespace symdex::store {
namespace {

using symdex::testing::TempDir;

Db BulkTestDb(const TempDir& d) {
  auto db = Db::Open(d / "t.db", Db::Mode::kReadWriteCreate);
  EXPECT_TRUE(db.ok()) << db.status();
  EXPECT_TRUE(db->Exec("CREATE TABLE t (a INTEGER NOT NULL, b TEXT)").ok());
  return std::move(*db);
}

std::vector<std::pair<int64_t, std::string>> BulkTestRows(Db& db) {
  auto st = db.Prepare("SELECT a, COALESCE(b, '(null)') FROM t ORDER BY rowid");
  EXPECT_TRUE(st.ok());
  std::vector<std::pair<int64_t, std::string>> out;
  while (*st->Step()) out.emplace_back(st->Int(0), st->Text(1));
  return out;
}

TEST(BulkInsertTest, EveryRowOnceInOrderForAnyCount) {
  constexpr size_t kB = BulkInsert::kBatchRows;
  for (size_t n : {size_t{0}, size_t{1}, kB - 1, kB, kB + 1, 2 * kB, 3 * kB + 5}) {
    TempDir d;
    Db db = BulkTestDb(d);
    std::vector<std::string> names;
    for (size_t i = 0; i < n; ++i) names.push_back("name" + std::to_string(i * 7));
    auto ins = BulkInsert::Prepare(db, "t", {"a", "b"}, n);
    ASSERT_TRUE(ins.ok()) << ins.status();
    for (size_t i = 0; i < n; ++i) {
      auto r = ins->Add();
      ASSERT_TRUE(r.ok()) << r.status();
      r->Bind(1, static_cast<int64_t>(i));
      if (i % 3 == 2)
        r->BindNull(2);
      else
        r->BindStatic(2, names[i]);
    }
    ASSERT_TRUE(ins->Finish().ok()) << n;
    auto rows = BulkTestRows(db);
    ASSERT_EQ(rows.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(rows[i].first, static_cast<int64_t>(i)) << n;
      EXPECT_EQ(rows[i].second, i % 3 == 2 ? "(null)" : names[i]) << n << " row " << i;
    }
  }
}

TEST(BulkInsertTest, MoreOrFewerRowsThanAnnouncedIsAnError) {
  TempDir d;
  Db db = BulkTestDb(d);
  auto more = BulkInsert::Prepare(db, "t", {"a", "b"}, 1);
  ASSERT_TRUE(more.ok());
  ASSERT_TRUE(more->Add().ok());
  auto extra = more->Add();
  EXPECT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("more than the 1 rows announced"), std::string::npos) << extra.status();

  auto fewer = BulkInsert::Prepare(db, "t", {"a", "b"}, 3);
  ASSERT_TRUE(fewer.ok());
  auto r = fewer->Add();
  ASSERT_TRUE(r.ok());
  r->Bind(1, int64_t{1});
  absl::Status s = fewer->Finish();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 rows of the 3 announced"), std::string::npos) << s;
}

// A NOT NULL violation in a batch: the statement fails, and none of that batch's rows stay
// (SQLite's statement journal — kept in memory — undoes the rows before the bad one); the
// batches before it stay (the caller's transaction decides about them).
TEST(BulkInsertTest, AFailingBatchLeavesNoneOfItsRows) {
  constexpr size_t kB = BulkInsert::kBatchRows;
  for (size_t bad : {size_t{3}, kB + 4}) {
    TempDir d;
    Db db = BulkTestDb(d);
    const size_t n = kB + 8;
    auto ins = BulkInsert::Prepare(db, "t", {"a", "b"}, n);
    ASSERT_TRUE(ins.ok());
    absl::Status failed;
    for (size_t i = 0; i < n && failed.ok(); ++i) {
      auto r = ins->Add();
      if (!r.ok()) {
        failed = r.status();
        break;
      }
      if (i == bad)
        r->BindNull(1);
      else
        r->Bind(1, static_cast<int64_t>(i));
    }
    if (failed.ok()) failed = ins->Finish();
    EXPECT_FALSE(failed.ok()) << bad;
    EXPECT_EQ(BulkTestRows(db).size(), bad < kB ? 0u : kB) << bad;
  }
}

std::vector<std::string> IndexSql(Db& db) {
  auto st = db.Prepare("SELECT sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY name");
  EXPECT_TRUE(st.ok());
  std::vector<std::string> out;
  while (*st->Step()) out.push_back(st->Text(0));
  return out;
}

// Loaded into an empty table, the rows are indexed afterwards: the same index definitions
// after Rebuild(), and the index answers for every row; a rollback restores dropped indexes; a
// table with rows keeps its indexes throughout.
TEST(IndexesAfterLoadTest, SameIndexesAfterTheLoadOrARollback) {
  TempDir d;
  Db db = BulkTestDb(d);
  ASSERT_TRUE(db.Exec("CREATE INDEX t_by_b ON t (b); CREATE INDEX t_partial ON t (a, b) WHERE a > 5").ok());
  const std::vector<std::string> before = IndexSql(db);
  ASSERT_EQ(before.size(), 2u);
  {
    auto tx = Transaction::Begin(db);
    ASSERT_TRUE(tx.ok());
    auto later = IndexesAfterLoad::Begin(db, "t");
    ASSERT_TRUE(later.ok()) << later.status();
    EXPECT_TRUE(IndexSql(db).empty());
    auto ins = BulkInsert::Prepare(db, "t", {"a", "b"}, 100);
    ASSERT_TRUE(ins.ok());
    for (int64_t i = 0; i < 100; ++i) {
      auto r = ins->Add();
      ASSERT_TRUE(r.ok());
      r->Bind(1, i).Bind(2, "b" + std::to_string(99 - i));
    }
    ASSERT_TRUE(ins->Finish().ok());
    ASSERT_TRUE(later->Rebuild().ok());
    ASSERT_TRUE(tx->Commit().ok());
  }
  EXPECT_EQ(IndexSql(db), before);
  auto q = db.Prepare("SELECT a FROM t INDEXED BY t_by_b WHERE b = 'b42'");
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Int(0), 57);
  q->Reset();

  // Rows present: nothing is dropped.
  {
    auto tx = Transaction::Begin(db);
    ASSERT_TRUE(tx.ok());
    auto later = IndexesAfterLoad::Begin(db, "t");
    ASSERT_TRUE(later.ok());
    EXPECT_EQ(IndexSql(db), before);
  }
  // Emptied and loaded in a transaction that fails: the rollback brings the indexes back.
  {
    auto tx = Transaction::Begin(db);
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(db.Exec("DELETE FROM t").ok());
    auto later = IndexesAfterLoad::Begin(db, "t");
    ASSERT_TRUE(later.ok());
    EXPECT_TRUE(IndexSql(db).empty());
  }
  EXPECT_EQ(IndexSql(db), before);
  EXPECT_EQ(BulkTestRows(db).size(), 100u);
}

// CheckpointLater: while it lives a commit past SQLite's 1,000-page threshold leaves the pages in
// the WAL (the database file does not grow); Checkpoint() copies them; afterwards the connection
// has its own threshold back, and the next such commit checkpoints by itself.
int64_t FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

int64_t AutoCheckpointPages(Db& db) {
  auto st = db.Prepare("PRAGMA wal_autocheckpoint");
  EXPECT_TRUE(st.ok());
  EXPECT_TRUE(*st->Step());
  return st->Int(0);
}

void WriteMegabytes(Db& db, int mb) {  // ~mb MiB of new pages in one transaction
  auto tx = Transaction::Begin(db);
  ASSERT_TRUE(tx.ok()) << tx.status();
  auto ins = db.Prepare("INSERT INTO t (a, b) VALUES (?1, ?2)");
  ASSERT_TRUE(ins.ok());
  const std::string blob(1000, 'x');
  for (int i = 0; i < mb * 1024; ++i) {
    ins->Bind(1, int64_t{i}).Bind(2, blob);
    ASSERT_TRUE(ins->Run().ok());
  }
  ASSERT_TRUE(tx->Commit().ok());
}

TEST(CheckpointLaterTest, HoldsTheWalBackUntilAskedThenGivesTheThresholdBack) {
  TempDir d;
  const std::string path = d / "t.db";
  Db db = BulkTestDb(d);
  const int64_t own = AutoCheckpointPages(db);
  ASSERT_EQ(own, 1000);  // SQLite's default, which the held-back threshold must exceed
  const int64_t empty = FileBytes(path);
  {
    CheckpointLater later(db);
    EXPECT_EQ(AutoCheckpointPages(db), CheckpointLater::kPages);
    WriteMegabytes(db, 6);  // ~1,500 pages: past SQLite's threshold, not past kPages
    EXPECT_EQ(FileBytes(path), empty) << "the commit checkpointed the WAL";
    ASSERT_TRUE(later.Checkpoint().ok());
    EXPECT_GT(FileBytes(path), empty + (5 << 20));
  }
  EXPECT_EQ(AutoCheckpointPages(db), own);
  const int64_t before = FileBytes(path);
  WriteMegabytes(db, 6);
  EXPECT_GT(FileBytes(path), before + (5 << 20)) << "the threshold was not given back";
}

}  // namespace
}  // namespace symdex::store
