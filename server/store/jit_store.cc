#include "server/store/jit_store.h"

#include "server/common/strings.h"

namespace symdex::store {
namespace {

constexpr char kLoadColumns[] =
    "l.id, l.pid, l.code_index, l.name, l.code_addr, l.code_size, l.time, l.file_offset, l.instance_id";

JitLoadRow LoadFromRow(const Stmt& s, int col) {
  JitLoadRow r;
  r.load_id = s.Int(col + 0);
  r.pid = static_cast<uint32_t>(s.Int(col + 1));
  r.code_index = FromDb(s.Int(col + 2));
  r.name = s.Text(col + 3);
  r.code_addr = FromDb(s.Int(col + 4));
  r.code_size = FromDb(s.Int(col + 5));
  r.load_time = FromDb(s.Int(col + 6));
  r.file_offset = FromDb(s.Int(col + 7));
  r.instance_id = s.Int(col + 8);
  return r;
}

// The id of the row an INSERT just added; nullopt when it was ignored as a duplicate.
std::optional<int64_t> Inserted(Db& db) {
  if (sqlite3_changes(db.raw()) == 0) return std::nullopt;
  return sqlite3_last_insert_rowid(db.raw());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// writes

absl::StatusOr<int64_t> UpsertJitInstance(Db& db, const ingest::JitdumpHeader& h) {
  ASSIGN_OR_RETURN(Stmt ins, db.Prepare("INSERT OR IGNORE INTO jit_instances (pid, dump_timestamp, version, elf_mach, "
                                        "big_endian, flags) VALUES (?,?,?,?,?,?)"));
  ins.Bind(1, static_cast<int64_t>(h.pid))
      .Bind(2, ToDb(h.timestamp))
      .Bind(3, static_cast<int64_t>(h.version))
      .Bind(4, static_cast<int64_t>(h.elf_mach))
      .Bind(5, static_cast<int64_t>(h.byte_order == std::endian::big))
      .Bind(6, ToDb(h.flags));
  RETURN_IF_ERROR(ins.Run());
  ASSIGN_OR_RETURN(Stmt sel, db.Prepare("SELECT id FROM jit_instances WHERE pid=? AND dump_timestamp=?"));
  sel.Bind(1, static_cast<int64_t>(h.pid)).Bind(2, ToDb(h.timestamp));
  ASSIGN_OR_RETURN(bool row, sel.Step());
  if (!row) return absl::InternalError("jit instance row vanished");
  return sel.Int(0);
}

absl::StatusOr<std::optional<JitSourceState>> JitSourceResume(Db& db, int64_t instance_id, const std::string& path) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT resume_offset, status FROM jit_sources WHERE instance_id=? AND path=?"));
  q.Bind(1, instance_id).Bind(2, path);
  return q.FirstRow([&] { return JitSourceState{FromDb(q.Int(0)), q.Text(1)}; });
}

absl::Status UpsertJitSource(Db& db, const JitSourceUpdate& u) {
  ASSIGN_OR_RETURN(Stmt s, db.Prepare("INSERT INTO jit_sources (instance_id, path, resume_offset, file_size, records, "
                                      "status, message, ingested_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                                      "ON CONFLICT (instance_id, path) DO UPDATE SET resume_offset=?3, file_size=?4, "
                                      "records=records+?5, ingested_at=?8, "
                                      // A rescan that found nothing new keeps what the file was found to be
                                      // (complete, truncated, closed): the run's "unchanged" is its own report.
                                      "status=CASE WHEN ?6='unchanged' THEN status ELSE ?6 END, "
                                      "message=CASE WHEN ?6='unchanged' THEN message ELSE ?7 END"));
  s.Bind(1, u.instance_id)
      .Bind(2, u.path)
      .Bind(3, ToDb(u.resume_offset))
      .Bind(4, ToDb(u.file_size))
      .Bind(5, u.new_records)
      .Bind(6, u.status)
      .Bind(7, u.message)
      .Bind(8, u.ingested_at);
  return s.Run();
}

absl::Status RaiseJitMaxCodeSize(Db& db, int64_t instance_id, uint64_t size) {
  ASSIGN_OR_RETURN(Stmt m, db.Prepare("UPDATE jit_instances SET max_code_size = max(max_code_size, ?) WHERE id=?"));
  m.Bind(1, ToDb(size)).Bind(2, instance_id);
  return m.Run();
}

absl::StatusOr<JitLoadWriter> JitLoadWriter::Prepare(Db& db) {
  JitLoadWriter w(db);
  ASSIGN_OR_RETURN(w.ins_code_, db.Prepare("INSERT INTO jit_code (sha1, size, bytes) VALUES (?1, ?2, CAST(?3 AS BLOB)) "
                                           "ON CONFLICT (sha1) DO NOTHING"));
  ASSIGN_OR_RETURN(w.sel_code_, db.Prepare("SELECT id FROM jit_code WHERE sha1=?"));
  ASSIGN_OR_RETURN(w.ins_load_, db.Prepare("INSERT OR IGNORE INTO jit_loads (instance_id, file_offset, time, pid, tid, "
                                           "vma, code_addr, code_size, code_index, name, code_id, line_bias, "
                                           "has_unwinding) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(w.ins_place_, db.Prepare("INSERT OR IGNORE INTO jit_placements (load_id, instance_id, addr, size, "
                                            "time, until, file_offset, kind) VALUES (?,?,?,?,?,NULL,?,?)"));
  ASSIGN_OR_RETURN(w.ins_line_,
                   db.Prepare("INSERT INTO jit_lines (load_id, addr, line, discrim, file) VALUES (?,?,?,?,?)"));
  ASSIGN_OR_RETURN(w.ins_id_,
                   db.Prepare("INSERT OR IGNORE INTO jit_build_ids (load_id, scheme, build_id) VALUES (?,?,?)"));
  ASSIGN_OR_RETURN(w.sel_index_, db.Prepare("SELECT id FROM jit_loads WHERE instance_id=? AND code_index=? AND "
                                            "file_offset < ? ORDER BY file_offset DESC LIMIT 1"));
  ASSIGN_OR_RETURN(w.close_prev_, db.Prepare("UPDATE jit_placements SET until=? WHERE load_id=? AND until IS NULL "
                                             "AND file_offset < ?"));
  return w;
}

absl::StatusOr<int64_t> JitLoadWriter::CodeId(const std::string& sha1, std::string_view code) {
  if (auto it = code_ids_.find(sha1); it != code_ids_.end()) return it->second;
  ins_code_.Reset();
  ins_code_.Bind(1, sha1).Bind(2, static_cast<int64_t>(code.size())).Bind(3, code);
  RETURN_IF_ERROR(ins_code_.Run());
  sel_code_.Reset();
  sel_code_.Bind(1, sha1);
  ASSIGN_OR_RETURN(bool row, sel_code_.Step());
  if (!row) return absl::InternalError("jit_code row vanished");
  int64_t id = sel_code_.Int(0);
  code_ids_.emplace(sha1, id);
  return id;
}

absl::StatusOr<std::optional<int64_t>> JitLoadWriter::InsertLoad(int64_t instance_id, const ingest::CodeLoad& load,
                                                                 int64_t code_id, uint64_t line_bias) {
  ins_load_.Reset();
  ins_load_.Bind(1, instance_id)
      .Bind(2, ToDb(load.prefix.file_offset))
      .Bind(3, ToDb(load.prefix.timestamp))
      .Bind(4, static_cast<int64_t>(load.pid))
      .Bind(5, static_cast<int64_t>(load.tid))
      .Bind(6, ToDb(load.vma))
      .Bind(7, ToDb(load.code_addr))
      .Bind(8, ToDb(load.code_size))
      .Bind(9, ToDb(load.code_index))
      .Bind(10, load.name)
      .Bind(11, code_id)
      .Bind(12, ToDb(line_bias))
      .Bind(13, static_cast<int64_t>(load.unwinding_info.has_value()));
  RETURN_IF_ERROR(ins_load_.Run());
  return Inserted(*db_);
}

absl::StatusOr<bool> JitLoadWriter::InsertPlacement(int64_t load_id, int64_t instance_id, uint64_t addr, uint64_t size,
                                                    uint64_t time, uint64_t file_offset, std::string_view kind) {
  ins_place_.Reset();
  ins_place_.Bind(1, load_id)
      .Bind(2, instance_id)
      .Bind(3, ToDb(addr))
      .Bind(4, ToDb(size))
      .Bind(5, ToDb(time))
      .Bind(6, ToDb(file_offset))
      .Bind(7, kind);
  RETURN_IF_ERROR(ins_place_.Run());
  return Inserted(*db_).has_value();
}

absl::Status JitLoadWriter::InsertLine(int64_t load_id, const ingest::DebugEntry& e) {
  ins_line_.Reset();
  ins_line_.Bind(1, load_id)
      .Bind(2, ToDb(e.addr))
      .Bind(3, static_cast<int64_t>(e.line))
      .Bind(4, static_cast<int64_t>(e.discrim))
      .Bind(5, e.file);
  return ins_line_.Run();
}

absl::Status JitLoadWriter::InsertBuildId(int64_t load_id, std::string_view scheme, const std::string& hex) {
  ins_id_.Reset();
  ins_id_.Bind(1, load_id).Bind(2, scheme).Bind(3, hex);
  return ins_id_.Run();
}

absl::StatusOr<std::optional<int64_t>> JitLoadWriter::LoadBefore(int64_t instance_id, uint64_t code_index,
                                                                 uint64_t file_offset) {
  sel_index_.Reset();
  sel_index_.Bind(1, instance_id).Bind(2, ToDb(code_index)).Bind(3, ToDb(file_offset));
  return sel_index_.FirstRow([&] { return sel_index_.Int(0); });
}

absl::Status JitLoadWriter::ClosePlacements(int64_t load_id, uint64_t until, uint64_t file_offset) {
  close_prev_.Reset();
  close_prev_.Bind(1, ToDb(until)).Bind(2, load_id).Bind(3, ToDb(file_offset));
  return close_prev_.Run();
}

absl::StatusOr<std::optional<PerfMapRow>> LatestPerfMap(Db& db, const std::string& path) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT id, generation, consumed, next_line FROM jit_perf_maps WHERE path=? "
                                      "ORDER BY generation DESC LIMIT 1"));
  q.Bind(1, path);
  return q.FirstRow([&] { return PerfMapRow{q.Int(0), q.Int(1), FromDb(q.Int(2)), q.Int(3)}; });
}

absl::StatusOr<int64_t> InsertPerfMap(Db& db, uint32_t pid, const std::string& path, int64_t generation,
                                      int64_t ingested_at) {
  ASSIGN_OR_RETURN(Stmt ins, db.Prepare("INSERT INTO jit_perf_maps (pid, path, generation, consumed, next_line, "
                                        "entries, malformed, max_size, ingested_at) VALUES (?,?,?,0,1,0,0,0,?)"));
  ins.Bind(1, static_cast<int64_t>(pid)).Bind(2, path).Bind(3, generation).Bind(4, ingested_at);
  RETURN_IF_ERROR(ins.Run());
  return sqlite3_last_insert_rowid(db.raw());
}

absl::Status InsertPerfMapEntries(Db& db, int64_t map_id, const std::vector<ingest::PerfMapEntry>& entries) {
  ASSIGN_OR_RETURN(Stmt ins, db.Prepare("INSERT OR REPLACE INTO jit_perf_map_entries (map_id, start, size, name, line) "
                                        "VALUES (?,?,?,?,?)"));
  for (const ingest::PerfMapEntry& e : entries) {
    ins.Reset();
    ins.Bind(1, map_id)
        .Bind(2, ToDb(e.start))
        .Bind(3, ToDb(e.size))
        .Bind(4, e.name)
        .Bind(5, static_cast<int64_t>(e.line));
    RETURN_IF_ERROR(ins.Run());
  }
  return absl::OkStatus();
}

absl::Status UpdatePerfMap(Db& db, const PerfMapUpdate& u) {
  ASSIGN_OR_RETURN(Stmt up, db.Prepare("UPDATE jit_perf_maps SET consumed=?, next_line=?, entries=entries+?, "
                                       "malformed=malformed+?, max_size=max(max_size, ?), ingested_at=? WHERE id=?"));
  up.Bind(1, ToDb(u.consumed))
      .Bind(2, u.next_line)
      .Bind(3, u.new_entries)
      .Bind(4, u.new_malformed)
      .Bind(5, ToDb(u.max_size))
      .Bind(6, u.ingested_at)
      .Bind(7, u.map_id);
  return up.Run();
}

// ---------------------------------------------------------------------------------------------
// reads

absl::StatusOr<JitInstanceRow> JitInstanceById(Db& db, int64_t id) {
  ASSIGN_OR_RETURN(Stmt q,
                   db.Prepare("SELECT i.pid, i.dump_timestamp, i.elf_mach, i.big_endian, "
                              "(SELECT path FROM jit_sources s WHERE s.instance_id=i.id ORDER BY s.id LIMIT 1), "
                              "(SELECT status FROM jit_sources s WHERE s.instance_id=i.id ORDER BY s.ingested_at "
                              "DESC, s.id DESC LIMIT 1), "
                              "(SELECT count(*) FROM jit_loads l WHERE l.instance_id=i.id) "
                              "FROM jit_instances i WHERE i.id=?"));
  q.Bind(1, id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::NotFoundError(StrCat("no jit instance ", id));
  JitInstanceRow inst;
  inst.id = id;
  inst.pid = static_cast<uint32_t>(q.Int(0));
  inst.dump_timestamp = FromDb(q.Int(1));
  inst.elf_mach = static_cast<uint32_t>(q.Int(2));
  inst.big_endian = q.Int(3) != 0;
  inst.path = q.Text(4);
  inst.status = q.Text(5);
  inst.loads = q.Int(6);
  return inst;
}

absl::StatusOr<std::vector<JitInstanceRow>> FindJitInstances(Db& db, std::optional<uint32_t> pid) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT id FROM jit_instances WHERE ?1 IS NULL OR pid=?1 "
                                      "ORDER BY dump_timestamp, id"));
  q.Bind(1, pid ? std::optional<int64_t>(*pid) : std::nullopt);
  std::vector<int64_t> ids;
  RETURN_IF_ERROR(q.EachRow([&] { ids.push_back(q.Int(0)); }));
  std::vector<JitInstanceRow> out;
  for (int64_t id : ids) {
    ASSIGN_OR_RETURN(JitInstanceRow r, JitInstanceById(db, id));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::optional<JitPlacementRow>> JitPlacementAt(Db& db, int64_t instance_id, uint64_t addr,
                                                              std::optional<uint64_t> time) {
  // The range scan is bounded below by the largest code size in the instance, so it uses the
  // (instance_id, addr) index.
  ASSIGN_OR_RETURN(Stmt q,
                   db.Prepare(StrCat("SELECT p.addr, p.time, p.until, p.kind, ", kLoadColumns,
                                     " FROM jit_placements p JOIN jit_loads l ON l.id = p.load_id "
                                     "JOIN jit_instances i ON i.id = p.instance_id "
                                     "WHERE p.instance_id=?1 AND p.addr <= ?2 AND p.addr >= ?2 - i.max_code_size "
                                     "AND ?2 < p.addr + p.size AND (?3 IS NULL OR p.time <= ?3) "
                                     "ORDER BY (p.until IS NOT NULL AND (?3 IS NULL OR p.until <= ?3)), p.time DESC, "
                                     "p.file_offset DESC LIMIT 1")));
  q.Bind(1, instance_id).Bind(2, ToDb(addr));
  if (time) {
    q.Bind(3, ToDb(*time));
  } else {
    q.BindNull(3);
  }
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<JitPlacementRow>();
  JitPlacementRow p;
  p.load = LoadFromRow(q, 4);
  p.addr = FromDb(q.Int(0));
  p.time = FromDb(q.Int(1));
  if (!q.IsNull(2)) p.until = FromDb(q.Int(2));
  p.kind = q.Text(3);
  return std::optional<JitPlacementRow>(std::move(p));
}

absl::StatusOr<std::map<std::string, std::string>> JitBuildIdsOf(Db& db, int64_t load_id) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT scheme, build_id FROM jit_build_ids WHERE load_id=? ORDER BY scheme"));
  q.Bind(1, load_id);
  std::map<std::string, std::string> out;
  RETURN_IF_ERROR(q.EachRow([&] { out[q.Text(0)] = q.Text(1); }));
  return out;
}

absl::StatusOr<std::vector<JitLineRow>> JitLinesOf(Db& db, int64_t load_id) {
  ASSIGN_OR_RETURN(Stmt q,
                   db.Prepare("SELECT j.addr - l.line_bias, j.line, j.discrim, j.file FROM jit_lines j "
                              "JOIN jit_loads l ON l.id = j.load_id WHERE j.load_id=? ORDER BY j.addr, j.rowid"));
  q.Bind(1, load_id);
  std::vector<JitLineRow> out;
  RETURN_IF_ERROR(q.EachRow([&] {
    out.push_back(
        JitLineRow{q.Text(3), static_cast<uint32_t>(q.Int(1)), static_cast<uint32_t>(q.Int(2)), FromDb(q.Int(0))});
  }));
  return out;
}

absl::StatusOr<bool> HasPerfMap(Db& db, uint32_t pid) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT 1 FROM jit_perf_maps WHERE pid=? LIMIT 1"));
  q.Bind(1, static_cast<int64_t>(pid));
  return q.Step();
}

absl::StatusOr<std::optional<PerfMapEntryRow>> PerfMapEntryAt(Db& db, uint32_t pid, uint64_t addr) {
  ASSIGN_OR_RETURN(Stmt m, db.Prepare("SELECT id, path, max_size FROM jit_perf_maps WHERE pid=? "
                                      "ORDER BY ingested_at DESC, id DESC LIMIT 1"));
  m.Bind(1, static_cast<int64_t>(pid));
  ASSIGN_OR_RETURN(bool have, m.Step());
  if (!have) return std::optional<PerfMapEntryRow>();
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT start, size, name, line FROM jit_perf_map_entries WHERE map_id=?1 "
                                      "AND start <= ?2 AND start >= ?2 - ?3 AND ?2 < start + size "
                                      "ORDER BY line DESC LIMIT 1"));
  q.Bind(1, m.Int(0)).Bind(2, ToDb(addr)).Bind(3, m.Int(2));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<PerfMapEntryRow>();
  PerfMapEntryRow hit;
  hit.path = m.Text(1);
  hit.entry = ingest::PerfMapEntry{FromDb(q.Int(0)), FromDb(q.Int(1)), q.Text(2), static_cast<size_t>(q.Int(3))};
  return std::optional<PerfMapEntryRow>(std::move(hit));
}

absl::StatusOr<std::vector<std::pair<std::string, JitLoadRow>>> JitLoadsWithBuildId(Db& db, const std::string& hex) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat("SELECT b.scheme, ", kLoadColumns,
                                             " FROM jit_build_ids b JOIN jit_loads l ON l.id = b.load_id "
                                             "WHERE b.build_id=? ORDER BY l.instance_id, l.file_offset, b.scheme")));
  q.Bind(1, hex);
  std::vector<std::pair<std::string, JitLoadRow>> out;
  RETURN_IF_ERROR(q.EachRow([&] { out.emplace_back(q.Text(0), LoadFromRow(q, 1)); }));
  return out;
}

absl::StatusOr<int64_t> CountJitLoadsWithBuildId(Db& db, const std::string& hex) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT count(DISTINCT load_id) FROM jit_build_ids WHERE build_id=?"));
  q.Bind(1, hex);
  ASSIGN_OR_RETURN(bool row, q.Step());
  return row ? q.Int(0) : 0;
}

absl::StatusOr<std::vector<JitBuildIdRow>> JitSharedBuildIdRows(Db& db, std::optional<std::string_view> scheme) {
  ASSIGN_OR_RETURN(Stmt q,
                   db.Prepare(StrCat("SELECT b.scheme, b.build_id, ", kLoadColumns,
                                     " FROM jit_build_ids b JOIN jit_loads l ON l.id = b.load_id "
                                     "WHERE (?1 IS NULL OR b.scheme = ?1) AND (b.scheme, b.build_id) IN "
                                     "(SELECT scheme, build_id FROM jit_build_ids WHERE (?1 IS NULL OR scheme=?1) "
                                     "GROUP BY scheme, build_id HAVING count(*) > 1) "
                                     "ORDER BY b.scheme, b.build_id, l.instance_id, l.file_offset")));
  q.Bind(1, scheme);
  std::vector<JitBuildIdRow> out;
  RETURN_IF_ERROR(q.EachRow([&] { out.push_back(JitBuildIdRow{q.Text(0), q.Text(1), LoadFromRow(q, 2)}); }));
  return out;
}

absl::StatusOr<std::map<std::string, std::pair<int64_t, int64_t>>> JitBuildIdCounts(Db& db) {
  ASSIGN_OR_RETURN(Stmt q,
                   db.Prepare("SELECT scheme, count(*), count(DISTINCT build_id) FROM jit_build_ids GROUP BY scheme"));
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  RETURN_IF_ERROR(q.EachRow([&] { out[q.Text(0)] = {q.Int(1), q.Int(2)}; }));
  return out;
}

absl::StatusOr<std::vector<JitLoadWithCode>> JitLoadsOfInstance(Db& db, int64_t instance_id) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat("SELECT c.bytes, ", kLoadColumns,
                                             " FROM jit_loads l JOIN jit_code c ON c.id = l.code_id "
                                             "WHERE l.instance_id=? ORDER BY l.file_offset")));
  q.Bind(1, instance_id);
  std::vector<JitLoadWithCode> out;
  RETURN_IF_ERROR(q.EachRow([&] { out.push_back(JitLoadWithCode{LoadFromRow(q, 1), q.Text(0)}); }));
  return out;
}

absl::StatusOr<std::vector<JitLoadRow>> JitLoadsByPidIndex(Db& db, uint32_t pid, uint64_t code_index) {
  // (instance_id, code_index) is indexed; the IN list keeps the lookup on that index (an ORDER BY
  // file_offset would make SQLite walk every load of each instance instead: callers sort).
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat("SELECT ", kLoadColumns,
                                             " FROM jit_loads l WHERE l.instance_id IN "
                                             "(SELECT id FROM jit_instances) AND l.code_index=?2 AND l.pid=?1")));
  q.Bind(1, static_cast<int64_t>(pid)).Bind(2, ToDb(code_index));
  std::vector<JitLoadRow> out;
  RETURN_IF_ERROR(q.EachRow([&] { out.push_back(LoadFromRow(q, 0)); }));
  return out;
}

}  // namespace symdex::store
