#include "server/store/sqlite_db.h"

#include <algorithm>
#include <chrono>

#include "server/common/strings.h"

namespace symdex::store {

absl::Status DamagedIndexError(std::string_view path, std::string_view detail) {
  return absl::DataLossError(
      StrCat("index ", path, " is damaged: ", detail, "; move it away and run 'symdex index' again"));
}

namespace {
absl::Status SqliteError(sqlite3* db, std::string_view what) {
  int code = db ? sqlite3_errcode(db) : SQLITE_ERROR;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    // Whatever statement hit it, the user's cure is the same and needs the file's name.
    const char* file = sqlite3_db_filename(db, "main");
    return DamagedIndexError(file && *file ? file : "(in memory)", sqlite3_errmsg(db));
  }
  std::string msg = StrCat(what, ": ", db ? sqlite3_errmsg(db) : "out of memory");
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return absl::UnavailableError(msg);
  if (code == SQLITE_CANTOPEN || code == SQLITE_PERM || code == SQLITE_READONLY) {
    return absl::FailedPreconditionError(msg);
  }
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return absl::DataLossError(msg);
  return absl::InternalError(msg);
}
}  // namespace

StmtCache::~StmtCache() {
  for (auto& [_, s] : free_) sqlite3_finalize(s);
}

sqlite3_stmt* StmtCache::Take(std::string_view sql) {
  auto it = free_.find(std::string(sql));
  if (it == free_.end()) return nullptr;
  sqlite3_stmt* s = it->second;
  free_.erase(it);
  return s;
}

void StmtCache::Put(sqlite3_stmt* s) {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  free_.emplace(sqlite3_sql(s), s);
}

void Stmt::Release() {
  if (stmt_ == nullptr) return;
  if (cache_)
    cache_->Put(stmt_);
  else
    sqlite3_finalize(stmt_);
  stmt_ = nullptr;
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    Release();
    db_ = o.db_;
    stmt_ = o.stmt_;
    cache_ = o.cache_;
    o.stmt_ = nullptr;
  }
  return *this;
}

Stmt::~Stmt() { Release(); }

Stmt& Stmt::Bind(int idx, int64_t v) {
  sqlite3_bind_int64(stmt_, idx, v);
  return *this;
}
Stmt& Stmt::Bind(int idx, std::string_view v) {
  sqlite3_bind_text64(stmt_, idx, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}
Stmt& Stmt::BindStatic(int idx, std::string_view v) {
  sqlite3_bind_text64(stmt_, idx, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8);
  return *this;
}
Stmt& Stmt::BindNull(int idx) {
  sqlite3_bind_null(stmt_, idx);
  return *this;
}

absl::StatusOr<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, "query failed");
}

absl::StatusOr<std::vector<std::string>> Stmt::TextColumn() {
  std::vector<std::string> out;
  RETURN_IF_ERROR(EachRow([&] { out.push_back(Text(0)); }));
  return out;
}

absl::Status Stmt::Run() {
  ASSIGN_OR_RETURN(bool row, Step());
  (void)row;
  Reset();
  return absl::OkStatus();
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

Db& Db::operator=(Db&& o) noexcept {
  if (this != &o) {
    cache_.reset();
    sqlite3_close_v2(db_);
    db_ = o.db_;
    path_ = std::move(o.path_);
    cache_ = std::move(o.cache_);
    o.db_ = nullptr;
  }
  return *this;
}

Db::~Db() {
  cache_.reset();
  sqlite3_close_v2(db_);
}

void ConfigureSqlite() {
  // Before the library initializes itself on the first open: SQLite's memory statistics take a
  // global mutex on every allocation (symdex never reads them): off. A statement that writes
  // several rows (BulkInsert) keeps the pages it changes in a statement journal, which past
  // 64 KiB goes to a temporary file — a pwrite() for every page of a bulk load: kept in memory
  // (it holds at most the pages one batch of rows touches).
  [[maybe_unused]] static const int kConfigured = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, -1);
  }();
}

absl::StatusOr<Db> Db::Open(const std::string& path, Mode mode) {
  ConfigureSqlite();
  Db db;
  db.path_ = path;
  int flags = mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  flags |= SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db.db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(db.db_, StrCat("cannot open database ", path));
  }
  sqlite3_extended_result_codes(db.db_, 0);
  sqlite3_busy_timeout(db.db_, 10000);
  if (mode != Mode::kReadOnly) {
    // WAL: readers keep their snapshot while a re-index writes, and never see half of it.
    RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=NORMAL"));
    // An index run adds ~10 MB of index b-tree entries, the by-name ones in an order unrelated to
    // their insertion: with the default 2 MB page cache, pages go out to the WAL and come back.
    // 8 MiB indexes a whole kernel as fast as 32 MiB, and the cache is a fixed part of an index
    // run's peak memory (on a kernel twice Debian's, 32 MiB of it peaked ~30 MB higher).
    RETURN_IF_ERROR(db.Exec("PRAGMA cache_size=-8192"));
  }
  RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys=ON"));
  // Reading the schema catches "file is not a database" at open time, with the path.
  if (auto v = db.UserVersion(); !v.ok()) {
    if (v.status().code() == absl::StatusCode::kDataLoss) return v.status();
    return absl::DataLossError(StrCat(path, " is not a symdex database: ", v.status().message()));
  }
  return db;
}

absl::StatusOr<bool> Db::QuickCheck(double max_seconds) {
  // quick_check reads every page (b-tree structure, record formats, NOT NULL/UNIQUE), not the
  // index-to-table cross-checks of integrity_check: linear in the file's size. The progress
  // handler interrupts it at the deadline so that `status` stays quick on a huge index.
  using Clock = std::chrono::steady_clock;
  struct Deadline {
    Clock::time_point at;
    bool hit = false;
  } deadline{Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(max_seconds))};
  sqlite3_progress_handler(
      db_, 10000,
      [](void* p) -> int {
        auto* d = static_cast<Deadline*>(p);
        d->hit = Clock::now() >= d->at;
        return d->hit ? 1 : 0;
      },
      &deadline);
  std::vector<std::string> problems;
  absl::Status failed;
  {
    auto st = Prepare("PRAGMA quick_check(5)");
    if (!st.ok()) {
      failed = st.status();
    } else {
      auto rows = st->TextColumn();
      if (rows.ok())
        problems = std::move(*rows);
      else
        failed = rows.status();
    }
  }
  sqlite3_progress_handler(db_, 0, nullptr, nullptr);
  if (deadline.hit) return false;
  RETURN_IF_ERROR(failed);
  if (problems.size() == 1 && problems[0] == "ok") return true;
  std::string detail;
  for (std::string p : problems) {
    // Rows look like "*** in database main ***\nPage 6001: btreeInitPage() returns error code 11".
    if (p.starts_with("*** in database main ***")) p.erase(0, 24);
    for (char& c : p) c = c == '\n' ? ' ' : c;
    while (!p.empty() && p.front() == ' ') p.erase(0, 1);
    detail += StrCat(detail.empty() ? "" : "; ", p);
  }
  return DamagedIndexError(path_, detail.empty() ? "quick_check returned nothing" : detail);
}

absl::Status Db::Exec(std::string_view sql) {
  std::string owned(sql);
  char* err = nullptr;
  if (sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    absl::Status s = SqliteError(db_, "sql failed");
    if (s.code() == absl::StatusCode::kDataLoss) return s;  // already names the file and the cure
    return absl::Status(s.code(), StrCat(path_, ": ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<Stmt> Db::Prepare(std::string_view sql) {
  if (cache_) {
    if (sqlite3_stmt* cached = cache_->Take(sql)) return Stmt(db_, cached, cache_.get());
  }
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s, nullptr) !=
      SQLITE_OK) {
    return SqliteError(db_, StrCat("cannot prepare '", sql.substr(0, 60), "'"));
  }
  return Stmt(db_, s, cache_.get());
}

absl::StatusOr<int64_t> Db::UserVersion() {
  ASSIGN_OR_RETURN(Stmt st, Prepare("PRAGMA user_version"));
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Int(0) : 0;
}

absl::StatusOr<Transaction> Transaction::Begin(Db& db) {
  RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  RETURN_IF_ERROR(db_->Exec("COMMIT"));
  db_ = nullptr;
  return absl::OkStatus();
}

namespace {
std::string MultiRowInsert(std::string_view table, std::initializer_list<const char*> columns, size_t rows) {
  std::string row = "(";
  for (size_t i = 0; i < columns.size(); ++i) row += i ? ",?" : "?";
  row += ")";
  std::string sql = StrCat("INSERT INTO ", table, " (");
  bool first = true;
  for (const char* c : columns) {
    sql += StrCat(first ? "" : ", ", c);
    first = false;
  }
  sql += ") VALUES ";
  for (size_t r = 0; r < rows; ++r) sql += StrCat(r ? "," : "", row);
  return sql;
}
}  // namespace

absl::StatusOr<BulkInsert> BulkInsert::Prepare(Db& db, std::string_view table,
                                               std::initializer_list<const char*> columns, size_t rows) {
  BulkInsert b;
  b.cols_ = columns.size();
  b.rows_ = rows;
  b.full_rows_ = rows - rows % kBatchRows;
  if (b.full_rows_ > 0) {
    ASSIGN_OR_RETURN(b.full_, db.Prepare(MultiRowInsert(table, columns, kBatchRows)));
  }
  if (rows % kBatchRows) {
    ASSIGN_OR_RETURN(b.tail_, db.Prepare(MultiRowInsert(table, columns, rows % kBatchRows)));
  }
  return b;
}

absl::Status BulkInsert::RunFilledBatch() {
  // Rows [0, added_) are bound: a batch is complete when added_ ends one.
  if (added_ == 0) return absl::OkStatus();
  if (added_ <= full_rows_) return added_ % kBatchRows == 0 ? full_.Run() : absl::OkStatus();
  return added_ == rows_ ? tail_.Run() : absl::OkStatus();
}

absl::StatusOr<BulkInsert::Row> BulkInsert::Add() {
  if (added_ == rows_) return absl::InternalError(StrCat("bulk insert: more than the ", rows_, " rows announced"));
  RETURN_IF_ERROR(RunFilledBatch());
  const size_t k = added_++;
  if (k < full_rows_) return Row(&full_, static_cast<int>((k % kBatchRows) * cols_));
  return Row(&tail_, static_cast<int>((k - full_rows_) * cols_));
}

absl::Status BulkInsert::Finish() {
  if (added_ != rows_) {
    return absl::InternalError(StrCat("bulk insert: ", added_, " rows of the ", rows_, " announced"));
  }
  return RunFilledBatch();
}

ForeignKeysOff::ForeignKeysOff(Db& db) : db_(db) {
  if (auto st = db_.Prepare("PRAGMA foreign_keys"); st.ok()) {
    auto row = st->Step();
    was_on_ = row.ok() && *row && st->Int(0) != 0;
  }
  if (was_on_) (void)db_.Exec("PRAGMA foreign_keys=OFF");
}

ForeignKeysOff::~ForeignKeysOff() {
  if (was_on_) (void)db_.Exec("PRAGMA foreign_keys=ON");
}

CheckpointLater::CheckpointLater(Db& db) : db_(db) {
  if (auto st = db_.Prepare("PRAGMA wal_autocheckpoint"); st.ok()) {
    if (auto row = st->Step(); row.ok() && *row) pages_ = st->Int(0);
  }
  if (pages_ > 0) sqlite3_wal_autocheckpoint(db_.raw(), std::max<int>(kPages, static_cast<int>(pages_)));
}

CheckpointLater::~CheckpointLater() {
  if (pages_ > 0) sqlite3_wal_autocheckpoint(db_.raw(), static_cast<int>(pages_));
}

absl::Status CheckpointLater::Checkpoint() {
  int rc = sqlite3_wal_checkpoint_v2(db_.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_.raw(), "WAL checkpoint");
  return absl::OkStatus();
}

absl::StatusOr<IndexesAfterLoad> IndexesAfterLoad::Begin(Db& db, std::string_view table) {
  IndexesAfterLoad out(db);
  // `table` is a name from symdex's own code, never input: it cannot be bound, only spliced.
  ASSIGN_OR_RETURN(Stmt any, db.Prepare(StrCat("SELECT EXISTS (SELECT 1 FROM ", table, ")")));
  ASSIGN_OR_RETURN(bool row, any.Step());
  const bool empty = row && any.Int(0) == 0;
  any.Reset();  // a statement still running keeps DROP INDEX out (SQLITE_LOCKED)
  if (!empty) return out;
  ASSIGN_OR_RETURN(Stmt idx, db.Prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1 "
                                        "AND sql IS NOT NULL ORDER BY name"));
  idx.Bind(1, table);
  std::vector<std::string> names;
  RETURN_IF_ERROR(idx.EachRow([&] {
    names.push_back(idx.Text(0));
    out.create_.push_back(idx.Text(1));
  }));
  idx.Reset();
  for (const std::string& n : names) RETURN_IF_ERROR(db.Exec(StrCat("DROP INDEX \"", n, "\"")));
  return out;
}

absl::Status IndexesAfterLoad::Rebuild() {
  for (const std::string& sql : create_) RETURN_IF_ERROR(db_->Exec(sql));
  create_.clear();
  return absl::OkStatus();
}

absl::StatusOr<ReadSnapshot> ReadSnapshot::Begin(Db& db) {
  RETURN_IF_ERROR(db.Exec("BEGIN DEFERRED"));
  return ReadSnapshot(&db);
}

ReadSnapshot::~ReadSnapshot() {
  if (db_) (void)db_->Exec("COMMIT");
}

}  // namespace symdex::store
