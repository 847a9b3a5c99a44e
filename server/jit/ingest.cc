#include "server/jit/ingest.h"

#include "server/common/unique_fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <set>

#include "server/common/strings.h"
#include "server/ingest/jitdump.h"
#include "server/ingest/perf_map.h"
#include "server/jit/build_ids.h"
#include "server/store/jit_store.h"

namespace symdex::jit {
namespace {

namespace fs = std::filesystem;
using ingest::CodeLoad;
using ingest::CodeMove;
using ingest::DebugEntry;
using ingest::DebugInfo;
using ingest::JitdumpHeader;
using ingest::JitdumpReader;
using ingest::Record;
using ingest::RecordPrefix;
using store::Db;

// Read a dump in chunks of this size (grown when one record is larger), so a 100 MB dump is never
// held in memory whole.
constexpr size_t kChunk = 16 << 20;
// V8 writes DEBUG_INFO addresses as code address + pc offset + its kElfHeaderSize (0x40), the
// .text offset perf's genelf used before late 2022 (v8 src/diagnostics/perf-jit.cc).
constexpr uint64_t kV8LineBias = 0x40;

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
  uint64_t used = ingest::kJitRecordPrefixSize + 16;
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
    ASSIGN_OR_RETURN(store::JitLoadWriter writer, store::JitLoadWriter::Prepare(db_));
    w_.emplace(std::move(writer));
    ASSIGN_OR_RETURN(instance_id_, store::UpsertJitInstance(db_, header_));
    uint64_t start = header_.total_size;
    bool closed = false;
    ASSIGN_OR_RETURN(auto resume, store::JitSourceResume(db_, instance_id_, r_.path));
    if (resume) {
      start = resume->resume_offset;
      closed = resume->status == "closed";
    }
    r_.start_offset = start;
    if (r_.file_size < start) {
      return absl::FailedPreconditionError(StrCat(r_.path, ": the file (", r_.file_size,
                                                  " bytes) is shorter than what was ingested from it before (", start,
                                                  " bytes) although its header is the same; nothing changed"));
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
        const RecordPrefix& p = ingest::PrefixOf(rec);
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
    RETURN_IF_ERROR(
        store::UpsertJitSource(db_, store::JitSourceUpdate{.instance_id = instance_id_,
                                                           .path = r_.path,
                                                           .resume_offset = safe_end,
                                                           .file_size = r_.file_size,
                                                           .new_records = static_cast<int64_t>(r_.loads + r_.moves),
                                                           .status = r_.status,
                                                           .message = r_.message,
                                                           .ingested_at = Now()}));
    RETURN_IF_ERROR(store::RaiseJitMaxCodeSize(db_, instance_id_, max_size_));
    return tx.Commit();
  }

 private:
  absl::Status Insert(const Record& rec) {
    if (const auto* load = std::get_if<CodeLoad>(&rec)) return InsertLoad(*load);
    if (const auto* move = std::get_if<CodeMove>(&rec)) {
      moves_.push_back(*move);
      return absl::OkStatus();
    }
    if (std::holds_alternative<ingest::UnknownRecord>(rec)) ++r_.unknown_records;
    return absl::OkStatus();
  }

  absl::Status InsertLoad(const CodeLoad& load) {
    std::map<JitBuildIdScheme, std::string> ids;
    for (JitBuildIdScheme s : kAllJitBuildIdSchemes) {
      ASSIGN_OR_RETURN(BuildId id, JitBuildId(s, header_, load));
      ids[s] = id.ToHex();
    }
    ASSIGN_OR_RETURN(int64_t code_id, w_->CodeId(ids[JitBuildIdScheme::kSha1Code], load.code));
    const bool lines_ok = load.debug_info && DebugInfoPlausible(*load.debug_info, load);
    if (load.debug_info && !lines_ok) ++r_.rejected_debug_infos;
    uint64_t bias = 0;
    if (lines_ok && !load.debug_info->entries.empty() && StartsWith(load.name, "JS:")) {
      bias = kV8LineBias;
      for (const DebugEntry& e : load.debug_info->entries) {
        if (e.addr < load.code_addr + kV8LineBias) bias = 0;
      }
    }
    ASSIGN_OR_RETURN(std::optional<int64_t> load_id, w_->InsertLoad(instance_id_, load, code_id, bias));
    if (!load_id) {
      ++r_.duplicates;
      return absl::OkStatus();
    }
    ++r_.loads;
    max_size_ = std::max(max_size_, load.code_size);
    RETURN_IF_ERROR(w_->InsertPlacement(*load_id, instance_id_, load.code_addr, load.code_size, load.prefix.timestamp,
                                        load.prefix.file_offset, "load")
                        .status());
    if (lines_ok) {
      ++r_.debug_infos;
      for (const DebugEntry& e : load.debug_info->entries) RETURN_IF_ERROR(w_->InsertLine(*load_id, e));
    }
    for (const auto& [scheme, hex] : ids)
      RETURN_IF_ERROR(w_->InsertBuildId(*load_id, JitBuildIdSchemeName(scheme), hex));
    return absl::OkStatus();
  }

  // Moves are applied after the loads of the same chunk are in, in file order.
  absl::Status FinishMoves() {
    for (const CodeMove& m : moves_) {
      ASSIGN_OR_RETURN(std::optional<int64_t> load_id,
                       w_->LoadBefore(instance_id_, m.code_index, m.prefix.file_offset));
      if (!load_id) {
        ++r_.orphan_moves;
        continue;
      }
      ASSIGN_OR_RETURN(bool added, w_->InsertPlacement(*load_id, instance_id_, m.new_code_addr, m.code_size,
                                                       m.prefix.timestamp, m.prefix.file_offset, "move"));
      if (!added) {
        ++r_.duplicates;
        continue;
      }
      ++r_.moves;
      max_size_ = std::max(max_size_, m.code_size);
      RETURN_IF_ERROR(w_->ClosePlacements(*load_id, m.prefix.timestamp, m.prefix.file_offset));
    }
    moves_.clear();
    return absl::OkStatus();
  }

  Db& db_;
  IngestReport& r_;
  JitdumpHeader header_;
  int64_t instance_id_ = 0;
  uint64_t max_size_ = 0;
  std::optional<store::JitLoadWriter> w_;
  std::vector<CodeMove> moves_;
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
  ASSIGN_OR_RETURN(auto latest, store::LatestPerfMap(db, r.path));
  if (latest) {
    map_id = latest->id;
    generation = latest->generation;
    consumed = latest->consumed;
    next_line = latest->next_line;
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
    ASSIGN_OR_RETURN(map_id, store::InsertPerfMap(db, *pid, r.path, generation, Now()));
  }
  r.start_offset = consumed;
  ingest::PerfMapParseOptions opt;
  opt.first_line_number = static_cast<size_t>(next_line);
  ASSIGN_OR_RETURN(ingest::PerfMapParseResult parsed,
                   ingest::ParsePerfMap(std::string_view(contents).substr(consumed), r.path, opt));
  r.bytes_read = contents.size() - consumed;
  RETURN_IF_ERROR(store::InsertPerfMapEntries(db, map_id, parsed.entries));
  uint64_t max_size = 0;
  for (const ingest::PerfMapEntry& e : parsed.entries) max_size = std::max(max_size, e.size);
  r.map_entries = parsed.entries.size();
  r.malformed_lines = parsed.malformed_lines;
  r.end_offset = consumed + parsed.consumed_bytes;
  RETURN_IF_ERROR(
      store::UpdatePerfMap(db, store::PerfMapUpdate{.map_id = map_id,
                                                    .consumed = r.end_offset,
                                                    .next_line = static_cast<int64_t>(parsed.next_line_number),
                                                    .new_entries = static_cast<int64_t>(parsed.entries.size()),
                                                    .new_malformed = static_cast<int64_t>(parsed.malformed_lines),
                                                    .max_size = max_size,
                                                    .ingested_at = Now()}));
  if (parsed.incomplete_tail) {
    r.status = "truncated";
    r.message = StrCat("last line has no newline yet (offset ", r.end_offset, "): left for the next run");
  } else {
    r.status = parsed.entries.empty() && consumed > 0 ? "unchanged" : "complete";
  }
  for (const std::string& issue : parsed.issues) r.message += (r.message.empty() ? "" : "; ") + issue;
  return tx.Commit();
}

}  // namespace

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
  UniqueFd fd(raw);
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
  if (r.file_size > (uint64_t{1} << 32))
    return fail(absl::InvalidArgumentError(StrCat(path, ": too large for a perf map")));
  auto contents = ReadAt(fd.get(), 0, r.file_size, path);
  if (!contents.ok()) return fail(contents.status());
  absl::Status s = IngestPerfMap(db, *contents, r);
  if (!s.ok()) return fail(s);
  return r;
}

absl::StatusOr<std::vector<IngestReport>> Ingester::Ingest(const std::vector<std::string>& paths) {
  ASSIGN_OR_RETURN(auto files, ExpandJitPaths(paths));
  std::vector<IngestReport> out;
  for (const auto& f : files) {
    std::lock_guard<std::mutex> l(mu_);
    out.push_back(IngestJitFile(writer_, f));
  }
  return out;
}

}  // namespace symdex::jit
