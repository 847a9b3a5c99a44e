// Steps 3 and 4 of an index run (steps.h): which debug file each part of the target uses, and
// parsing and storing the ones not indexed yet.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>

#include "server/common/fault_point.h"
#include "server/common/file_util.h"
#include "server/common/ordered_window.h"
#include "server/common/strings.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/files/debug_finder.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/debuginfo/worker/worker_client.h"
#include "server/indexer/steps.h"
#include "server/ingest/kallsyms.h"

namespace symdex::indexer {
namespace {

using Clock = std::chrono::steady_clock;
using kernel::DebugFileStatus;

// Functions from which a debug file's join table is made on a thread of its own while the file
// is stored (vmlinux has 43k; most modules a few dozen).
constexpr size_t kJoinBesideInsert = 2048;

// A debug file's join table, made beside the last of its insert once the ids its rows get are
// known (vmlinux: 45 ms of a 160 ms insert) — when the file is large: a small one's costs less
// than a thread.
class JoinBeside {
 public:
  explicit JoinBeside(const debuginfo::DwarfIndex& di) : di_(di) {}
  JoinBeside(const JoinBeside&) = delete;  // the thread holds `this`
  JoinBeside& operator=(const JoinBeside&) = delete;

  void Start(std::vector<int64_t> ids) {
    if (di_.functions.size() < kJoinBesideInsert) return;
    thread_ = std::jthread([this, ids = std::move(ids)] { join_ = JoinTableOf(di_, ids); });
  }
  // The table of the rows `stored` wrote (made now if it was not made beside); none if the rows
  // were there already.
  std::shared_ptr<const JoinTable> Take(const store::StoredDebugFile& stored) {
    if (thread_.joinable()) thread_.join();
    if (!stored.function_ids) return nullptr;
    return join_ ? std::move(join_) : JoinTableOf(di_, *stored.function_ids);
  }

 private:
  const debuginfo::DwarfIndex& di_;
  std::shared_ptr<const JoinTable> join_;
  std::jthread thread_;  // declared last: joined (on an early return too) before join_ goes
};

// The _text address of a linked debug file (none for a relocatable one, or if unreadable).
std::optional<uint64_t> LinkedTextAddr(const debuginfo::DwarfIndex& di, const std::string& path) {
  if (di.relocatable) return std::nullopt;
  auto v = debuginfo::ReadElfSymbolValue(path, "_text");
  return v.ok() ? *v : std::nullopt;
}

// The stored index `cached` of the part's build-ID, used as it is.
void UseStored(Part& p, const store::DebugFileInfo& cached) {
  p.record.debug_file_id = cached.id;
  p.record.status = DebugFileStatus::kCached;
  p.debug_text_addr = cached.text_addr;
}

// The stored index of a build-ID when it may be reused as it is; one made from a file that
// has changed since goes to p.stale instead (parsed again, kept if that fails).
absl::StatusOr<std::optional<store::DebugFileInfo>> CurrentStoredIndex(store::Db& db, Part& p) {
  ASSIGN_OR_RETURN(auto cached, store::FindDebugFile(db, p.record.build_id));
  if (cached && !store::StoredIndexIsCurrent(*cached)) {
    p.stale = std::move(cached);
    cached.reset();
  }
  return cached;
}

// An index read from the decompressed copy `plain` (or from the file itself: null): its messages
// name the original file, its reader says what was decompressed.
void FromCopy(const debuginfo::PlainElf* plain, absl::StatusOr<debuginfo::DwarfIndex>& idx) {
  if (plain == nullptr) return;
  if (!idx.ok()) {
    idx = plain->Explain(idx.status());
    return;
  }
  idx->reader = plain->ReadBy(idx->reader);
}

// An index whose rows are in the store: what the steps after still read of it (the address-map
// plan, the build-ID check) is kept, not its rows.
void KeepBrief(absl::StatusOr<debuginfo::DwarfIndex>& idx) {
  if (!idx.ok()) return;
  debuginfo::DwarfIndex brief;
  brief.build_id = idx->build_id;
  brief.relocatable = idx->relocatable;
  brief.reader = std::move(idx->reader);
  idx = std::move(brief);
}

// Parses one debug file in a worker process (debug files are untrusted input). With `map`, its
// address map too, from the same relocated copy (DwarfWorker::IndexThenMap): the map or why none.

void ParseInWorker(std::unique_ptr<debuginfo::DwarfWorker>& worker, const absl::StatusOr<std::string>& exe,
                   const std::string& path, unsigned jobs, ParsedDebugFile& out,
                   const debuginfo::PlainElf* plain = nullptr, absl::StatusOr<std::string>* map = nullptr) {
  auto s = Clock::now();
  out.stamp = debuginfo::StampOf(path);
  if (!exe.ok()) {
    out.index = exe.status();
  } else {
    if (!worker) worker = std::make_unique<debuginfo::DwarfWorker>(*exe, debuginfo::WorkerLimits::FromEnvironment());
    const std::string read = plain ? plain->SharedPath() : path;
    out.index = map != nullptr ? worker->IndexThenMap(read, jobs, *map) : worker->Index(read, jobs);
    FromCopy(plain, out.index);
  }
  out.seconds = SecondsSince(s);
}

// A module parsed with its address map (ModuleMapsAhead): the map goes to its temporary file when
// the parse is one step 6 would build a map for (good, and of the part's build-ID); otherwise, or
// when the worker made none, step 6 builds it as it builds the others.
void ParseModuleInWorker(std::unique_ptr<debuginfo::DwarfWorker>& worker, const absl::StatusOr<std::string>& exe,
                         const Part& p, ModuleMapsAhead& maps, ParsedDebugFile& out) {
  const std::string map_path = debuginfo::AddrMapPath(maps.dir, p.record.build_id);
  if (debuginfo::MappedAddrMap::Open(map_path, p.record.build_id).ok() && !p.stale) {
    ParseInWorker(worker, exe, p.path_to_index, 1, out);  // no map to make
    return;
  }
  absl::StatusOr<std::string> map = absl::UnknownError("not made");
  ParseInWorker(worker, exe, p.path_to_index, 1, out, nullptr, &map);
  if (!out.index.ok() || !map.ok() || !out.index->relocatable || p.OtherBuildId(*out.index)) return;
  out.map_made = maps.batch.Write(map_path, [&](int fd) { return WriteAllAt(fd, *map, 0, "the address map"); }).ok();
}

bool PartsOff() {
  const char* v = std::getenv("SYMDEX_DWARF_PARTS");
  return v != nullptr && std::strcmp(v, "off") == 0;
}

// A vmlinux-style file parsed and stored at once: its rows written part by part while the worker
// reads on (DwarfWorker::IndexStream, store::DebugFileWriter), its join table made beside the
// last rows. Anything out of the ordinary — the store has this file already, the build-ID is
// another, the scanner declines a unit, a store error — stores nothing here (the writer's
// transaction rolls back) and leaves `out` as ParseInWorker would, for StoreParsed.
void ParseAndStore(store::Db& db, std::unique_ptr<debuginfo::DwarfWorker>& worker,
                   const absl::StatusOr<std::string>& exe, const Part& p, unsigned jobs, int64_t now,
                   ParsedDebugFile& out, const debuginfo::PlainElf* plain) {
  const std::string& path = p.path_to_index;
  const std::string read_path = plain ? plain->SharedPath() : path;
  auto s = Clock::now();
  out.stamp = debuginfo::StampOf(path);
  auto writer = store::DebugFileWriter::Begin(db, p.record.build_id, p.record.path, out.stamp,
                                              /*relocatable=*/false, now);
  if (!exe.ok() || !writer.ok() || !(*writer)->writes()) {
    writer = absl::CancelledError("not written here");
    ParseInWorker(worker, exe, path, jobs, out, plain);
    return;
  }
  if (!worker) worker = std::make_unique<debuginfo::DwarfWorker>(*exe, debuginfo::WorkerLimits::FromEnvironment());
  // Once anything is off, the transaction (which every other writer of the index waits for)
  // is given up at once; the parse goes on, and its rows are stored after it.
  auto give_up = [&](const char* why) { writer = absl::CancelledError(why); };
  debuginfo::DwarfIndexSizes written;
  auto idx = worker->IndexStream(
      read_path, jobs,
      [&](const debuginfo::DwarfIndex& so_far, const debuginfo::DwarfIndexSizes&) {
        if (writer.ok() && p.OtherBuildId(so_far)) give_up("another build-ID");
        if (writer.ok()) {
          if (!(*writer)->Add(so_far, written).ok()) give_up("store error");
          written = debuginfo::SizesOf(so_far);
          FaultPoint("debug-rows-streamed");  // inside the file's open transaction
        }
        return absl::OkStatus();
      },
      [&] { give_up("worker silent"); });                   // a file that makes the parser hang?
  if (idx.status().code() == absl::StatusCode::kAborted) {  // the scanner declined a unit late
    give_up("scanner declined");
    idx = worker->Index(read_path, jobs);
  }
  FromCopy(plain, idx);
  out.seconds = SecondsSince(s);
  if (idx.ok() && writer.ok() && !p.OtherBuildId(*idx)) {
    const std::optional<uint64_t> text_addr = LinkedTextAddr(*idx, p.record.path);
    JoinBeside join(*idx);
    join.Start((*writer)->FunctionIds(idx->functions.size()));
    auto stored = (*writer)->Finish(*idx, written, text_addr, out.seconds);
    if (stored.ok()) {
      FaultPoint("debug-file-stored");
      out.join = join.Take(*stored);
      out.stored = std::move(*stored);
      out.text_addr = text_addr;
      KeepBrief(idx);  // not the ~30 MB of rows while the modules are parsed
    }
  }
  out.index = std::move(idx);
}

// Step 4b for one parsed file (plan.to_parse[k]): stored under its build-ID in its own
// transaction (unless stored as it was read), its part given the row and the join table; or the
// reason it is not usable. What the steps after read of the parse (the address-map plan: build-ID,
// relocatable) is kept, not its rows. Called by ParseAll for every file, vmlinux-style ones first,
// each module as its parse arrives; foreign-key enforcement off meanwhile (switching it for each
// of a kernel's 1,122 files would have SQLite compile every statement again for each).
absl::Status StoreParsed(store::Db& db, DebugFilePlan& plan, ParsedDebugFile& f, size_t k, int64_t now,
                         IndexSummary& sum) {
  Part& p = plan.parts[plan.to_parse[k]];
  if (!f.index.ok()) {
    // Never stored: the next run tries again. An index made from the file before it changed
    // stays, and is used meanwhile.
    p.record.status = DebugFileStatus::kParseError;
    p.record.detail = std::string(f.index.status().message());
    if (p.stale) {
      p.record.debug_file_id = p.stale->id;
      p.debug_text_addr = p.stale->text_addr;
      p.record.detail += StrCat("; using the index made from ", p.stale->path, " before it changed");
    }
    ++sum.debug_failed;
    if (p.module < 0 && sum.vmlinux_debug_error.empty()) sum.vmlinux_debug_error = p.record.detail;
    return absl::OkStatus();
  }
  const debuginfo::DwarfIndex& di = *f.index;
  if (p.OtherBuildId(di)) {
    p.record.status = DebugFileStatus::kBuildIdMismatch;
    p.record.detail = StrCat(p.record.path, " changed while being read");
    return absl::OkStatus();
  }
  if (f.stored) {  // stored as it was read (ParseDebugFiles)
    p.record.debug_file_id = f.stored->id;
    p.debug_text_addr = f.text_addr;
    p.join = std::move(f.join);
    KeepBrief(f.index);
    ++sum.debug_indexed;
    ++sum.debug_stored_as_read;
    return absl::OkStatus();
  }
  const std::optional<uint64_t> text_addr = LinkedTextAddr(di, p.record.path);
  JoinBeside join(di);
  ASSIGN_OR_RETURN(store::StoredDebugFile stored,
                   store::InsertDebugFile(db, di, p.record.build_id, p.record.path, f.stamp, text_addr, f.seconds, now,
                                          [&](const std::vector<int64_t>& ids) { join.Start(ids); }));
  FaultPoint("debug-file-stored");
  p.record.debug_file_id = stored.id;
  p.debug_text_addr = text_addr;
  if (auto table = join.Take(stored)) p.join = std::move(table);
  KeepBrief(f.index);  // its rows are not needed any more
  ++sum.debug_indexed;
  return absl::OkStatus();
}

// Parses plan.to_parse: vmlinux-style files with all threads (and stored as they are read),
// then the modules, one thread (and one worker) each, in parallel, each stored by this thread as
// its parse arrives (StoreParsed): a parse's rows are held until they are stored, not until the
// last module is parsed, and the parsers wait while a few parses are waiting to be stored.
// parsed[k] is the result for plan.to_parse[k].
absl::StatusOr<std::vector<ParsedDebugFile>> ParseAll(store::Db& db, const IndexRequest& req, DebugFilePlan& plan,
                                                      unsigned jobs, IndexSummary& sum, ModuleMapsAhead* maps,
                                                      const PartHook& module_stored) {
  const auto& parts = plan.parts;
  const auto& to_parse = plan.to_parse;
  std::vector<ParsedDebugFile> parsed(to_parse.size());
  std::vector<size_t> big, small;
  for (size_t k = 0; k < to_parse.size(); ++k) (parts[to_parse[k]].module < 0 ? big : small).push_back(k);
  const absl::StatusOr<std::string> worker_exe =
      to_parse.empty() ? absl::StatusOr<std::string>("") : debuginfo::FindWorkerExecutable();
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (size_t k : big) {
    std::unique_ptr<debuginfo::DwarfWorker> w;
    const auto copy = plan.plain.find(parts[to_parse[k]].path_to_index);
    const debuginfo::PlainElf* plain = copy == plan.plain.end() ? nullptr : copy->second.get();
    if (PartsOff()) {
      ParseInWorker(w, worker_exe, parts[to_parse[k]].path_to_index, jobs, parsed[k], plain);
    } else {
      ParseAndStore(db, w, worker_exe, parts[to_parse[k]], jobs, now, parsed[k], plain);
    }
  }
  {
    // Their records settled before the modules', and a file not stored as it was read stored now:
    // every file's rows get their ids in plan order.
    store::ForeignKeysOff fk(db);  // (StoreParsed says why)
    for (size_t k : big) {
      const auto ts = Clock::now();
      RETURN_IF_ERROR(StoreParsed(db, plan, parsed[k], k, now, sum));
      sum.dwarf_store_seconds += SecondsSince(ts);
    }
  }
  if (small.empty()) return parsed;

  // Stored in plan order (the rows get the same ids whatever the threads did); a parser starts a
  // file at most `ahead` places past the last one stored.
  OrderedWindow window(small.size(), 4 * std::max(1u, jobs));
  auto parse = [&] {
    std::unique_ptr<debuginfo::DwarfWorker> w;  // this thread's, for all its files
    for (size_t j; (j = window.Claim()) != OrderedWindow::kNone;) {
      const size_t k = small[j];
      const Part& p = parts[to_parse[k]];
      if (maps != nullptr && !maps->dir.empty() && !p.record.build_id.empty()) {
        ParseModuleInWorker(w, worker_exe, p, *maps, parsed[k]);
      } else {
        ParseInWorker(w, worker_exe, p.path_to_index, 1, parsed[k]);
      }
      FaultPoint("debug-file-parsed");
      window.Done(j);
    }
  };
  absl::Status failed;
  {
    std::vector<std::jthread> pool;
    for (unsigned j = 0; j < std::max(1u, jobs) && j < small.size(); ++j) pool.emplace_back(parse);
    store::ForeignKeysOff fk(db);  // (StoreParsed says why)
    for (size_t j = 0; j < small.size(); ++j) {
      window.WaitDone(j);
      const auto ts = Clock::now();
      failed = StoreParsed(db, plan, parsed[small[j]], small[j], now, sum);
      sum.dwarf_store_seconds += SecondsSince(ts);
      if (!failed.ok()) break;
      if (module_stored) {
        failed = module_stored(to_parse[small[j]]);
        if (!failed.ok()) break;
      }
      window.Taken(j);
      if (req.progress) req.progress("module debug info", j + 1, small.size());
    }
    window.Stop();  // (after an error: the parses under way end, no new one starts)
  }
  RETURN_IF_ERROR(failed);
  return parsed;
}

}  // namespace

absl::StatusOr<DebugFilePlan> FindDebugFiles(store::Db& db, const IndexRequest& req, const kernel::KernelTarget& t,
                                             unsigned jobs, const PartFilter& want) {
  DebugFilePlan plan;
  std::vector<Part>& parts = plan.parts;
  if (want(-1)) {
    parts.push_back(Part{.module = -1, .record = {.module = "", .build_id = t.build_id ? t.build_id->ToHex() : ""}});
  }
  for (size_t i = 0; i < t.modules.size(); ++i) {
    const auto& m = t.modules[i];
    if (ingest::IsPseudoModule(m.name) || !want(static_cast<int>(i))) continue;
    parts.push_back(Part{.module = static_cast<int>(i),
                         .record = {.module = m.name, .build_id = m.build_id ? m.build_id->ToHex() : ""}});
  }
  // Lookups read files (build-ID notes); SQLite reads stay on this thread, so look up the
  // store first, then search in parallel.
  std::vector<size_t> need_search;
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    if (!p.record.build_id.empty()) {
      ASSIGN_OR_RETURN(auto cached, CurrentStoredIndex(db, p));
      if (cached) {
        UseStored(p, *cached);
        p.record.path = cached->path;
        p.verified = true;
        continue;
      }
    }
    need_search.push_back(i);
  }
  {
    debuginfo::DebugFinder finder(req.finder);
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    auto worker = [&] {
      for (size_t k; (k = next.fetch_add(1)) < need_search.size();) {
        Part& p = parts[need_search[k]];
        debuginfo::DebugFileRequest dr{.module = p.record.module, .release = t.release};
        if (!p.record.build_id.empty()) dr.build_id = BuildId::FromHex(p.record.build_id);
        debuginfo::LookupResult lr = finder.Find(dr);
        p.record.status = lr.status;
        p.record.detail = StrJoin(lr.attempts, "; ");
        if (lr.found) {
          p.record.path = lr.found->path;
          p.record.origin = lr.found->origin;
          p.verified = lr.found->verified;
          p.path_to_index = lr.found->path;
          if (p.record.build_id.empty() && lr.found->build_id) p.record.build_id = lr.found->build_id->ToHex();
        }
      }
    };
    for (unsigned j = 0; j < jobs; ++j) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }

  // A file found for a build-ID another part already uses is parsed once.
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    if (p.path_to_index.empty()) {
      if (p.stale) {
        // The file it was made from now holds something else, and no file with this build-ID
        // was found: the stored index is still this build-ID's.
        UseStored(p, *p.stale);
        p.record.path = p.stale->path;
        p.record.detail = StrCat(p.stale->path, " changed since it was indexed; no file with build-ID ",
                                 p.record.build_id, " found (", p.record.detail, ")");
      }
      continue;
    }
    if (p.record.build_id.empty()) {
      p.record.status = DebugFileStatus::kNoBuildId;
      p.record.detail = StrCat(p.path_to_index, " has no GNU build-ID; symdex keys debug info by build-ID");
      p.path_to_index.clear();
      continue;
    }
    auto [it, fresh] = plan.first_part_for_build_id.emplace(p.record.build_id, i);
    if (!fresh) continue;  // resolved from the first part after parsing
    ASSIGN_OR_RETURN(auto cached, CurrentStoredIndex(db, p));
    if (cached) {  // unverified vmlinux whose build-ID turns out to be known
      UseStored(p, *cached);
      p.path_to_index.clear();
      continue;
    }
    plan.to_parse.push_back(i);
  }
  return plan;
}

void MakePlainCopies(DebugFilePlan& plan, unsigned jobs) {
  for (size_t i : plan.to_parse) {
    const Part& p = plan.parts[i];
    if (p.module >= 0 || p.path_to_index.empty() || plan.plain.contains(p.path_to_index)) continue;
    auto copy = debuginfo::PlainElf::Open(p.path_to_index, jobs);
    if (copy.ok() && !copy->compression().empty()) {
      plan.plain.emplace(p.path_to_index, std::make_shared<const debuginfo::PlainElf>(std::move(*copy)));
    }
  }
}

absl::StatusOr<std::vector<ParsedDebugFile>> ParseDebugFiles(store::Db& db, const IndexRequest& req,
                                                             DebugFilePlan& plan, unsigned jobs, IndexSummary& sum,
                                                             ModuleMapsAhead* maps, const PartHook& module_stored) {
  const auto tp = Clock::now();
  auto parsed = ParseAll(db, req, plan, jobs, sum, maps, module_stored);
  sum.dwarf_parse_seconds = SecondsSince(tp);
  return parsed;
}

void SettleDebugFiles(const kernel::KernelTarget& t, DebugFilePlan& plan) {
  std::vector<Part>& parts = plan.parts;
  for (Part& p : parts) {
    if (p.record.debug_file_id || p.record.build_id.empty()) continue;
    auto it = plan.first_part_for_build_id.find(p.record.build_id);
    if (it != plan.first_part_for_build_id.end() && parts[it->second].record.debug_file_id) {
      p.record.debug_file_id = parts[it->second].record.debug_file_id;
      p.debug_text_addr = parts[it->second].debug_text_addr;
      p.join = parts[it->second].join;
    }
  }
  // An offline System.map carries no build-ID: check the vmlinux found by release against it.
  if (!parts.empty() && parts[0].module < 0) {
    Part& vml = parts[0];
    if (!vml.verified && vml.record.debug_file_id && t.text_addr && vml.debug_text_addr &&
        *t.text_addr != *vml.debug_text_addr && t.kind == "offline") {
      vml.record.status = DebugFileStatus::kBuildIdMismatch;
      vml.record.detail = StrCat(vml.record.path, ": _text differs from the System.map's");
      vml.record.debug_file_id.reset();
      vml.join.reset();
    }
  }
}

}  // namespace symdex::indexer
