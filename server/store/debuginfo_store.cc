#include "server/store/debuginfo_store.h"

#include "server/common/strings.h"
#include "server/store/index_store.h"

namespace symdex::store {

namespace {

absl::StatusOr<std::optional<DebugFileInfo>> FindDebugFileWhere(Db& db, const char* where, const std::string& key) {
  ASSIGN_OR_RETURN(Stmt st,
                   db.Prepare(StrCat("SELECT id, build_id, relocatable, path, text_addr, index_seconds, units, "
                                     "functions, variables, file_size, file_mtime_ns, file_ctime_ns, file_ino, "
                                     "file_dev FROM debug_files WHERE ",
                                     where)));
  st.Bind(1, key);
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<DebugFileInfo>();
  DebugFileInfo d;
  d.id = st.Int(0);
  d.build_id = st.Text(1);
  d.relocatable = st.Int(2) != 0;
  d.path = st.Text(3);
  if (auto t = st.OptInt(4)) d.text_addr = FromDb(*t);
  d.index_seconds = st.Double(5);
  d.units = st.Int(6);
  d.functions = st.Int(7);
  d.variables = st.Int(8);
  if (st.OptInt(9)) {
    d.stamp = debuginfo::FileStamp{
        .size = st.Int(9), .mtime_ns = st.Int(10), .ctime_ns = st.Int(11), .ino = st.Int(12), .dev = st.Int(13)};
  }
  return std::optional<DebugFileInfo>(d);
}

}  // namespace

absl::StatusOr<std::optional<DebugFileInfo>> FindDebugFile(Db& db, const std::string& build_id_hex) {
  return FindDebugFileWhere(db, "build_id = ?1", build_id_hex);
}

absl::StatusOr<std::optional<DebugFileInfo>> FindDebugFileById(Db& db, int64_t id) {
  return FindDebugFileWhere(db, "id = CAST(?1 AS INTEGER)", std::to_string(id));
}

absl::StatusOr<int64_t> CountDebugFiles(Db& db) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT count(*) FROM debug_files"));
  ASSIGN_OR_RETURN(bool row, q.Step());
  return row ? q.Int(0) : 0;
}

bool StoredIndexIsCurrent(const DebugFileInfo& d) {
  auto now = debuginfo::StampOf(d.path);
  if (!now) return true;
  return d.stamp && *d.stamp == *now;
}

absl::StatusOr<std::unique_ptr<DebugFileWriter>> DebugFileWriter::Begin(
    Db& db, const std::string& build_id_hex, const std::string& path, const std::optional<debuginfo::FileStamp>& stamp,
    bool relocatable, int64_t now) {
  std::unique_ptr<DebugFileWriter> w(new DebugFileWriter(db));
  ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
  w->tx_.emplace(std::move(tx));
  ASSIGN_OR_RETURN(auto existing, FindDebugFile(db, build_id_hex));
  if (existing && existing->path == path && existing->stamp && existing->stamp == stamp) {
    w->id_ = existing->id;
    w->writes_ = false;
    w->tx_.reset();
    return w;
  }

  int64_t id = 0;
  if (existing) {
    // Made from a file that has changed since: replace its rows, keep its id. Symbols of other
    // targets joined to the old rows would point at rows that are gone or — ids being reused —
    // at other functions: their DWARF columns are cleared (no answer rather than a wrong one)
    // until those targets are indexed again. The target being indexed rewrites its own.
    id = existing->id;
    // Their symbol rows change: so does their stamp (a text-symbol file made before is stale).
    ASSIGN_OR_RETURN(Stmt restamp, db.Prepare("UPDATE targets SET symbols_stamp = ?2 WHERE id IN "
                                              "(SELECT DISTINCT target_id FROM symbols WHERE debug_file_id = ?1)"));
    restamp.Bind(1, id).Bind(2, NewSymbolsStamp());
    RETURN_IF_ERROR(restamp.Run());
    ASSIGN_OR_RETURN(Stmt forget,
                     db.Prepare("UPDATE symbols SET dwarf_function_id = NULL, src_unit = NULL, src_file = NULL, "
                                "src_line = NULL, dwarf_note = ?2 WHERE debug_file_id = ?1"));
    forget.Bind(1, id).Bind(2, StrCat("the debug file ", existing->path,
                                      " changed after this target was indexed: run 'symdex index' for it again"));
    RETURN_IF_ERROR(forget.Run());
    ASSIGN_OR_RETURN(Stmt del_ranges, db.Prepare("DELETE FROM dwarf_ranges WHERE function_id IN "
                                                 "(SELECT id FROM dwarf_functions WHERE debug_file_id = ?1)"));
    del_ranges.Bind(1, id);
    RETURN_IF_ERROR(del_ranges.Run());
    for (const char* table :
         {"dwarf_functions", "dwarf_variables", "dwarf_sections", "dwarf_files", "dwarf_units", "dwarf_symbol_lines"}) {
      ASSIGN_OR_RETURN(Stmt del, db.Prepare(StrCat("DELETE FROM ", table, " WHERE debug_file_id = ?1")));
      del.Bind(1, id);
      RETURN_IF_ERROR(del.Run());
    }
  }
  // The row's counts, address and time are written by Finish, once known.
  ASSIGN_OR_RETURN(
      Stmt ins,
      db.Prepare(
          existing
              ? "UPDATE debug_files SET build_id = ?1, relocatable = ?2, path = ?3, text_addr = NULL, indexed_at = ?4, "
                "index_seconds = 0, units = 0, functions = 0, variables = 0, file_size = ?5, "
                "file_mtime_ns = ?6, file_ctime_ns = ?7, file_ino = ?8, file_dev = ?9 WHERE id = ?10"
              : "INSERT INTO debug_files (build_id, relocatable, path, text_addr, indexed_at, index_seconds, units, "
                "functions, variables, file_size, file_mtime_ns, file_ctime_ns, file_ino, file_dev) "
                "VALUES (?1,?2,?3,NULL,?4,0,0,0,0,?5,?6,?7,?8,?9)"));
  ins.Bind(1, build_id_hex).Bind(2, int64_t{relocatable}).Bind(3, path).Bind(4, now);
  if (stamp) {
    ins.Bind(5, stamp->size).Bind(6, stamp->mtime_ns).Bind(7, stamp->ctime_ns).Bind(8, stamp->ino);
    ins.Bind(9, stamp->dev);
  } else {
    for (int i = 5; i <= 9; ++i) ins.BindNull(i);
  }
  if (existing) ins.Bind(10, id);
  RETURN_IF_ERROR(ins.Run());
  if (!existing) id = sqlite3_last_insert_rowid(db.raw());
  w->id_ = id;

  // The first debug file of a new database (vmlinux): its rows are indexed once they are in.
  for (const char* table : {"dwarf_functions", "dwarf_ranges", "dwarf_variables"}) {
    ASSIGN_OR_RETURN(IndexesAfterLoad l, IndexesAfterLoad::Begin(db, table));
    w->later_.push_back(std::move(l));
  }
  // Function ids are given here, following the table's largest (what SQLite would pick), so that
  // the rows go in batches and the ranges can name their function without asking.
  {
    ASSIGN_OR_RETURN(Stmt max, db.Prepare("SELECT COALESCE(MAX(id), 0) FROM dwarf_functions"));
    ASSIGN_OR_RETURN(bool row, max.Step());
    w->first_function_id_ = (row ? max.Int(0) : 0) + 1;
  }
  return w;
}

absl::Status DebugFileWriter::Add(const debuginfo::DwarfIndex& idx, const debuginfo::DwarfIndexSizes& from) {
  if (!writes_) return absl::OkStatus();
  if (!tx_) return absl::FailedPreconditionError("debug file rows added after Finish");
  Db& db = db_;
  const int64_t id = id_;
  auto opt_file = [](uint32_t f) { return f == debuginfo::kNoFile ? std::nullopt : std::optional<int64_t>(f); };
  auto opt_sec = [](uint16_t s) { return s == debuginfo::kNoSection ? std::nullopt : std::optional<int64_t>(s); };
  auto count = [](size_t total, size_t first) { return total > first ? total - first : 0; };

  ASSIGN_OR_RETURN(BulkInsert sec, BulkInsert::Prepare(db, "dwarf_sections", {"debug_file_id", "idx", "name"},
                                                       count(idx.sections.size(), from.sections)));
  for (size_t i = from.sections; i < idx.sections.size(); ++i) {
    ASSIGN_OR_RETURN(BulkInsert::Row r, sec.Add());
    r.Bind(1, id).Bind(2, static_cast<int64_t>(i)).BindStatic(3, idx.sections[i]);
  }
  RETURN_IF_ERROR(sec.Finish());
  ASSIGN_OR_RETURN(BulkInsert file, BulkInsert::Prepare(db, "dwarf_files", {"debug_file_id", "idx", "path", "raw_path"},
                                                        count(idx.files.size(), from.files)));
  for (size_t i = from.files; i < idx.files.size(); ++i) {
    ASSIGN_OR_RETURN(BulkInsert::Row r, file.Add());
    r.Bind(1, id).Bind(2, static_cast<int64_t>(i)).BindStatic(3, idx.files[i]).BindStatic(4, idx.raw_files[i]);
  }
  RETURN_IF_ERROR(file.Finish());
  ASSIGN_OR_RETURN(BulkInsert unit,
                   BulkInsert::Prepare(db, "dwarf_units", {"debug_file_id", "idx", "name", "raw_name", "comp_dir"},
                                       count(idx.units.size(), from.units)));
  for (size_t i = from.units; i < idx.units.size(); ++i) {
    const auto& u = idx.units[i];
    ASSIGN_OR_RETURN(BulkInsert::Row r, unit.Add());
    r.Bind(1, id).Bind(2, static_cast<int64_t>(i)).BindStatic(3, u.name).BindStatic(4, u.raw_name);
    r.BindStatic(5, u.comp_dir);
  }
  RETURN_IF_ERROR(unit.Finish());
  size_t ranges = 0;
  for (size_t i = from.functions; i < idx.functions.size(); ++i) ranges += idx.functions[i].ranges.size();
  ASSIGN_OR_RETURN(BulkInsert fn, BulkInsert::Prepare(db, "dwarf_functions",
                                                      {"id", "debug_file_id", "name", "section", "entry", "unit",
                                                       "decl_file", "decl_line", "entry_file", "entry_line", "flags"},
                                                      count(idx.functions.size(), from.functions)));
  ASSIGN_OR_RETURN(BulkInsert rng,
                   BulkInsert::Prepare(db, "dwarf_ranges", {"function_id", "section", "lo", "hi"}, ranges));
  for (size_t i = from.functions; i < idx.functions.size(); ++i) {
    const debuginfo::DwarfFunction& f = idx.functions[i];
    const int64_t fid = first_function_id_ + static_cast<int64_t>(i);
    ASSIGN_OR_RETURN(BulkInsert::Row r, fn.Add());
    r.Bind(1, fid).Bind(2, id).BindStatic(3, f.name).Bind(4, opt_sec(f.entry_section)).Bind(5, ToDb(f.entry));
    r.Bind(6, int64_t{f.cu}).Bind(7, opt_file(f.decl_file)).Bind(8, int64_t{f.decl_line});
    r.Bind(9, opt_file(f.entry_file)).Bind(10, int64_t{f.entry_line});
    r.Bind(11, int64_t{(f.external ? 1 : 0) | (f.inline_copy ? 2 : 0)});
    for (const auto& g : f.ranges) {
      ASSIGN_OR_RETURN(BulkInsert::Row q, rng.Add());
      q.Bind(1, fid).Bind(2, opt_sec(g.section)).Bind(3, ToDb(g.lo)).Bind(4, ToDb(g.hi));
    }
  }
  RETURN_IF_ERROR(fn.Finish());
  RETURN_IF_ERROR(rng.Finish());
  ASSIGN_OR_RETURN(BulkInsert var, BulkInsert::Prepare(db, "dwarf_variables",
                                                       {"debug_file_id", "name", "section", "addr", "unit", "decl_file",
                                                        "decl_line", "flags"},
                                                       count(idx.variables.size(), from.variables)));
  for (size_t i = from.variables; i < idx.variables.size(); ++i) {
    const auto& v = idx.variables[i];
    ASSIGN_OR_RETURN(BulkInsert::Row r, var.Add());
    r.Bind(1, id).BindStatic(2, v.name).Bind(3, opt_sec(v.section)).Bind(4, ToDb(v.addr)).Bind(5, int64_t{v.cu});
    r.Bind(6, opt_file(v.decl_file)).Bind(7, int64_t{v.decl_line}).Bind(8, int64_t{v.external ? 1 : 0});
  }
  RETURN_IF_ERROR(var.Finish());
  ASSIGN_OR_RETURN(BulkInsert sl, BulkInsert::Prepare(db, "dwarf_symbol_lines",
                                                      {"debug_file_id", "section", "addr", "unit", "file", "line"},
                                                      count(idx.symbol_lines.size(), from.symbol_lines)));
  for (size_t i = from.symbol_lines; i < idx.symbol_lines.size(); ++i) {
    const auto& l = idx.symbol_lines[i];
    ASSIGN_OR_RETURN(BulkInsert::Row r, sl.Add());
    r.Bind(1, id).Bind(2, l.section == debuginfo::kNoSection ? int64_t{-1} : int64_t{l.section}).Bind(3, ToDb(l.addr));
    if (l.cu == UINT32_MAX)
      r.BindNull(4);
    else
      r.Bind(4, int64_t{l.cu});
    r.Bind(5, opt_file(l.file)).Bind(6, int64_t{l.line});
  }
  return sl.Finish();
}

absl::StatusOr<StoredDebugFile> DebugFileWriter::Finish(const debuginfo::DwarfIndex& idx,
                                                        const debuginfo::DwarfIndexSizes& from,
                                                        std::optional<uint64_t> text_addr, double index_seconds) {
  if (!writes_) return StoredDebugFile{.id = id_};
  RETURN_IF_ERROR(Add(idx, from));
  ASSIGN_OR_RETURN(Stmt upd, db_.Prepare("UPDATE debug_files SET relocatable = ?1, text_addr = ?2, index_seconds = ?3, "
                                         "units = ?4, functions = ?5, variables = ?6, reader = ?8 WHERE id = ?7"));
  upd.Bind(1, int64_t{idx.relocatable});
  if (text_addr)
    upd.Bind(2, ToDb(*text_addr));
  else
    upd.BindNull(2);
  upd.Bind(3, index_seconds).Bind(4, static_cast<int64_t>(idx.units.size()));
  upd.Bind(5, static_cast<int64_t>(idx.functions.size())).Bind(6, static_cast<int64_t>(idx.variables.size()));
  upd.Bind(7, id_).Bind(8, idx.reader);
  RETURN_IF_ERROR(upd.Run());
  for (IndexesAfterLoad& l : later_) RETURN_IF_ERROR(l.Rebuild());
  RETURN_IF_ERROR(tx_->Commit());
  tx_.reset();
  return StoredDebugFile{.id = id_, .function_ids = FunctionIds(idx.functions.size())};
}

std::vector<int64_t> DebugFileWriter::FunctionIds(size_t n) const {
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = first_function_id_ + static_cast<int64_t>(i);
  return ids;
}

absl::StatusOr<StoredDebugFile> InsertDebugFile(Db& db, const debuginfo::DwarfIndex& idx,
                                                const std::string& build_id_hex, const std::string& path,
                                                const std::optional<debuginfo::FileStamp>& stamp,
                                                std::optional<uint64_t> text_addr, double index_seconds, int64_t now,
                                                const FunctionIdsKnown& ids_known) {
  ASSIGN_OR_RETURN(auto w, DebugFileWriter::Begin(db, build_id_hex, path, stamp, idx.relocatable, now));
  if (!w->writes()) return StoredDebugFile{.id = w->id()};
  if (ids_known) ids_known(w->FunctionIds(idx.functions.size()));
  return w->Finish(idx, {}, text_addr, index_seconds);
}

absl::StatusOr<std::optional<DebugFileInfo>> DebugFileOf(Db& db, int64_t target_id, const std::string& module) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT d.build_id FROM target_debuginfo t JOIN debug_files d "
                                       "ON d.id = t.debug_file_id WHERE t.target_id = ?1 AND t.module = ?2"));
  st.Bind(1, target_id).Bind(2, module);
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<DebugFileInfo>();
  return FindDebugFile(db, st.Text(0));
}

absl::StatusOr<std::vector<std::string>> ModulesMentioningSource(Db& db, int64_t target_id,
                                                                 const std::string& file_suffix) {
  // A path suffix on whole components: the path itself, or ".../" + suffix.
  ASSIGN_OR_RETURN(
      Stmt st,
      db.Prepare("SELECT t.module FROM target_debuginfo t WHERE t.target_id = ?1 AND t.module <> '' "
                 "AND t.debug_file_id IS NOT NULL AND ("
                 "EXISTS (SELECT 1 FROM dwarf_files f WHERE f.debug_file_id = t.debug_file_id "
                 "        AND (f.path = ?2 OR substr(f.path, -length(?2) - 1) = '/' || ?2)) OR "
                 "EXISTS (SELECT 1 FROM dwarf_units u WHERE u.debug_file_id = t.debug_file_id "
                 "        AND (u.name = ?2 OR substr(u.name, -length(?2) - 1) = '/' || ?2))) ORDER BY t.module"));
  st.Bind(1, target_id).Bind(2, file_suffix);
  return st.TextColumn();
}

absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> ModuleSections(Db& db, int64_t target_id,
                                                                             const std::string& module) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT s.name, s.addr FROM module_sections s JOIN modules m "
                                       "ON m.id = s.module_id WHERE m.target_id = ?1 AND m.name = ?2"));
  st.Bind(1, target_id).Bind(2, module);
  std::vector<std::pair<std::string, uint64_t>> out;
  RETURN_IF_ERROR(st.EachRow([&] { out.emplace_back(st.Text(0), FromDb(st.Int(1))); }));
  return out;
}

absl::StatusOr<std::vector<SymbolLine>> LoadSymbolLines(Db& db, int64_t debug_file_id) {
  ASSIGN_OR_RETURN(Stmt st,
                   db.Prepare("SELECT COALESCE(s.name, ''), l.addr, l.unit, l.file, l.line FROM dwarf_symbol_lines l "
                              "LEFT JOIN dwarf_sections s ON s.debug_file_id = l.debug_file_id AND s.idx = l.section "
                              "WHERE l.debug_file_id = ?1"));
  st.Bind(1, debug_file_id);
  std::vector<SymbolLine> out;
  RETURN_IF_ERROR(st.EachRow([&] {
    out.push_back({st.Text(0), FromDb(st.Int(1)), st.OptInt(2), st.OptInt(3), st.Int(4)});
  }));
  return out;
}

// Ordered (the order dwarf_functions_by_name gives anyway): FunctionLocator breaks ties
// between identical ranges by it, and the indexer's in-memory join (indexer/dwarf_join.cc)
// reproduces it.
absl::StatusOr<std::vector<debuginfo::FunctionSpan>> LoadFunctionSpans(Db& db, int64_t debug_file_id) {
  ASSIGN_OR_RETURN(
      Stmt st, db.Prepare("SELECT f.id, COALESCE(rs.name, ''), r.lo, r.hi, f.entry, COALESCE(es.name, '') "
                          "FROM dwarf_functions f JOIN dwarf_ranges r ON r.function_id = f.id "
                          "LEFT JOIN dwarf_sections rs ON rs.debug_file_id = f.debug_file_id AND rs.idx = r.section "
                          "LEFT JOIN dwarf_sections es ON es.debug_file_id = f.debug_file_id AND es.idx = f.section "
                          "WHERE f.debug_file_id = ?1 ORDER BY f.name, f.id, r.rowid"));
  st.Bind(1, debug_file_id);
  std::vector<debuginfo::FunctionSpan> out;
  RETURN_IF_ERROR(st.EachRow([&] {
    out.push_back({st.Int(0), st.Text(1), FromDb(st.Int(2)), FromDb(st.Int(3)), FromDb(st.Int(4)), st.Text(5)});
  }));
  return out;
}

}  // namespace symdex::store
