#include "server/indexer/indexer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/addr_map.h"
#include "server/debuginfo/dwarf_index.h"
#include "server/debuginfo/symbol_join.h"
#include "server/debuginfo/worker_client.h"
#include "server/indexer/input_checks.h"
#include "server/ingest/kallsyms.h"
#include "server/store/debuginfo_store.h"
#include "server/store/index_store.h"

namespace symdex::indexer {
namespace {

using target::DebugFileStatus;

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One part of the target that has its own debug file: vmlinux (module == -1) or a module.
struct Part {
  int module = -1;
  target::DebugInfoRecord record;
  std::string path_to_index;  // set when the file must be parsed in this run
  bool verified = false;
  std::optional<uint64_t> debug_text_addr;
  // The stored index of this build-ID, made from a file that has changed since: parsed again;
  // kept (and used) if the new parse fails.
  std::optional<store::DebugFileInfo> stale;
};

struct Parsed {
  absl::StatusOr<debuginfo::DwarfIndex> index = absl::UnknownError("not run");
  std::optional<debuginfo::FileStamp> stamp;  // of the file, taken before parsing it
  double seconds = 0;
};

// Parses one debug file in a worker process (debug files are untrusted input).
void ParseInWorker(std::unique_ptr<debuginfo::DwarfWorker>& worker, const absl::StatusOr<std::string>& exe,
                   const std::string& path, unsigned jobs, Parsed& out) {
  auto s = Clock::now();
  out.stamp = debuginfo::StampOf(path);
  if (!exe.ok()) {
    out.index = exe.status();
  } else {
    if (!worker) worker = std::make_unique<debuginfo::DwarfWorker>(*exe, debuginfo::WorkerLimits::FromEnvironment());
    out.index = worker->Index(path, jobs);
  }
  out.seconds = Since(s);
}

}  // namespace

namespace {

// Debug info for the parts of `t` that `want` selects (module index; -1 = vmlinux): which debug
// file (cached by build-ID, found locally or through debuginfod), parsing what is new, the
// symbol -> function join, address maps; t.debuginfo gets one record per selected part.
absl::Status AttachDebugInfo(store::Db& db, const IndexRequest& req, target::KernelTarget& t, unsigned jobs,
                             const std::function<bool(int)>& want, IndexSummary& sum) {
  const auto t1 = Clock::now();
  // 1. Which debug file for each part: cached by build-ID, found locally / via debuginfod, or none.
  std::vector<Part> parts;
  if (want(-1)) parts.push_back(Part{-1, {.module = "", .build_id = t.build_id ? t.build_id->ToHex() : ""}});
  for (size_t i = 0; i < t.modules.size(); ++i) {
    const auto& m = t.modules[i];
    if (ingest::IsPseudoModule(m.name) || !want(static_cast<int>(i))) continue;
    parts.push_back(Part{static_cast<int>(i), {.module = m.name, .build_id = m.build_id ? m.build_id->ToHex() : ""}});
  }
  debuginfo::DebugFinder finder(req.finder);
  std::atomic<size_t> next{0}, done{0};
  // Lookups read files (build-ID notes); SQLite reads stay on this thread, so look up the
  // cache first, then search in parallel.
  std::vector<size_t> need_search;
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    if (!p.record.build_id.empty()) {
      ASSIGN_OR_RETURN(auto cached, store::FindDebugFile(db, p.record.build_id));
      if (cached && !store::StoredIndexIsCurrent(*cached)) {
        p.stale = std::move(cached);  // its file changed: look for the file and parse it again
        cached.reset();
      }
      if (cached) {
        p.record.debug_file_id = cached->id;
        p.record.status = DebugFileStatus::kCached;
        p.record.path = cached->path;
        p.debug_text_addr = cached->text_addr;
        p.verified = true;
        continue;
      }
    }
    need_search.push_back(i);
  }
  {
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
  std::unordered_map<std::string, size_t> first_part_for_build_id;
  std::vector<size_t> to_parse;
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    if (p.path_to_index.empty()) {
      if (p.stale) {
        // The file it was made from now holds something else, and no file with this build-ID
        // was found: the stored index is still this build-ID's.
        p.record.debug_file_id = p.stale->id;
        p.record.status = DebugFileStatus::kCached;
        p.record.path = p.stale->path;
        p.debug_text_addr = p.stale->text_addr;
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
    auto [it, fresh] = first_part_for_build_id.emplace(p.record.build_id, i);
    if (!fresh) continue;  // resolved from the first part after parsing
    ASSIGN_OR_RETURN(auto cached, store::FindDebugFile(db, p.record.build_id));
    if (cached && !store::StoredIndexIsCurrent(*cached)) {
      p.stale = std::move(cached);
      cached.reset();
    }
    if (cached) {  // unverified vmlinux whose build-ID turns out to be known
      p.record.debug_file_id = cached->id;
      p.record.status = DebugFileStatus::kCached;
      p.debug_text_addr = cached->text_addr;
      p.path_to_index.clear();
      continue;
    }
    to_parse.push_back(i);
  }

  // 2. Parse, each file in a worker process: vmlinux-style files with all threads, modules one
  // thread (and one worker) each, in parallel.
  std::vector<Parsed> parsed(to_parse.size());
  std::vector<size_t> big, small;
  for (size_t k = 0; k < to_parse.size(); ++k) (parts[to_parse[k]].module < 0 ? big : small).push_back(k);
  const absl::StatusOr<std::string> worker_exe =
      to_parse.empty() ? absl::StatusOr<std::string>("") : debuginfo::FindWorkerExecutable();
  for (size_t k : big) {
    std::unique_ptr<debuginfo::DwarfWorker> w;
    ParseInWorker(w, worker_exe, parts[to_parse[k]].path_to_index, jobs, parsed[k]);
  }
  next = 0;
  done = 0;
  {
    std::vector<std::thread> pool;
    auto worker = [&](bool report) {
      std::unique_ptr<debuginfo::DwarfWorker> w;  // this thread's, for all its files
      for (size_t j; (j = next.fetch_add(1)) < small.size();) {
        size_t k = small[j];
        ParseInWorker(w, worker_exe, parts[to_parse[k]].path_to_index, 1, parsed[k]);
        size_t d = done.fetch_add(1) + 1;
        if (report && req.progress) req.progress("module debug info", d, small.size());
      }
    };
    for (unsigned j = 1; j < jobs; ++j) pool.emplace_back(worker, false);
    worker(true);
    for (auto& th : pool) th.join();
    if (req.progress && !small.empty()) req.progress("module debug info", small.size(), small.size());
  }

  // 3. Store each parsed file under its build-ID (immutable, own transaction).
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (size_t k = 0; k < to_parse.size(); ++k) {
    Part& p = parts[to_parse[k]];
    if (!parsed[k].index.ok()) {
      // Never stored: the next run tries again. An index made from the file before it changed
      // stays, and is used meanwhile.
      p.record.status = DebugFileStatus::kParseError;
      p.record.detail = std::string(parsed[k].index.status().message());
      if (p.stale) {
        p.record.debug_file_id = p.stale->id;
        p.debug_text_addr = p.stale->text_addr;
        p.record.detail += StrCat("; using the index made from ", p.stale->path, " before it changed");
      }
      ++sum.debug_failed;
      continue;
    }
    const debuginfo::DwarfIndex& di = *parsed[k].index;
    if (di.build_id && p.verified && di.build_id->ToHex() != p.record.build_id) {
      p.record.status = DebugFileStatus::kBuildIdMismatch;
      p.record.detail = StrCat(p.record.path, " changed while being read");
      continue;
    }
    std::optional<uint64_t> text_addr;
    if (!di.relocatable) {
      auto v = debuginfo::ReadElfSymbolValue(p.record.path, "_text");
      if (v.ok()) text_addr = *v;
    }
    ASSIGN_OR_RETURN(int64_t id, store::InsertDebugFile(db, di, p.record.build_id, p.record.path, parsed[k].stamp,
                                                        text_addr, parsed[k].seconds, now));
    p.record.debug_file_id = id;
    p.debug_text_addr = text_addr;
    ++sum.debug_indexed;
  }
  for (Part& p : parts) {
    if (p.record.debug_file_id || p.record.build_id.empty()) continue;
    auto it = first_part_for_build_id.find(p.record.build_id);
    if (it != first_part_for_build_id.end() && parts[it->second].record.debug_file_id) {
      p.record.debug_file_id = parts[it->second].record.debug_file_id;
      p.debug_text_addr = parts[it->second].debug_text_addr;
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
  }
  }

  // 4. Join text symbols to functions by address.
  std::vector<std::vector<size_t>> symbols_by_part(parts.size());
  std::unordered_map<int, size_t> part_of_module;
  for (size_t i = 0; i < parts.size(); ++i) part_of_module[parts[i].module] = i;
  for (size_t s = 0; s < t.symbols.size(); ++s) {
    if (!IsCodeSymbolType(t.symbols[s].type)) continue;
    auto it = part_of_module.find(t.symbols[s].module);
    if (it != part_of_module.end()) symbols_by_part[it->second].push_back(s);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    if (p.record.status == DebugFileStatus::kCached) ++sum.debug_cached;
    if (!p.record.debug_file_id && p.record.status != DebugFileStatus::kParseError) ++sum.debug_missing;
    if (!p.record.debug_file_id) {
      for (size_t s : symbols_by_part[i]) {
        t.symbols[s].dwarf_note = StrCat("no debug info (", Name(p.record.status), ")");
      }
      continue;
    }
    ASSIGN_OR_RETURN(auto spans, store::LoadFunctionSpans(db, *p.record.debug_file_id));
    debuginfo::FunctionLocator locator(std::move(spans));
    ASSIGN_OR_RETURN(auto line_rows, store::LoadSymbolLines(db, *p.record.debug_file_id));
    std::map<std::pair<std::string, uint64_t>, const store::SymbolLine*> lines;
    for (const auto& l : line_rows) lines[{l.section, l.addr}] = &l;
    int64_t slide = 0;
    if (p.module < 0 && t.text_addr && p.debug_text_addr) slide = static_cast<int64_t>(*t.text_addr - *p.debug_text_addr);
    std::vector<std::pair<std::string, uint64_t>> sections;
    if (p.module >= 0) sections = t.modules[static_cast<size_t>(p.module)].sections;
    for (size_t s : symbols_by_part[i]) {
      target::SymbolEntry& sym = t.symbols[s];
      std::string section;
      uint64_t addr = sym.addr;
      if (p.module < 0) {
        addr = sym.addr - static_cast<uint64_t>(slide);
      } else if (sym.section.empty()) {
        auto so = debuginfo::SectionOffset(sections, sym.addr);
        if (!so) {
          sym.dwarf_note = "module section bases unknown (/sys/module/M/sections unreadable)";
          continue;
        }
        section = so->first;
        addr = so->second;
      } else {
        section = sym.section;
      }
      sym.debug_file_id = p.record.debug_file_id;
      if (auto l = lines.find({section, addr}); l != lines.end() && l->second->line > 0) {
        sym.src_unit = l->second->unit;
        sym.src_file = l->second->file;
        sym.src_line = l->second->line;
      }
      auto hit = locator.Find(section, addr);
      if (!hit) {
        sym.dwarf_note = sym.src_line ? "no DW_TAG_subprogram here (assembly or a compiler alias): line-table only"
                                      : "no DWARF function or line at this address";
        continue;
      }
      sym.dwarf_function_id = hit->function_id;
      if (!hit->at_entry) {
        sym.dwarf_note = hit->offset == 0 ? "start of a non-entry range (a .cold/.part split)"
                                          : StrCat("inside a function, +", hit->offset, " from its range start");
      }
    }
  }
  sum.dwarf_seconds = Since(t1);

  // 5. Address maps of the linked debug files (vmlinux): built once per build-ID.
  const auto t3 = Clock::now();
  const std::string map_dir = AddrMapDirFor(db.path());
  for (const Part& p : parts) {
    // Modules (ET_REL) have no map: only vmlinux's debug file is looked up.
    if (p.module >= 0 || !req.addr_maps || map_dir.empty() || !p.record.debug_file_id || p.record.build_id.empty()) {
      continue;
    }
    ASSIGN_OR_RETURN(auto df, store::FindDebugFile(db, p.record.build_id));
    if (!df || df->relocatable) continue;
    const std::string path = debuginfo::AddrMapPath(map_dir, df->build_id);
    auto existing = debuginfo::MappedAddrMap::Open(path, df->build_id);
    // A vmlinux parsed again because its file changed gets a new map (the old one was made from
    // the old file's DWARF).
    const bool reparsed = p.stale && p.record.status != DebugFileStatus::kParseError && p.record.debug_file_id == p.stale->id &&
                          p.record.status != DebugFileStatus::kCached;
    if (existing.ok() && !reparsed) {
      ++sum.addr_maps_present;
      continue;
    }
    if (req.progress) req.progress("DWARF into an address map", 0, 1);
    // In a worker process, as the DWARF index was: the file is untrusted input.
    absl::StatusOr<std::string> bytes = absl::UnknownError("no worker");
    {
      auto exe = debuginfo::FindWorkerExecutable();
      if (!exe.ok()) {
        bytes = exe.status();
      } else {
        debuginfo::DwarfWorker w(*exe, debuginfo::WorkerLimits::FromEnvironment());
        bytes = w.AddrMap(df->path, jobs);
      }
    }
    absl::Status written = bytes.ok() ? debuginfo::WriteAddrMapFile(path, *bytes) : bytes.status();
    if (req.progress) req.progress("DWARF into an address map", 1, 1);
    if (written.ok()) {
      ++sum.addr_maps_built;
    } else {
      // Answers stay right without it (libdw is read instead), only slower: a warning.
      t.warnings.push_back(StrCat("no address map for ", df->path, " (symdex addr reads DWARF instead): ",
                                  written.message()));
    }
  }
  sum.addr_map_seconds = Since(t3);
  for (auto& p : parts) t.debuginfo.push_back(std::move(p.record));
  return absl::OkStatus();
}

void Summarize(const target::KernelTarget& t, IndexSummary& sum) {
  sum.name = t.name;
  sum.kind = t.kind;
  sum.release = t.release;
  sum.build_id = t.build_id ? t.build_id->ToHex() : "";
  sum.symbols = t.symbols.size();
  sum.modules = t.modules.size();
  for (const auto& f : t.files) sum.file_errors += f.status == target::InputFileStatus::kError;
  sum.warnings = t.warnings;
}

absl::StatusOr<target::KernelTarget> Load(const IndexRequest& req) {
  return req.offline ? target::LoadOfflineKernel(*req.offline)
                     : target::LoadLiveHost(req.live.value_or(target::LiveHostOptions{}));
}

unsigned Jobs(const IndexRequest& req) { return req.jobs ? req.jobs : std::max(1u, std::thread::hardware_concurrency()); }

absl::StatusOr<IndexSummary> IndexLoaded(store::Db& db, const IndexRequest& req, target::KernelTarget& t,
                                         IndexSummary sum) {
  RETURN_IF_ERROR(CheckInputLooksComplete(db, t, req.force));  // before the DWARF work, not after
  if (req.debuginfo) RETURN_IF_ERROR(AttachDebugInfo(db, req, t, Jobs(req), [](int) { return true; }, sum));

  const auto t2 = Clock::now();
  for (const auto& s : t.symbols) {
    if (!IsCodeSymbolType(s.type)) continue;
    ++sum.text_symbols;
    sum.text_with_dwarf += s.dwarf_function_id.has_value() || s.src_line.has_value();
  }
  ASSIGN_OR_RETURN(sum.generation, store::ReplaceTarget(db, t, static_cast<int64_t>(std::time(nullptr))));
  sum.store_seconds = Since(t2);
  Summarize(t, sum);
  return sum;
}

}  // namespace

absl::StatusOr<IndexSummary> IndexTarget(store::Db& db, const IndexRequest& req) {
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(target::KernelTarget t, Load(req));
  IndexSummary sum;
  sum.load_seconds = Since(t0);
  return IndexLoaded(db, req, t, sum);
}

absl::StatusOr<IndexSummary> UpdateModules(store::Db& db, const IndexRequest& req, const std::set<std::string>& changed) {
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(target::KernelTarget t, Load(req));
  IndexSummary sum;
  sum.load_seconds = Since(t0);
  // Only a module change with vmlinux as indexed is a delta; anything else is a whole re-index.
  ASSIGN_OR_RETURN(auto old, store::FindTarget(db, t.name));
  const std::string build_id = t.build_id ? t.build_id->ToHex() : "";
  if (!old || old->kind != t.kind || old->build_id != build_id || old->text_addr != t.text_addr) {
    return IndexLoaded(db, req, t, sum);
  }
  // The changed modules, and every pseudo-module ([bpf], ...): their symbols come and go without
  // /proc/modules saying so, and they are few.
  std::set<std::string> names = changed;
  ASSIGN_OR_RETURN(auto old_names, store::ModuleNames(db, old->id));
  for (const auto& n : old_names) {
    if (ingest::IsPseudoModule(n)) names.insert(n);
  }
  for (const auto& m : t.modules) {
    if (ingest::IsPseudoModule(m.name)) names.insert(m.name);
  }
  names.erase("");
  if (req.debuginfo) {
    RETURN_IF_ERROR(AttachDebugInfo(
        db, req, t, Jobs(req), [&](int m) { return m >= 0 && names.count(t.modules[static_cast<size_t>(m)].name); },
        sum));
  }
  const auto t2 = Clock::now();
  for (const auto& s : t.symbols) {
    if (s.module < 0 || !names.count(t.modules[static_cast<size_t>(s.module)].name) || !IsCodeSymbolType(s.type)) continue;
    ++sum.text_symbols;
    sum.text_with_dwarf += s.dwarf_function_id.has_value() || s.src_line.has_value();
  }
  ASSIGN_OR_RETURN(sum.generation, store::ReplaceModules(db, t, names, static_cast<int64_t>(std::time(nullptr))));
  sum.store_seconds = Since(t2);
  Summarize(t, sum);
  sum.delta_modules.assign(names.begin(), names.end());
  return sum;
}

}  // namespace symdex::indexer
