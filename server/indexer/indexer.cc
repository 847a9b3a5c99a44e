// The index run as a pipeline of named steps (steps.h): 1 LoadTarget -> 2 CheckInputLooksComplete
// -> 3 FindDebugFiles -> 4 ParseDebugFiles (4b: each file stored) -> 4c SettleDebugFiles -> 5 JoinSymbolsToDwarf beside
// 5b AttachElfFacts -> 5b JudgeProbes -> 7 WriteTarget, with 6 (the address maps) built on a
// thread of its own (a niced worker) from the end of 4 to the end of 7. Beside 4b too: vmlinux's
// join table (from the function ids its insert hands out) and its ELF symbol table read.
#include "server/indexer/indexer.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "server/common/fault_point.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/files/debug_finder.h"
#include "server/indexer/input_checks.h"
#include "server/indexer/steps.h"
#include "server/ingest/kallsyms.h"
#include "server/kernel/kernel_config.h"
#include "server/kernel/symbol_spill.h"
#include "server/store/index_store.h"
#include "server/store/open_index.h"
#include "server/store/text_symbol_file.h"

namespace symdex::indexer {
namespace {

using Clock = std::chrono::steady_clock;

// Step 6 on a thread of its own: the map needs no store, and the store needs no map (a reader
// that finds no map yet reads DWARF, with the same answers, and looks for it again later).
// It runs from the end of the parse (step 4) to the end of step 7.
class AddrMapStep {
 public:
  AddrMapStep(std::vector<AddrMapBuild> builds, std::unique_ptr<ModuleMapsAhead> made, const IndexRequest& req,
              unsigned jobs)
      : builds_(std::move(builds)), made_(std::move(made)) {
    if (!builds_.empty()) {
      thread_ = std::jthread(
          [this, &req, jobs] { outcome_ = BuildAddrMaps(builds_, req, jobs, made_ ? &made_->batch : nullptr); });
    }
  }
  AddrMapStep(const AddrMapStep&) = delete;  // the thread holds `this`
  AddrMapStep& operator=(const AddrMapStep&) = delete;

  // After step 7: waits for the maps; their counts and warnings go into the summary and into
  // the target's stored warnings. The target is written by then: storing the warnings cannot
  // fail the run, only be reported. (An early return of the run waits here too, in the
  // destructor, for the map being built.)
  void Finish(store::Db& db, kernel::KernelTarget& t, int64_t generation, IndexSummary& sum) {
    if (thread_.joinable()) thread_.join();
    sum.addr_maps_built += outcome_.built;
    sum.addr_map_seconds = outcome_.seconds;
    if (outcome_.warnings.empty()) return;
    t.warnings.insert(t.warnings.end(), outcome_.warnings.begin(), outcome_.warnings.end());
    if (absl::Status s = store::SetTargetWarnings(db, t.name, generation, t.warnings); !s.ok()) {
      t.warnings.push_back(StrCat("the warnings above are not stored with the target: ", s.message()));
    }
  }

 private:
  std::vector<AddrMapBuild> builds_;
  std::unique_ptr<ModuleMapsAhead> made_;  // the modules' maps made in step 4, not installed yet
  AddrMapOutcome outcome_;
  std::jthread thread_;  // declared last: joined (on an early return too) before the rest goes
};

// A live kernel whose kallsyms lists _stext but no _text (arm64): its _text, which KASLR slides
// are taken from, is the anchor less the distance between the two in its vmlinux debug file.
void DeriveTextFromAnchor(kernel::KernelTarget& t, const std::vector<Part>& parts) {
  if (t.text_addr || !t.anchor_addr || t.text_anchor == "_text") return;
  for (const Part& p : parts) {
    if (p.module >= 0 || !p.record.debug_file_id || !p.debug_text_addr || p.record.path.empty()) continue;
    auto anchor = debuginfo::ReadElfSymbolValue(p.record.path, t.text_anchor);
    if (anchor.ok() && *anchor && **anchor >= *p.debug_text_addr) {
      t.text_addr = *t.anchor_addr - (**anchor - *p.debug_text_addr);
    }
  }
}

// Steps 3-5 for the parts `want` selects: afterwards every selected code symbol carries its
// DWARF join (or why none), and t.debuginfo one record per selected part. Step 6, the address
// maps, starts in `map_step` as soon as the debug files are parsed.
absl::Status AttachDebugInfo(store::Db& db, const IndexRequest& req, kernel::KernelTarget& t, unsigned jobs,
                             const PartFilter& want, IndexSummary& sum, std::optional<AddrMapStep>& map_step) {
  const auto t1 = Clock::now();
  ASSIGN_OR_RETURN(DebugFilePlan plan, FindDebugFiles(db, req, t, jobs, want));
  ElfFactsAhead facts(plan.parts);  // beside the parse, the store and the join
  MakePlainCopies(plan, jobs);
  auto made = std::make_unique<ModuleMapsAhead>();
  if (req.addr_maps) made->dir = AddrMapDirFor(db.path());
  std::vector<ParsedDebugFile> parsed;
  {
    ModuleJoin join_module(t, plan.parts);  // step 5 for each module as it is stored
    ASSIGN_OR_RETURN(parsed, ParseDebugFiles(db, req, plan, jobs, sum, made.get(), std::ref(join_module)));
  }
  ASSIGN_OR_RETURN(std::vector<AddrMapBuild> maps, PlanAddrMaps(db, req, plan, parsed, sum));
  map_step.emplace(std::move(maps), std::move(made), req, jobs);
  SettleDebugFiles(t, plan);
  DeriveTextFromAnchor(t, plan.parts);
  const auto tj = Clock::now();
  {
    // Steps 5 and 5b side by side. They write different fields of the symbols (the DWARF
    // columns; elf_facts) and of the parts (join; the record's detail), and read of a part only
    // what steps 4b and 4c settled; the join alone uses the store.
    std::jthread facts_step([&] { AttachElfFacts(t, plan.parts, jobs, &facts); });
    RETURN_IF_ERROR(JoinSymbolsToDwarf(db, t, plan.parts, sum));
  }
  FaultPoint("symbols-joined");
  sum.join_seconds = SecondsSince(tj);
  sum.dwarf_seconds = SecondsSince(t1);
  for (auto& p : plan.parts) t.debuginfo.push_back(std::move(p.record));
  return absl::OkStatus();
}

// Step 1's companion: the kernel config, for what probe verdicts assume.
absl::Status ReadKernelConfig(const IndexRequest& req, kernel::KernelTarget& t) {
  const std::string sysroot = req.live ? req.live->sysroot : "";
  const std::string map = req.offline ? req.offline->system_map : "";
  return kernel::AttachKernelConfig(t, req.kernel_config, kernel::KernelConfigCandidates(t, sysroot, map));
}

void Summarize(const kernel::KernelTarget& t, IndexSummary& sum) {
  sum.name = t.name;
  sum.kind = t.kind;
  sum.release = t.release;
  sum.build_id = t.build_id ? t.build_id->ToHex() : "";
  sum.symbols = kernel::SymbolCount(t);
  sum.modules = t.modules.size();
  for (const auto& f : t.files) sum.file_errors += f.status == kernel::InputFileStatus::kError;
  sum.warnings = t.warnings;
}

// The summary's text-symbol counts over the parts `counted` selects (-1: vmlinux): code symbols,
// and how many of them the join gave a function or a source line.
absl::Status CountJoined(const kernel::KernelTarget& t, const PartFilter& counted, IndexSummary& sum) {
  auto count = [&](char type, bool joined) {
    if (!IsCodeSymbolType(type)) return;
    ++sum.text_symbols;
    sum.text_with_dwarf += joined;
  };
  for (const auto& s : t.symbols) {
    if (counted(s.module)) count(s.type, s.dwarf_function_id.has_value() || s.src_line.has_value());
  }
  if (!t.spill) return absl::OkStatus();
  for (const int m : t.spill->Modules()) {
    if (!counted(m)) continue;
    RETURN_IF_ERROR(t.spill->VisitBriefs(m, [&](const kernel::SymbolSpill::Brief& b) { count(b.type, b.joined); }));
  }
  return absl::OkStatus();
}

// The target's text-symbol file (store/text_symbol_file.h) for what was just committed: a cache
// of the database, so a failure to write it is a warning, and readers use the database instead.
void WriteTextSymbols(store::Db& db, const std::string& name, IndexSummary& sum) {
  absl::Status st = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto info, store::FindTarget(db, name));
    if (!info) return absl::OkStatus();
    return store::WriteTextSymbolFile(db, *info);
  }();
  FaultPoint("text-symbols-written");
  if (!st.ok()) {
    sum.warnings.push_back(StrCat("the text-symbol file was not written (", st.message(),
                                  "): batches of addresses read the symbols from the database instead"));
  }
}

// An index run's memory is mostly made and freed in large pieces (symbol tables, DWARF rows,
// join tables), on several threads: glibc's defaults keep what is freed — an arena per thread, and
// a heap top that grows as large blocks are freed — so a run's peak would follow everything it
// ever held. Blocks of 128 KiB and more come from (and go back to) the system at once, free tops
// are returned past 128 KiB, and two arenas serve the threads (a 6.12 distribution kernel's whole
// index: 239 MiB peak with the defaults, 199 MiB with these). Process-wide, set once.
void BoundHeapRetention() {
  static const bool set = [] {
    ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    ::mallopt(M_ARENA_MAX, 2);
    return true;
  }();
  (void)set;
}

unsigned Jobs(const IndexRequest& req) {
  return req.jobs ? req.jobs : std::max(1u, std::thread::hardware_concurrency());
}

// Steps 2-7 over the whole target, loaded by step 1 (LoadTarget).
absl::StatusOr<IndexSummary> IndexLoaded(store::Db& db, const IndexRequest& req, kernel::KernelTarget& t,
                                         IndexSummary sum) {
  RETURN_IF_ERROR(CheckInputLooksComplete(db, t, req.force));  // before the DWARF work, not after
  store::CheckpointLater checkpoint(db);                       // run while the address maps are built (below)
  std::optional<AddrMapStep> map_step;
  if (req.debuginfo) {
    RETURN_IF_ERROR(AttachDebugInfo(
        db, req, t, Jobs(req), [](int) { return true; }, sum, map_step));
    ::malloc_trim(0);  // the parse, store and join's memory, freed: back to the system before the write
  }
  const auto tp = Clock::now();
  RETURN_IF_ERROR(JudgeProbes(
      db, t, [](int) { return true; }, sum));
  sum.probe_seconds = SecondsSince(tp);
  FaultPoint("probes-judged");

  // Step 7, WriteTarget: the whole target in one transaction.
  const auto t2 = Clock::now();
  RETURN_IF_ERROR(CountJoined(
      t, [](int) { return true; }, sum));
  ASSIGN_OR_RETURN(sum.generation, store::ReplaceTarget(db, t, static_cast<int64_t>(std::time(nullptr))));
  sum.store_seconds = SecondsSince(t2);
  FaultPoint("target-committed");
  // The run's WAL into the database file while the maps' worker still runs (the index is
  // written: a checkpoint that fails loses nothing, the next one copies the same pages).
  (void)checkpoint.Checkpoint();
  FaultPoint("checkpointed");
  if (map_step) map_step->Finish(db, t, sum.generation, sum);
  Summarize(t, sum);
  WriteTextSymbols(db, t.name, sum);
  return sum;
}

}  // namespace

absl::StatusOr<kernel::KernelTarget> LoadTarget(const IndexRequest& req) {
  if (req.build_id) return LoadBuildIdTarget(*req.build_id, req.finder);
  return req.offline ? kernel::LoadOfflineKernel(*req.offline)
                     : kernel::LoadLiveHost(req.live.value_or(LiveHostOptions{}));
}

absl::StatusOr<IndexSummary> IndexTarget(store::Db& db, const IndexRequest& req) {
  BoundHeapRetention();
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(kernel::KernelTarget t, LoadTarget(req));
  RETURN_IF_ERROR(kernel::SpillModuleSymbols(t));  // each module's symbols out until a step works on them
  ::malloc_trim(0);  // the symbol files read and parsed to load the target: freed, given back
  RETURN_IF_ERROR(ReadKernelConfig(req, t));
  FaultPoint("symbols-read");
  IndexSummary sum;
  sum.load_seconds = SecondsSince(t0);
  return IndexLoaded(db, req, t, sum);
}

absl::StatusOr<IndexSummary> UpdateModules(store::Db& db, const IndexRequest& req,
                                           const std::set<std::string>& changed) {
  BoundHeapRetention();
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(kernel::KernelTarget t, LoadTarget(req));
  RETURN_IF_ERROR(kernel::SpillModuleSymbols(t));
  RETURN_IF_ERROR(ReadKernelConfig(req, t));
  FaultPoint("symbols-read");
  IndexSummary sum;
  sum.load_seconds = SecondsSince(t0);
  // Only a module change with vmlinux as indexed is a delta; anything else is a whole re-index.
  ASSIGN_OR_RETURN(auto old, store::FindTarget(db, t.name));
  const std::string build_id = t.build_id ? t.build_id->ToHex() : "";
  // (The anchor, not _text: a live arm64 kernel's _text is derived, by a whole re-index.)
  if (!old || old->kind != t.kind || old->build_id != build_id || old->AnchorAddr() != t.anchor_addr) {
    return IndexLoaded(db, req, t, sum);
  }
  if (!t.text_addr) t.text_addr = old->text_addr;  // derived by the whole index (DeriveTextFromAnchor)
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
  auto changed_module = [&](int m) { return m >= 0 && names.count(t.modules[static_cast<size_t>(m)].name); };
  std::optional<AddrMapStep> map_step;  // the changed modules' maps (vmlinux is not part of a delta)
  if (req.debuginfo) RETURN_IF_ERROR(AttachDebugInfo(db, req, t, Jobs(req), changed_module, sum, map_step));
  const auto tp = Clock::now();
  RETURN_IF_ERROR(JudgeProbes(db, t, changed_module, sum));
  sum.probe_seconds = SecondsSince(tp);
  // Step 7, WriteTarget: just these modules, in one transaction.
  const auto t2 = Clock::now();
  RETURN_IF_ERROR(CountJoined(
      t, [&](int m) { return m >= 0 && names.count(t.modules[static_cast<size_t>(m)].name); }, sum));
  ASSIGN_OR_RETURN(sum.generation, store::ReplaceModules(db, t, names, static_cast<int64_t>(std::time(nullptr))));
  sum.store_seconds = SecondsSince(t2);
  FaultPoint("target-committed");
  if (map_step) map_step->Finish(db, t, sum.generation, sum);
  Summarize(t, sum);
  WriteTextSymbols(db, t.name, sum);
  sum.delta_modules.assign(names.begin(), names.end());
  return sum;
}

absl::StatusOr<IndexSummary> IndexInto(const std::string& db_path, const IndexRequest& req) {
  ASSIGN_OR_RETURN(store::Db db, store::OpenIndex(db_path, store::IndexUse::kWrite));
  return IndexTarget(db, req);
}

}  // namespace symdex::indexer
