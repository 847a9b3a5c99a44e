#include "server/jit/jit_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "server/common/strings.h"
#include "server/jit/jitdump.h"

namespace symdex::jit {
namespace {

namespace fs = std::filesystem;
using store::Db;
using store::FromDb;
using store::Stmt;
using store::ToDb;

constexpr JitBuildIdScheme kAllSchemes[] = {JitBuildIdScheme::kMd5Addr, JitBuildIdScheme::kSha1Code,
                                           JitBuildIdScheme::kSha1Symtab, JitBuildIdScheme::kSymdex};
// Read a dump in chunks of this size (grown when one record is larger), so a 100 MB dump is never
// held in memory whole.
constexpr size_t kChunk = 16 << 20;
// V8 writes DEBUG_INFO addresses as code address + pc offset + its kElfHeaderSize (0x40), the
// .text offset perf's genelf used before late 2022 (v8 src/diagnostics/perf-jit.cc).
constexpr uint64_t kV8LineBias = 0x40;

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads up to `n` bytes at `offset` (fewer at EOF).
absl::StatusOr<std::string> ReadAt(int fd, uint64_t offset, size_t n, const std::string& path) {
  std::string buf(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(StrCat("cannot read ", path, " at offset ", offset + got, ": ", strerror(errno)));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  buf.resize(got);
  return buf;
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// ---------------------------------------------------------------------------------------------
// jitdump ingest

// A DEBUG_INFO record whose entries do not fill it (more than the 8-byte alignment padding left)
// or point outside the code was not written as the format says. Node 20's V8 writes such records
// for user scripts (the file name is not the script's: freed memory, then garbage entries); their
// lines would be wrong, so they are dropped and counted.
bool DebugInfoPlausible(const DebugInfo& d, const CodeLoad& load) {
  uint64_t used = kJitRecordPrefixSize + 16;
  for (const DebugEntry& e : d.entries) {
    used += 16 + (e.repeated_file ? 2 : e.file.size() + 1);
    if (e.addr < load.code_addr || e.addr - load.code_addr > load.code_size + kV8LineBias) return false;
  }
  return d.prefix.total_size >= used && d.prefix.total_size - used < 8;
}

class DumpIngest {
 public:
  DumpIngest(Db& db, IngestReport& report) : db_(db), r_(report) {}

  absl::Status Run(int fd) {
    // Header first: a file shorter than its header is a dump being created.
    ASSIGN_OR_RETURN(std::string head, ReadAt(fd, 0, 4096, r_.path));
    JitdumpReader probe(r_.path);
    std::vector<Record> ignored;
    // Only the header matters here; a bad record later in these bytes is met again below.
    auto probed = probe.Feed(head, &ignored);
    if (!probe.header()) {
      if (!probed.ok()) return probed.status();
      r_.status = "truncated";
      r_.message = StrCat("header incomplete (", r_.file_size, " bytes): nothing to ingest yet");
      return absl::OkStatus();
    }
    header_ = *probe.header();
    r_.pid = header_.pid;
    r_.dump_timestamp = header_.timestamp;

    ASSIGN_OR_RETURN(auto tx, store::Transaction::Begin(db_));
    RETURN_IF_ERROR(Prepare());
    RETURN_IF_ERROR(UpsertInstance());
    uint64_t start = header_.total_size;
    bool closed = false;
    {
      ASSIGN_OR_RETURN(Stmt q, db_.Prepare("SELECT resume_offset, status FROM jit_sources WHERE instance_id=? AND path=?"));
      q.Bind(1, instance_id_).Bind(2, r_.path);
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (row) {
        start = FromDb(q.Int(0));
        closed = q.Text(1) == "closed";
      }
    }
    r_.start_offset = start;
    if (r_.file_size < start) {
      return absl::FailedPreconditionError(
          StrCat(r_.path, ": the file (", r_.file_size, " bytes) is shorter than what was ingested from it before (",
                 start, " bytes) although its header is the same; nothing changed"));
    }
    JitdumpReader reader(r_.path);
    reader.ResumeAt(header_, start, closed);
    uint64_t safe_end = start;  // after the last record taken with nothing pending
    uint64_t incomplete = 0;
    size_t chunk = kChunk;
    absl::Status parse_error;
    while (reader.offset() < r_.file_size) {
      ASSIGN_OR_RETURN(std::string data, ReadAt(fd, reader.offset(), chunk, r_.path));
      if (data.empty()) break;
      r_.bytes_read += data.size();
      std::vector<Record> records;
      uint64_t before = reader.offset();
      auto fed = reader.Feed(data, &records);
      for (const Record& rec : records) {
        RETURN_IF_ERROR(Insert(rec));
        const RecordPrefix& p = PrefixOf(rec);
        safe_end = p.file_offset + p.total_size;
      }
      if (!fed.ok()) {
        parse_error = fed.status();
        break;
      }
      if (!reader.has_pending_attachments()) safe_end = reader.offset();
      incomplete = fed->incomplete_bytes;
      if (reader.offset() == before) {
        // Not even one record fits in this chunk: read more, unless the file ends here.
        if (before + data.size() >= r_.file_size) break;
        chunk *= 2;
      }
    }
    RETURN_IF_ERROR(FinishMoves());
    closed = reader.closed();
    if (!parse_error.ok()) {
      r_.status = "error";
      r_.error = parse_error;
      r_.message = std::string(parse_error.message());
    } else if (closed) {
      r_.status = "closed";
    } else if (incomplete > 0) {
      r_.status = "truncated";
      r_.message = StrCat("incomplete record at offset ", reader.offset(), " (", incomplete,
                          " bytes): ingested the complete records before it; run again when the file has grown");
    } else {
      r_.status = "complete";
    }
    if (r_.status != "error" && r_.loads + r_.moves + r_.debug_infos + r_.duplicates == 0 && start == safe_end &&
        start > header_.total_size) {
      r_.status = r_.status == "truncated" ? "truncated" : (closed ? "closed" : "unchanged");
    }
    r_.end_offset = safe_end;
    {
      ASSIGN_OR_RETURN(Stmt u, db_.Prepare(
                                   "INSERT INTO jit_sources (instance_id, path, resume_offset, file_size, records, status, "
                                   "message, ingested_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                                   "ON CONFLICT (instance_id, path) DO UPDATE SET resume_offset=?3, file_size=?4, "
                                   "records=records+?5, status=?6, message=?7, ingested_at=?8"));
      u.Bind(1, instance_id_)
          .Bind(2, r_.path)
          .Bind(3, ToDb(safe_end))
          .Bind(4, ToDb(r_.file_size))
          .Bind(5, static_cast<int64_t>(r_.loads + r_.moves))
          .Bind(6, r_.status)
          .Bind(7, r_.message)
          .Bind(8, Now());
      RETURN_IF_ERROR(u.Run());
      ASSIGN_OR_RETURN(Stmt m, db_.Prepare("UPDATE jit_instances SET max_code_size = max(max_code_size, ?) WHERE id=?"));
      m.Bind(1, ToDb(max_size_)).Bind(2, instance_id_);
      RETURN_IF_ERROR(m.Run());
    }
    return tx.Commit();
  }

 private:
  absl::Status Prepare() {
    ASSIGN_OR_RETURN(ins_code_, db_.Prepare("INSERT INTO jit_code (sha1, size, bytes) VALUES (?1, ?2, CAST(?3 AS BLOB)) "
                                            "ON CONFLICT (sha1) DO NOTHING"));
    ASSIGN_OR_RETURN(sel_code_, db_.Prepare("SELECT id FROM jit_code WHERE sha1=?"));
    ASSIGN_OR_RETURN(ins_load_, db_.Prepare("INSERT OR IGNORE INTO jit_loads (instance_id, file_offset, time, pid, tid, "
                                            "vma, code_addr, code_size, code_index, name, code_id, line_bias, "
                                            "has_unwinding) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(ins_place_, db_.Prepare("INSERT OR IGNORE INTO jit_placements (load_id, instance_id, addr, size, "
                                             "time, until, file_offset, kind) VALUES (?,?,?,?,?,NULL,?,?)"));
    ASSIGN_OR_RETURN(ins_line_, db_.Prepare("INSERT INTO jit_lines (load_id, addr, line, discrim, file) VALUES (?,?,?,?,?)"));
    ASSIGN_OR_RETURN(ins_id_, db_.Prepare("INSERT OR IGNORE INTO jit_build_ids (load_id, scheme, build_id) VALUES (?,?,?)"));
    ASSIGN_OR_RETURN(sel_index_, db_.Prepare("SELECT id FROM jit_loads WHERE instance_id=? AND code_index=? AND "
                                             "file_offset < ? ORDER BY file_offset DESC LIMIT 1"));
    return absl::OkStatus();
  }

  absl::Status UpsertInstance() {
    ASSIGN_OR_RETURN(Stmt ins, db_.Prepare("INSERT OR IGNORE INTO jit_instances (pid, dump_timestamp, version, elf_mach, "
                                           "big_endian, flags) VALUES (?,?,?,?,?,?)"));
    ins.Bind(1, static_cast<int64_t>(header_.pid))
        .Bind(2, ToDb(header_.timestamp))
        .Bind(3, static_cast<int64_t>(header_.version))
        .Bind(4, static_cast<int64_t>(header_.elf_mach))
        .Bind(5, static_cast<int64_t>(header_.byte_order == std::endian::big))
        .Bind(6, ToDb(header_.flags));
    RETURN_IF_ERROR(ins.Run());
    ASSIGN_OR_RETURN(Stmt sel, db_.Prepare("SELECT id FROM jit_instances WHERE pid=? AND dump_timestamp=?"));
    sel.Bind(1, static_cast<int64_t>(header_.pid)).Bind(2, ToDb(header_.timestamp));
    ASSIGN_OR_RETURN(bool row, sel.Step());
    if (!row) return absl::InternalError("jit instance row vanished");
    instance_id_ = sel.Int(0);
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> CodeId(const std::string& sha1, std::string_view code) {
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

  absl::Status Insert(const Record& rec) {
    if (const auto* load = std::get_if<CodeLoad>(&rec)) return InsertLoad(*load);
    if (const auto* move = std::get_if<CodeMove>(&rec)) {
      moves_.push_back(*move);
      return absl::OkStatus();
    }
    if (std::holds_alternative<UnknownRecord>(rec)) ++r_.unknown_records;
    return absl::OkStatus();
  }

  absl::Status InsertLoad(const CodeLoad& load) {
    std::map<JitBuildIdScheme, std::string> ids;
    for (JitBuildIdScheme s : kAllSchemes) {
      ASSIGN_OR_RETURN(BuildId id, JitBuildId(s, header_, load));
      ids[s] = id.ToHex();
    }
    ASSIGN_OR_RETURN(int64_t code_id, CodeId(ids[JitBuildIdScheme::kSha1Code], load.code));
    const bool lines_ok = load.debug_info && DebugInfoPlausible(*load.debug_info, load);
    if (load.debug_info && !lines_ok) ++r_.rejected_debug_infos;
    uint64_t bias = 0;
    if (lines_ok && !load.debug_info->entries.empty() && StartsWith(load.name, "JS:")) {
      bias = kV8LineBias;
      for (const DebugEntry& e : load.debug_info->entries) {
        if (e.addr < load.code_addr + kV8LineBias) bias = 0;
      }
    }
    ins_load_.Reset();
    ins_load_.Bind(1, instance_id_)
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
        .Bind(12, ToDb(bias))
        .Bind(13, static_cast<int64_t>(load.unwinding_info.has_value()));
    RETURN_IF_ERROR(ins_load_.Run());
    if (sqlite3_changes(db_.raw()) == 0) {
      ++r_.duplicates;
      return absl::OkStatus();
    }
    int64_t load_id = sqlite3_last_insert_rowid(db_.raw());
    ++r_.loads;
    max_size_ = std::max(max_size_, load.code_size);
    ins_place_.Reset();
    ins_place_.Bind(1, load_id)
        .Bind(2, instance_id_)
        .Bind(3, ToDb(load.code_addr))
        .Bind(4, ToDb(load.code_size))
        .Bind(5, ToDb(load.prefix.timestamp))
        .Bind(6, ToDb(load.prefix.file_offset))
        .Bind(7, "load");
    RETURN_IF_ERROR(ins_place_.Run());
    if (lines_ok) {
      ++r_.debug_infos;
      for (const DebugEntry& e : load.debug_info->entries) {
        ins_line_.Reset();
        ins_line_.Bind(1, load_id)
            .Bind(2, ToDb(e.addr))
            .Bind(3, static_cast<int64_t>(e.line))
            .Bind(4, static_cast<int64_t>(e.discrim))
            .Bind(5, e.file);
        RETURN_IF_ERROR(ins_line_.Run());
      }
    }
    for (const auto& [scheme, hex] : ids) {
      ins_id_.Reset();
      ins_id_.Bind(1, load_id).Bind(2, JitBuildIdSchemeName(scheme)).Bind(3, hex);
      RETURN_IF_ERROR(ins_id_.Run());
    }
    return absl::OkStatus();
  }

  // Moves are applied after the loads of the same chunk are in, in file order.
  absl::Status FinishMoves() {
    ASSIGN_OR_RETURN(Stmt close_prev, db_.Prepare("UPDATE jit_placements SET until=? WHERE load_id=? AND until IS NULL "
                                                  "AND file_offset < ?"));
    for (const CodeMove& m : moves_) {
      sel_index_.Reset();
      sel_index_.Bind(1, instance_id_).Bind(2, ToDb(m.code_index)).Bind(3, ToDb(m.prefix.file_offset));
      ASSIGN_OR_RETURN(bool row, sel_index_.Step());
      if (!row) {
        ++r_.orphan_moves;
        continue;
      }
      int64_t load_id = sel_index_.Int(0);
      ins_place_.Reset();
      ins_place_.Bind(1, load_id)
          .Bind(2, instance_id_)
          .Bind(3, ToDb(m.new_code_addr))
          .Bind(4, ToDb(m.code_size))
          .Bind(5, ToDb(m.prefix.timestamp))
          .Bind(6, ToDb(m.prefix.file_offset))
          .Bind(7, "move");
      RETURN_IF_ERROR(ins_place_.Run());
      if (sqlite3_changes(db_.raw()) == 0) {
        ++r_.duplicates;
        continue;
      }
      ++r_.moves;
      max_size_ = std::max(max_size_, m.code_size);
      close_prev.Reset();
      close_prev.Bind(1, ToDb(m.prefix.timestamp)).Bind(2, load_id).Bind(3, ToDb(m.prefix.file_offset));
      RETURN_IF_ERROR(close_prev.Run());
    }
    moves_.clear();
    return absl::OkStatus();
  }

  Db& db_;
  IngestReport& r_;
  JitdumpHeader header_;
  int64_t instance_id_ = 0;
  uint64_t max_size_ = 0;
  std::unordered_map<std::string, int64_t> code_ids_;
  std::vector<CodeMove> moves_;
  Stmt ins_code_, sel_code_, ins_load_, ins_place_, ins_line_, ins_id_, sel_index_;
};

// ---------------------------------------------------------------------------------------------
// perf map ingest

std::optional<uint32_t> PidFromMapName(const std::string& path) {
  std::string base = fs::path(path).filename().string();
  if (!StartsWith(base, "perf-") || base.size() < 10 || base.substr(base.size() - 4) != ".map") return std::nullopt;
  std::string digits = base.substr(5, base.size() - 9);
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return static_cast<uint32_t>(std::stoul(digits));
}

absl::Status IngestPerfMap(Db& db, const std::string& contents, IngestReport& r) {
  auto pid = PidFromMapName(r.path);
  if (!pid) {
    return absl::InvalidArgumentError(
        StrCat(r.path, ": not a jitdump (no JiTD magic) and not named perf-<pid>.map, so its pid is unknown"));
  }
  r.pid = *pid;
  ASSIGN_OR_RETURN(auto tx, store::Transaction::Begin(db));
  int64_t map_id = 0, generation = 0;
  uint64_t consumed = 0;
  int64_t next_line = 1;
  {
    ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT id, generation, consumed, next_line FROM jit_perf_maps WHERE path=? "
                                        "ORDER BY generation DESC LIMIT 1"));
    q.Bind(1, r.path);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      map_id = q.Int(0);
      generation = q.Int(1);
      consumed = FromDb(q.Int(2));
      next_line = q.Int(3);
    }
  }
  if (map_id != 0 && contents.size() < consumed) {
    // Shorter than what was read: rewritten by a new process that got the same pid.
    map_id = 0;
    ++generation;
    consumed = 0;
    next_line = 1;
    r.message = "the file is shorter than before: a new process with the same pid; kept the old entries";
  }
  if (map_id == 0) {
    ASSIGN_OR_RETURN(Stmt ins, db.Prepare("INSERT INTO jit_perf_maps (pid, path, generation, consumed, next_line, "
                                          "entries, malformed, max_size, ingested_at) VALUES (?,?,?,0,1,0,0,0,?)"));
    ins.Bind(1, static_cast<int64_t>(*pid)).Bind(2, r.path).Bind(3, generation).Bind(4, Now());
    RETURN_IF_ERROR(ins.Run());
    map_id = sqlite3_last_insert_rowid(db.raw());
  }
  r.start_offset = consumed;
  PerfMapParseOptions opt;
  opt.first_line_number = static_cast<size_t>(next_line);
  ASSIGN_OR_RETURN(PerfMapParseResult parsed,
                   ParsePerfMap(std::string_view(contents).substr(consumed), r.path, opt));
  r.bytes_read = contents.size() - consumed;
  ASSIGN_OR_RETURN(Stmt ins, db.Prepare("INSERT OR REPLACE INTO jit_perf_map_entries (map_id, start, size, name, line) "
                                        "VALUES (?,?,?,?,?)"));
  uint64_t max_size = 0;
  for (const PerfMapEntry& e : parsed.entries) {
    ins.Reset();
    ins.Bind(1, map_id).Bind(2, ToDb(e.start)).Bind(3, ToDb(e.size)).Bind(4, e.name).Bind(5, static_cast<int64_t>(e.line));
    RETURN_IF_ERROR(ins.Run());
    max_size = std::max(max_size, e.size);
  }
  r.map_entries = parsed.entries.size();
  r.malformed_lines = parsed.malformed_lines;
  r.end_offset = consumed + parsed.consumed_bytes;
  ASSIGN_OR_RETURN(Stmt up, db.Prepare("UPDATE jit_perf_maps SET consumed=?, next_line=?, entries=entries+?, "
                                       "malformed=malformed+?, max_size=max(max_size, ?), ingested_at=? WHERE id=?"));
  up.Bind(1, ToDb(r.end_offset))
      .Bind(2, static_cast<int64_t>(parsed.next_line_number))
      .Bind(3, static_cast<int64_t>(parsed.entries.size()))
      .Bind(4, static_cast<int64_t>(parsed.malformed_lines))
      .Bind(5, ToDb(max_size))
      .Bind(6, Now())
      .Bind(7, map_id);
  RETURN_IF_ERROR(up.Run());
  if (parsed.incomplete_tail) {
    r.status = "truncated";
    r.message = StrCat("last line has no newline yet (offset ", r.end_offset, "): left for the next run");
  } else {
    r.status = parsed.entries.empty() && consumed > 0 ? "unchanged" : "complete";
  }
  for (const std::string& issue : parsed.issues) r.message += (r.message.empty() ? "" : "; ") + issue;
  return tx.Commit();
}

// ---------------------------------------------------------------------------------------------
// queries

constexpr char kLoadColumns[] =
    "l.id, l.pid, l.code_index, l.name, l.code_addr, l.code_size, l.time, l.file_offset, l.instance_id";

JitLoadInfo LoadFromRow(const Stmt& s, int col) {
  JitLoadInfo info;
  info.load_id = s.Int(col + 0);
  info.pid = static_cast<uint32_t>(s.Int(col + 1));
  info.code_index = FromDb(s.Int(col + 2));
  info.name = s.Text(col + 3);
  info.code_addr = FromDb(s.Int(col + 4));
  info.code_size = FromDb(s.Int(col + 5));
  info.load_time = FromDb(s.Int(col + 6));
  info.file_offset = FromDb(s.Int(col + 7));
  info.instance.id = s.Int(col + 8);
  info.addr = info.code_addr;
  info.placed_time = info.load_time;
  return info;
}

absl::Status FillInstance(Db& db, JitInstance& inst) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT i.pid, i.dump_timestamp, i.elf_mach, i.big_endian, "
                                      "(SELECT path FROM jit_sources s WHERE s.instance_id=i.id ORDER BY s.id LIMIT 1), "
                                      "(SELECT status FROM jit_sources s WHERE s.instance_id=i.id ORDER BY s.ingested_at "
                                      "DESC, s.id DESC LIMIT 1), "
                                      "(SELECT count(*) FROM jit_loads l WHERE l.instance_id=i.id) "
                                      "FROM jit_instances i WHERE i.id=?"));
  q.Bind(1, inst.id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::NotFoundError(StrCat("no jit instance ", inst.id));
  inst.pid = static_cast<uint32_t>(q.Int(0));
  inst.dump_timestamp = FromDb(q.Int(1));
  inst.elf_mach = static_cast<uint32_t>(q.Int(2));
  inst.big_endian = q.Int(3) != 0;
  inst.path = q.Text(4);
  inst.status = q.Text(5);
  inst.loads = q.Int(6);
  return absl::OkStatus();
}

absl::Status FillBuildIds(Db& db, JitLoadInfo& info) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT scheme, build_id FROM jit_build_ids WHERE load_id=?"));
  q.Bind(1, info.load_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    info.build_ids[q.Text(0)] = q.Text(1);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JitLine>> LinesOf(Db& db, int64_t load_id) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT j.addr - l.line_bias, j.line, j.discrim, j.file FROM jit_lines j "
                                      "JOIN jit_loads l ON l.id = j.load_id WHERE j.load_id=? ORDER BY j.addr, j.rowid"));
  q.Bind(1, load_id);
  std::vector<JitLine> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(JitLine{q.Text(3), static_cast<uint32_t>(q.Int(1)), static_cast<uint32_t>(q.Int(2)), FromDb(q.Int(0))});
  }
  return out;
}

}  // namespace

std::string JitLoadInfo::DsoName() const { return StrCat("jitted-", pid, "-", code_index, ".so"); }

absl::StatusOr<std::vector<std::string>> ExpandJitPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) return absl::NotFoundError(StrCat(p, ": no such file or directory"));
    if (!fs::is_directory(st)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(p, ec)) {
      std::string name = entry.path().filename().string();
      bool dump = StartsWith(name, "jit-") && name.size() > 9 && name.ends_with(".dump");
      bool map = StartsWith(name, "perf-") && name.ends_with(".map");
      if ((dump || map) && entry.is_regular_file(ec)) found.push_back(entry.path().string());
    }
    if (ec) return absl::PermissionDeniedError(StrCat(p, ": cannot list: ", ec.message()));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

IngestReport IngestJitFile(Db& db, const std::string& path) {
  IngestReport r;
  r.path = path;
  auto fail = [&](absl::Status s) {
    r.status = "error";
    r.error = std::move(s);
    r.message = std::string(r.error.message());
    return r;
  };
  int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) return fail(absl::NotFoundError(StrCat("cannot open ", path, ": ", strerror(errno))));
  ScopedFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return fail(absl::InvalidArgumentError(StrCat(path, ": not a regular file")));
  }
  r.file_size = static_cast<uint64_t>(st.st_size);
  auto head = ReadAt(fd.get(), 0, 4, path);
  if (!head.ok()) return fail(head.status());
  const bool magic = head->size() == 4 && (*head == "DTiJ" || *head == "JiTD");
  const bool named_dump = StartsWith(fs::path(path).filename().string(), "jit-");
  if (magic || (named_dump && head->size() < 4)) {
    r.kind = "jitdump";
    DumpIngest ingest(db, r);
    absl::Status s = ingest.Run(fd.get());
    if (!s.ok()) return fail(s);
    return r;
  }
  r.kind = "perf-map";
  if (named_dump) return fail(absl::InvalidArgumentError(StrCat(path, " at offset 0: not a jitdump (bad magic)")));
  if (r.file_size > (uint64_t{1} << 32)) return fail(absl::InvalidArgumentError(StrCat(path, ": too large for a perf map")));
  auto contents = ReadAt(fd.get(), 0, r.file_size, path);
  if (!contents.ok()) return fail(contents.status());
  absl::Status s = IngestPerfMap(db, *contents, r);
  if (!s.ok()) return fail(s);
  return r;
}

absl::StatusOr<std::vector<JitInstance>> FindInstances(Db& db, std::optional<uint32_t> pid) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT id FROM jit_instances WHERE ?1 IS NULL OR pid=?1 "
                                      "ORDER BY dump_timestamp, id"));
  if (pid) {
    q.Bind(1, static_cast<int64_t>(*pid));
  } else {
    q.BindNull(1);
  }
  std::vector<JitInstance> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(JitInstance{.id = q.Int(0)});
  }
  for (JitInstance& i : out) RETURN_IF_ERROR(FillInstance(db, i));
  return out;
}

absl::StatusOr<std::optional<JitLoadInfo>> LookupJitAddr(Db& db, const JitInstance& instance, uint64_t addr,
                                                         std::optional<uint64_t> time) {
  // Candidates: placements covering addr, placed at or before `time`. The range scan is bounded
  // below by the largest code size in the instance, so it uses the (instance_id, addr) index.
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat(
                               "SELECT p.addr, p.time, p.until, p.kind, ", kLoadColumns,
                               " FROM jit_placements p JOIN jit_loads l ON l.id = p.load_id "
                               "JOIN jit_instances i ON i.id = p.instance_id "
                               "WHERE p.instance_id=?1 AND p.addr <= ?2 AND p.addr >= ?2 - i.max_code_size "
                               "AND ?2 < p.addr + p.size AND (?3 IS NULL OR p.time <= ?3) "
                               "ORDER BY (p.until IS NOT NULL AND (?3 IS NULL OR p.until <= ?3)), p.time DESC, "
                               "p.file_offset DESC LIMIT 1")));
  q.Bind(1, instance.id).Bind(2, ToDb(addr));
  if (time) {
    q.Bind(3, ToDb(*time));
  } else {
    q.BindNull(3);
  }
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<JitLoadInfo>();
  JitLoadInfo info = LoadFromRow(q, 4);
  info.instance = instance;
  info.addr = FromDb(q.Int(0));
  info.placed_time = FromDb(q.Int(1));
  if (!q.IsNull(2)) info.until = FromDb(q.Int(2));
  info.placed_by = q.Text(3);
  RETURN_IF_ERROR(FillBuildIds(db, info));
  // Lines are stored as the producer wrote them, relative to the load address.
  ASSIGN_OR_RETURN(std::vector<JitLine> lines, LinesOf(db, info.load_id));
  info.line_entries = static_cast<int64_t>(lines.size());
  const uint64_t as_loaded = addr - info.addr + info.code_addr;
  for (const JitLine& l : lines) {
    if (l.addr <= as_loaded) {
      info.line = l;
      info.line->addr = l.addr - info.code_addr + info.addr;
    }
  }
  return std::optional<JitLoadInfo>(std::move(info));
}

absl::StatusOr<bool> HasPerfMap(Db& db, uint32_t pid) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT 1 FROM jit_perf_maps WHERE pid=? LIMIT 1"));
  q.Bind(1, static_cast<int64_t>(pid));
  return q.Step();
}

absl::StatusOr<std::optional<PerfMapHit>> LookupPerfMap(Db& db, uint32_t pid, uint64_t addr) {
  ASSIGN_OR_RETURN(Stmt m, db.Prepare("SELECT id, path, max_size FROM jit_perf_maps WHERE pid=? "
                                      "ORDER BY ingested_at DESC, id DESC LIMIT 1"));
  m.Bind(1, static_cast<int64_t>(pid));
  ASSIGN_OR_RETURN(bool have, m.Step());
  if (!have) return std::optional<PerfMapHit>();
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT start, size, name, line FROM jit_perf_map_entries WHERE map_id=?1 "
                                      "AND start <= ?2 AND start >= ?2 - ?3 AND ?2 < start + size "
                                      "ORDER BY line DESC LIMIT 1"));
  q.Bind(1, m.Int(0)).Bind(2, ToDb(addr)).Bind(3, m.Int(2));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<PerfMapHit>();
  PerfMapHit hit;
  hit.path = m.Text(1);
  hit.pid = pid;
  hit.entry = PerfMapEntry{FromDb(q.Int(0)), FromDb(q.Int(1)), q.Text(2), static_cast<size_t>(q.Int(3))};
  return std::optional<PerfMapHit>(std::move(hit));
}

absl::StatusOr<std::vector<BuildIdMatch>> FindJitBuildId(Db& db, const std::string& hex) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat("SELECT b.scheme, ", kLoadColumns,
                                             " FROM jit_build_ids b JOIN jit_loads l ON l.id = b.load_id "
                                             "WHERE b.build_id=? ORDER BY l.instance_id, l.file_offset, b.scheme")));
  q.Bind(1, hex);
  std::vector<BuildIdMatch> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(BuildIdMatch{q.Text(0), LoadFromRow(q, 1)});
  }
  for (BuildIdMatch& m : out) {
    RETURN_IF_ERROR(FillInstance(db, m.load.instance));
    RETURN_IF_ERROR(FillBuildIds(db, m.load));
  }
  return out;
}

absl::StatusOr<std::vector<CollisionGroup>> JitCollisions(Db& db, std::optional<JitBuildIdScheme> scheme) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat("SELECT b.scheme, b.build_id, ", kLoadColumns,
                                             " FROM jit_build_ids b JOIN jit_loads l ON l.id = b.load_id "
                                             "WHERE (?1 IS NULL OR b.scheme = ?1) AND (b.scheme, b.build_id) IN "
                                             "(SELECT scheme, build_id FROM jit_build_ids WHERE (?1 IS NULL OR scheme=?1) "
                                             "GROUP BY scheme, build_id HAVING count(*) > 1) "
                                             "ORDER BY b.scheme, b.build_id, l.instance_id, l.file_offset")));
  if (scheme) {
    q.Bind(1, JitBuildIdSchemeName(*scheme));
  } else {
    q.BindNull(1);
  }
  std::vector<CollisionGroup> out;
  std::map<int64_t, JitInstance> instances;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    std::string s = q.Text(0), id = q.Text(1);
    if (out.empty() || out.back().scheme != s || out.back().build_id != id) out.push_back(CollisionGroup{s, id, {}, 0});
    out.back().loads.push_back(LoadFromRow(q, 2));
  }
  for (CollisionGroup& g : out) {
    std::set<std::string> names;
    for (JitLoadInfo& l : g.loads) {
      names.insert(l.name);
      auto it = instances.find(l.instance.id);
      if (it == instances.end()) {
        JitInstance inst{.id = l.instance.id};
        RETURN_IF_ERROR(FillInstance(db, inst));
        it = instances.emplace(inst.id, inst).first;
      }
      l.instance = it->second;
    }
    g.distinct_names = names.size();
  }
  std::stable_sort(out.begin(), out.end(), [](const CollisionGroup& a, const CollisionGroup& b) {
    if (a.scheme != b.scheme) return a.scheme < b.scheme;
    return a.loads.size() > b.loads.size();
  });
  return out;
}

absl::StatusOr<std::map<std::string, std::pair<int64_t, int64_t>>> JitIdCounts(Db& db) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT scheme, count(*), count(DISTINCT build_id) FROM jit_build_ids GROUP BY scheme"));
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out[q.Text(0)] = {q.Int(1), q.Int(2)};
  }
  return out;
}

absl::StatusOr<std::vector<JitLoadForExport>> LoadsOf(Db& db, const JitInstance& instance) {
  ASSIGN_OR_RETURN(Stmt q, db.Prepare(StrCat("SELECT c.bytes, ", kLoadColumns,
                                             " FROM jit_loads l JOIN jit_code c ON c.id = l.code_id "
                                             "WHERE l.instance_id=? ORDER BY l.file_offset")));
  q.Bind(1, instance.id);
  std::vector<JitLoadForExport> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    JitLoadForExport e;
    e.code = q.Text(0);
    e.info = LoadFromRow(q, 1);
    e.info.instance = instance;
    out.push_back(std::move(e));
  }
  for (JitLoadForExport& e : out) {
    RETURN_IF_ERROR(FillBuildIds(db, e.info));
    ASSIGN_OR_RETURN(e.lines, LinesOf(db, e.info.load_id));
    e.info.line_entries = static_cast<int64_t>(e.lines.size());
  }
  return out;
}

// The instance of `pid` meant: --instance (dump timestamp), else the latest dump opened at or
// before --time, else the only one. Several and nothing to choose by: InvalidArgument (exit 2).
absl::StatusOr<std::optional<JitInstance>> SelectInstance(store::Db& db, uint32_t pid, std::optional<uint64_t> time,
                                                          std::optional<uint64_t> dump_ts) {
  ASSIGN_OR_RETURN(auto all, FindInstances(db, pid));
  if (all.empty()) return std::optional<JitInstance>();
  if (dump_ts) {
    for (const auto& i : all) {
      if (i.dump_timestamp == *dump_ts) return std::optional<JitInstance>(i);
    }
    return absl::NotFoundError(StrCat("pid ", pid, " has no jitdump with header timestamp ", *dump_ts));
  }
  if (all.size() == 1) return std::optional<JitInstance>(all.front());
  if (time) {
    std::optional<JitInstance> best;
    for (const auto& i : all) {
      if (i.dump_timestamp <= *time) best = i;
    }
    if (best) return best;
  }
  std::string list;
  for (const auto& i : all) list += StrCat("\n  --instance ", i.dump_timestamp, "  (", i.path, ", ", i.loads, " loads)");
  return absl::InvalidArgumentError(StrCat("pid ", pid, " was used by ", all.size(),
                                           " processes that wrote jitdumps; choose one with --time or:", list));
}

}  // namespace symdex::jit
