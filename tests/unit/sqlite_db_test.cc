// BulkInsert (server/store/sqlite_db.h): rows go through multi-row statements of kBatchRows and
// one shorter statement for the rest; every row lands once, in order, whatever the count, and a
// batch that fails leaves none of its rows behind.
#include "server/store/sqlite_db.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace symdex::store
