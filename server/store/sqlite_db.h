// RAII wrappers over sqlite3 / sqlite3_stmt. Every statement is prepared; values are bound,
// never spliced into SQL text.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "server/common/status.h"

namespace symdex::store {

// Prepared statements returned to their Db after use, so a query run many times (a batch of
// 46k addresses) is parsed and planned once.
class StmtCache {
 public:
  ~StmtCache();
  sqlite3_stmt* Take(std::string_view sql);
  void Put(sqlite3_stmt* s);

 private:
  std::unordered_multimap<std::string, sqlite3_stmt*> free_;
};

class Stmt {
 public:
  Stmt() = default;
  Stmt(Stmt&& o) noexcept : db_(o.db_), stmt_(o.stmt_), cache_(o.cache_) { o.stmt_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  // Binding is 1-based as in sqlite3_bind_*.
  Stmt& Bind(int idx, int64_t v);
  Stmt& Bind(int idx, std::string_view v);
  Stmt& Bind(int idx, const char* v) { return Bind(idx, std::string_view(v)); }
  // Binds without a copy: `v`'s bytes must stay valid and unchanged until the statement is
  // stepped and reset (bulk inserts of strings that outlive the statement's use).
  Stmt& BindStatic(int idx, std::string_view v);
  Stmt& Bind(int idx, double v) {
    sqlite3_bind_double(stmt_, idx, v);
    return *this;
  }
  Stmt& BindNull(int idx);
  template <typename T>
  Stmt& Bind(int idx, const std::optional<T>& v) {
    return v ? Bind(idx, *v) : BindNull(idx);
  }

  // true: a row is available; false: done.
  absl::StatusOr<bool> Step();
  // Steps a statement that returns no rows.
  absl::Status Run();
  // Steps to the end, calling `row()` at each row (it returns void, or a Status that stops the
  // walk when not ok).
  template <typename Fn>
  absl::Status EachRow(Fn&& row) {
    for (;;) {
      absl::StatusOr<bool> more = Step();
      if (!more.ok()) return more.status();
      if (!*more) return absl::OkStatus();
      if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
        row();
      } else if (absl::Status s = row(); !s.ok()) {
        return s;
      }
    }
  }
  // The first row as `read()` makes it, or nullopt when there is none.
  template <typename Fn>
  absl::StatusOr<std::optional<std::invoke_result_t<Fn&>>> FirstRow(Fn&& read) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return std::optional<std::invoke_result_t<Fn&>>();
    return std::optional<std::invoke_result_t<Fn&>>(read());
  }
  // Steps to the end, collecting column 0 of every row as text.
  absl::StatusOr<std::vector<std::string>> TextColumn();
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<int64_t> OptInt(int col) const { return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col)); }

 private:
  friend class Db;
  Stmt(sqlite3* db, sqlite3_stmt* s, StmtCache* cache) : db_(db), stmt_(s), cache_(cache) {}
  void Release();
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  StmtCache* cache_ = nullptr;
};

// A row's columns read in the SELECT's order: each call reads the next one.
class RowReader {
 public:
  explicit RowReader(const Stmt& st) : st_(st) {}
  int64_t Int() { return st_.Int(col_++); }
  std::string Text() { return st_.Text(col_++); }
  std::optional<int64_t> OptInt() { return st_.OptInt(col_++); }

 private:
  const Stmt& st_;
  int col_ = 0;
};

// SQLite's process-wide settings, made once before the library's first use. Db::Open calls it;
// a program that calls SQLite itself before opening an index calls it first.
void ConfigureSqlite();

// "index P is damaged: <detail>; move it away and run 'symdex index' again" (DataLoss). Every
// SQLITE_CORRUPT / SQLITE_NOTADB a statement meets comes back as this, naming the file.
absl::Status DamagedIndexError(std::string_view path, std::string_view detail);

class Db {
 public:
  enum class Mode { kReadWriteCreate, kReadOnly };

  Db() = default;
  Db(Db&& o) noexcept : db_(o.db_), path_(std::move(o.path_)), cache_(std::move(o.cache_)) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  static absl::StatusOr<Db> Open(const std::string& path, Mode mode);

  absl::Status Exec(std::string_view sql);  // for schema scripts and pragmas only
  absl::StatusOr<Stmt> Prepare(std::string_view sql);
  absl::StatusOr<int64_t> UserVersion();
  // PRAGMA quick_check, given at most `max_seconds`: true when the file is sound, false when the
  // time ran out first, DataLoss (DamagedIndexError) when it is not.
  absl::StatusOr<bool> QuickCheck(double max_seconds);
  const std::string& path() const { return path_; }
  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  std::unique_ptr<StmtCache> cache_ = std::make_unique<StmtCache>();  // finalized before close
};

// BEGIN IMMEDIATE on construction (take the write lock up front), ROLLBACK on destruction
// unless Commit() succeeded: an error anywhere leaves the previous state untouched.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Db& db);
  Transaction(Transaction&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Transaction(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}
  Db* db_;
};

// Foreign-key enforcement off while it lives, for a writer that keeps the references itself
// (SQLite ignores the pragma inside a transaction: make it before Transaction::Begin). With
// enforcement on, every inserted child row looks its parent up, and SQLite cannot empty a
// referenced table wholesale (it visits and unindexes each row instead). ON DELETE CASCADE does
// not run either: the writer deletes the children itself. Setting the pragma expires every
// prepared statement of the connection (each is compiled again on its next use): one held
// around a loop of writers that hold their own makes theirs no-ops.
class ForeignKeysOff {
 public:
  explicit ForeignKeysOff(Db& db);
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;
  ~ForeignKeysOff();

 private:
  Db& db_;
  bool was_on_ = false;
};

// The connection's automatic WAL checkpoints held back while it lives, for a writer of many
// transactions in a row (an index run). SQLite otherwise copies the WAL into the database file,
// with an fsync, in whichever commit takes the WAL past 1,000 pages (4 MiB) — on the writer's
// thread, in the middle of its work (vmlinux's rows: ~25 ms of a ~35 ms commit). Held back to
// kPages: a vmlinux index never reaches it, a whole kernel's does once or twice (the WAL stays
// under ~70 MB, where holding it back entirely let it grow to ~150 MB). Checkpoint() runs one
// when the writer has a moment (a passive one: it waits for no reader and no writer); the
// destructor gives the connection its threshold back.
class CheckpointLater {
 public:
  static constexpr int kPages = 16384;
  explicit CheckpointLater(Db& db);
  CheckpointLater(const CheckpointLater&) = delete;
  CheckpointLater& operator=(const CheckpointLater&) = delete;
  ~CheckpointLater();
  absl::Status Checkpoint();

 private:
  Db& db_;
  int64_t pages_ = -1;  // the connection's threshold before; <= 0 (off, or not read): left alone
};

// A read snapshot: every statement until it ends sees one committed state of the database, so
// a query never sees half of a concurrent re-index (WAL keeps the old pages for it). It also
// takes the file locks once instead of per statement. Ends (COMMIT) when destroyed.
class ReadSnapshot {
 public:
  static absl::StatusOr<ReadSnapshot> Begin(Db& db);
  ReadSnapshot(ReadSnapshot&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ~ReadSnapshot();

 private:
  explicit ReadSnapshot(Db* db) : db_(db) {}
  Db* db_;
};

// Rows into one table through multi-row INSERT statements of kBatchRows rows: a statement
// execution opens its table's and indexes' cursors, and a row inserted alone pays that for
// itself — several times SQLite's own per-row cost. The number of rows is announced up front, so
// the last, shorter batch is one statement of its own size. Usage:
//   ASSIGN_OR_RETURN(BulkInsert ins, BulkInsert::Prepare(db, "t", {"a", "b"}, rows.size()));
//   for (...) { ASSIGN_OR_RETURN(BulkInsert::Row r, ins.Add()); r.Bind(1, a).Bind(2, b); }
//   RETURN_IF_ERROR(ins.Finish());
// Column numbers are 1-based within the row. A batch runs when the row after it is added (or at
// Finish): strings bound with BindStatic must stay valid until then.
class BulkInsert {
 public:
  static constexpr size_t kBatchRows = 32;

  class Row {
   public:
    template <typename T>
    Row& Bind(int col, const T& v) {
      stmt_->Bind(base_ + col, v);
      return *this;
    }
    Row& BindStatic(int col, std::string_view v) {
      stmt_->BindStatic(base_ + col, v);
      return *this;
    }
    Row& BindNull(int col) {
      stmt_->BindNull(base_ + col);
      return *this;
    }

   private:
    friend class BulkInsert;
    Row(Stmt* s, int base) : stmt_(s), base_(base) {}
    Stmt* stmt_;
    int base_;
  };

  static absl::StatusOr<BulkInsert> Prepare(Db& db, std::string_view table, std::initializer_list<const char*> columns,
                                            size_t rows);
  // The next row, running the batch before it when that is full. More rows than announced: an
  // internal error.
  absl::StatusOr<Row> Add();
  // Runs the last batch; fewer rows than announced: an internal error (nothing of the last batch
  // is written).
  absl::Status Finish();

 private:
  BulkInsert() = default;
  absl::Status RunFilledBatch();
  size_t cols_ = 0, rows_ = 0, added_ = 0;
  size_t full_rows_ = 0;  // rows that go through `full_` (whole batches); the rest through `tail_`
  Stmt full_, tail_;
};

// A bulk load into an empty table with its indexes built afterwards: Begin() drops the table's
// indexes when it holds no row (and does nothing otherwise), Rebuild() creates them again from
// their stored definitions. SQLite then builds each index from sorted keys instead of inserting
// every row's key at a random place (a kernel's symbols: 0.40 s with four indexes kept up to
// date, 0.26 s loaded then indexed; sqlite3 shell, this machine). Inside a transaction only:
// Rebuild() before its commit; a rollback brings the indexes back with everything else.
class IndexesAfterLoad {
 public:
  static absl::StatusOr<IndexesAfterLoad> Begin(Db& db, std::string_view table);
  absl::Status Rebuild();

 private:
  explicit IndexesAfterLoad(Db& db) : db_(&db) {}
  Db* db_;
  std::vector<std::string> create_;  // the dropped indexes' CREATE INDEX statements
};

// SQLite stores signed 64-bit integers; kernel addresses live in the upper half.
inline int64_t ToDb(uint64_t v) { return static_cast<int64_t>(v); }
inline uint64_t FromDb(int64_t v) { return static_cast<uint64_t>(v); }

}  // namespace symdex::store
