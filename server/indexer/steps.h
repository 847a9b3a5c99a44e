// The steps of one index run, in the order indexer.cc runs them:
//
//   1 LoadTarget (the modules' symbols spilled) -> 2 CheckInputLooksComplete (input_checks.h)
//     -> 3 FindDebugFiles -> 4 ParseDebugFiles (4b each file stored) -> 4c SettleDebugFiles
//     -> 5 JoinSymbolsToDwarf (beside it 5b AttachElfFacts; a spilled module's facts with its join)
//     -> 5b JudgeProbes -> 7 WriteTarget
//                         \-> 6 PlanAddrMaps -> BuildAddrMaps (beside 4c to 7) -/
//
// Each step takes the target and/or the parts it works on and hands the next one what it
// made; nothing is written to SQLite and read back. The modules' symbols are in t.spill
// (kernel/symbol_spill.h) from the load to the write: a step takes one module's out, changes
// them and puts them back, and two steps never work on one module at once. Debug files are the one exception to
// "written once, at the end": each is stored in step 4b in its own transaction, because it
// is keyed by build-ID, immutable and shared by every target that uses it (a later failure of
// this run should not cost the next run the parse).
// Internal to server/indexer/.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/common/file_util.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/dwarf/symbol_join.h"
#include "server/debuginfo/files/file_stamp.h"
#include "server/debuginfo/files/plain_elf.h"
#include "server/indexer/indexer.h"
#include "server/kernel/kernel_target.h"
#include "server/store/debuginfo_store.h"
#include "server/store/sqlite_db.h"

namespace symdex::indexer {

// Seconds from T to now (the steady clock), for the run summary's step timings.
inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What the symbol join needs of one debug file: its function ranges (with their store row
// ids) and the line-table rows at its symbols' addresses, found by (section, address). The rows
// are packed (32 bytes each, a section by its index): a kernel's tables are all made before the
// join and were the largest thing an index run held after the symbols.
struct JoinTable {
  struct Line {
    uint64_t addr;
    int64_t line;
    uint32_t section;    // index into `sections`
    int32_t unit, file;  // -1: none
  };
  // `rows` in any order; of two for one (section, address), the later is kept.
  JoinTable(std::vector<debuginfo::FunctionSpan> spans, std::vector<store::SymbolLine> rows);
  // The row at `addr` of `section` ("" for a linked image), if any.
  const Line* LineAt(std::string_view section, uint64_t addr) const;

  debuginfo::FunctionLocator locator;
  std::vector<std::string> sections;
  std::vector<Line> lines;  // by (section, addr), one per key
};

// One part of the target that has its own debug file: vmlinux (module == -1) or a module.
struct Part {
  int module = -1;
  kernel::DebugInfoRecord record;  // becomes t.debuginfo[...] at the end
  std::string path_to_index;       // set when the file must be parsed in this run
  bool verified = false;           // the file's build-ID was compared equal to the target's
  std::optional<uint64_t> debug_text_addr;
  // The stored index of this build-ID, made from a file that has changed since: parsed again;
  // kept (and used) if the new parse fails.
  std::optional<store::DebugFileInfo> stale;
  // A parse of this part's file that says it is another build-ID than the part's (the file
  // changed while being read): not this part's index.
  bool OtherBuildId(const debuginfo::DwarfIndex& di) const {
    return di.build_id && verified && di.build_id->ToHex() != record.build_id;
  }
  // Set by step 4b for a file parsed and stored in this run (built from the parse, not
  // read back); parts that use an index stored earlier have none and JoinSymbolsToDwarf
  // loads it.
  std::shared_ptr<const JoinTable> join;
  // A module whose symbols step 4b joined as soon as its file was stored (ModuleJoin): step 5
  // only counts it. Its table went with the join instead of waiting for every module's.
  bool joined = false;
};

// The indices of the code symbols of `syms`, in order.
inline std::vector<size_t> CodeSymbols(const std::vector<kernel::SymbolEntry>& syms) {
  std::vector<size_t> out;
  for (size_t i = 0; i < syms.size(); ++i) {
    if (IsCodeSymbolType(syms[i].type)) out.push_back(i);
  }
  return out;
}

// Which modules a run covers: -1 is vmlinux, i >= 0 is t.modules[i].
using PartFilter = std::function<bool(int)>;

// What FindDebugFiles decided: the parts, which of them ParseDebugFiles must parse, and for each
// build-ID found as a file, the part that parses it (the others share its result).
struct DebugFilePlan {
  std::vector<Part> parts;
  std::vector<size_t> to_parse;  // indices into parts
  std::unordered_map<std::string, size_t> first_part_for_build_id;
  // path_to_index -> the decompressed copy of a vmlinux-style file with compressed sections
  // (MakePlainCopies): made once here, read by the parse and the address map workers alike.
  std::map<std::string, std::shared_ptr<const debuginfo::PlainElf>> plain;
};

// Step 3b: the decompressed copy of each vmlinux-style file to parse whose debug sections are
// compressed (debuginfo/files/plain_elf.h), into plan.plain. A file that cannot be decompressed gets
// none: its worker says what is wrong with it.
void MakePlainCopies(DebugFilePlan& plan, unsigned jobs);

// Step 1 (LoadTarget, "read symbols"): the kernel target, live or offline, with every symbol, module and
// input file; no debug info yet.
absl::StatusOr<kernel::KernelTarget> LoadTarget(const IndexRequest& req);

// Step 3: which debug file each selected part uses. Takes the target; gives one Part per
// selected part (vmlinux first), each either resolved from the store by build-ID ("cached"),
// or with the file found locally / through debuginfod in `path_to_index`, or with the reason
// there is none. A build-ID shared by several parts is parsed only for the first.
absl::StatusOr<DebugFilePlan> FindDebugFiles(store::Db& db, const IndexRequest& req, const kernel::KernelTarget& t,
                                             unsigned jobs, const PartFilter& want);

// One file of plan.to_parse, parsed (or why not).
struct ParsedDebugFile {
  absl::StatusOr<debuginfo::DwarfIndex> index = absl::UnknownError("not run");
  std::optional<debuginfo::FileStamp> stamp;  // of the file, taken before parsing it
  double seconds = 0;
  // Set when the file was stored as it was read (vmlinux-style files), with what step 4b keeps of
  // it; otherwise step 4b stores it. Once its rows are stored, `index` keeps only what the steps
  // after read (build-ID, relocatable).
  std::optional<store::StoredDebugFile> stored;
  std::optional<uint64_t> text_addr;
  std::shared_ptr<const JoinTable> join;
  // A module's address map made by the worker that parsed it (ModuleMapsAhead): written to its
  // temporary file, installed by step 6 with the maps it builds.
  bool map_made = false;
};

// Step 6 begun in step 4 for the modules: the worker that indexes a module builds its address
// map next, from the relocated copy it read the DWARF from (one relocation of the file for both;
// worker_client.h IndexThenMap), and the map goes to a temporary file of `batch` at once. Made
// for a module whose map is missing or whose file changed (PlanAddrMaps' rule), and only when its
// parse is good; any trouble with the map and step 6 builds it as it builds the others.
struct ModuleMapsAhead {
  std::string dir;                                                         // the index's map directory ("": no maps)
  PrivateFileBatch batch{".tmp.", "addr-map-temp", "addr-map-installed"};  // <id>.addrmap.tmp.<pid>
};

// Step 4: parses every file FindDebugFiles left in path_to_index, each in a worker process
// (untrusted input); result k is plan.to_parse[k]'s. Step 4b, within it: each parsed file is
// stored under its build-ID (own transaction) and its part given the row and its JoinTable, or
// the reason there is none; counts indexed/failed into `sum`. A vmlinux-style file (one large
// file, read by every thread) is stored as it is read: its rows go in part by part while the
// worker reads on (worker_client.h IndexStream); should anything be out of the ordinary, nothing
// of it is stored then and it is stored whole after its parse. SYMDEX_DWARF_PARTS=off in the
// environment: never as it is read (benchmarks, and the tests that compare both ways). Each
// module is stored by the calling thread as its parse arrives, while the others are parsed.
// `module_stored`, if given, is called (on the calling thread) with each module part's index into
// plan.parts as soon as its file is stored: ModuleJoin.
// An error it returns ends the parse with that error.
using PartHook = std::function<absl::Status(size_t part)>;
absl::StatusOr<std::vector<ParsedDebugFile>> ParseDebugFiles(store::Db& db, const IndexRequest& req,
                                                             DebugFilePlan& plan, unsigned jobs, IndexSummary& sum,
                                                             ModuleMapsAhead* maps = nullptr,
                                                             const PartHook& module_stored = nullptr);

// Step 4c: a part whose build-ID another part's file was parsed for gets that file's row; an
// offline vmlinux debug file whose _text disagrees with the System.map is refused.
void SettleDebugFiles(const kernel::KernelTarget& t, DebugFilePlan& plan);

// The code symbols of each part (by index into `parts`) held in t.symbols, in symbol order (a
// spilled module's are in t.spill): what steps 5 and 5b work on.
std::vector<std::vector<size_t>> CodeSymbolsByPart(const kernel::KernelTarget& t, const std::vector<Part>& parts);

// Step 5: joins every code symbol of the parts to its DWARF function and line-table row by
// address, in memory (tables of debug files stored by earlier runs are loaded once each).
// Fills the symbols' DWARF columns or their dwarf_note; counts cached/missing into `sum`.
absl::Status JoinSymbolsToDwarf(store::Db& db, kernel::KernelTarget& t, std::vector<Part>& parts, IndexSummary& sum);

// Step 5 for one module at a time, in step 4b: a module's symbols (out of the spill and back)
// joined the moment its file is stored, and its table let go then, so that what step 4 holds does
// not grow with the number of modules (a kernel's 1,122 module tables are ~10 MB). The join is step 5's, symbol for
// symbol. A module whose build-ID another part shares keeps its table for that part (SettleDebugFiles hands it on).
class ModuleJoin {
 public:
  ModuleJoin(kernel::KernelTarget& t, std::vector<Part>& parts);
  // Joins parts[i]'s symbols if it is a module with a table, and marks it joined.
  absl::Status operator()(size_t i);

 private:
  kernel::KernelTarget& t_;
  std::vector<Part>& parts_;
  std::vector<std::vector<size_t>> symbols_;   // each part's code symbols, until joined
  std::unordered_map<std::string, int> uses_;  // build-ID -> parts that use it
};

// Step 5b: the ELF symbol table facts (common/elf_facts.h) of every code symbol of the parts
// that have a debug file, read from that file (elf_symbol_facts.cc says why here). A part whose file
// cannot be read keeps none, and says so in its record's detail.
// `ahead`, if given, holds vmlinux's table, read while the steps before ran.
struct ElfFactsTable;
class ElfFactsAhead {
 public:
  // Starts reading the symbol table of vmlinux's debug file, if `parts` names one (87k symbols:
  // ~40 ms, done beside step 4b's insert instead of after step 5).
  explicit ElfFactsAhead(const std::vector<Part>& parts);
  ~ElfFactsAhead();
  ElfFactsAhead(const ElfFactsAhead&) = delete;  // the thread holds `this`
  ElfFactsAhead& operator=(const ElfFactsAhead&) = delete;
  // Waits for the table: nullptr if none was read.
  const ElfFactsTable* Get();

 private:
  std::unique_ptr<ElfFactsTable> table_;
  std::jthread thread_;  // declared last: joined before table_ goes
};
void AttachElfFacts(kernel::KernelTarget& t, std::vector<Part>& parts, unsigned jobs, ElfFactsAhead* ahead = nullptr);
// The same for one spilled module's code symbols `code` (indices into `syms`), done by the join
// while it has them out of the spill (ModuleJoin, JoinSymbolsToDwarf): one trip for both.
void AttachModuleFacts(const kernel::KernelTarget& t, Part& p, std::vector<kernel::SymbolEntry>& syms,
                       const std::vector<size_t>& code);

// Step 6: the address maps of vmlinux's and the modules' debug files, built once per build-ID
// next to the index.
// PlanAddrMaps (after step 4: a file parsed in this run gets a map only if its parse
// succeeded; one indexed earlier is looked up in the store) says which maps are missing and
// counts those present; BuildAddrMaps (no store: it runs on its own thread while steps 4b to 7
// write the debug files and the target) builds them. A failure is a warning on the target
// (answers stay right, only slower), not an error.
struct AddrMapBuild {
  std::string debug_path;                            // the debug file
  std::string map_path;                              // where its map goes
  bool relocatable = false;                          // a module's (ET_REL)
  std::shared_ptr<const debuginfo::PlainElf> plain;  // set: read its decompressed copy instead
  bool made = false;                                 // made in step 4 (ModuleMapsAhead): install only
  std::string ReadPath() const { return plain ? plain->SharedPath() : debug_path; }
};
struct AddrMapOutcome {
  size_t built = 0;
  double seconds = 0;
  std::vector<std::string> warnings;
};
absl::StatusOr<std::vector<AddrMapBuild>> PlanAddrMaps(store::Db& db, const IndexRequest& req,
                                                       const DebugFilePlan& plan,
                                                       const std::vector<ParsedDebugFile>& parsed, IndexSummary& sum);
// `made`: the batch that holds the maps step 4 made (builds marked `made`, installed with the
// rest), which the modules' maps built here join; nullptr: none were made.
AddrMapOutcome BuildAddrMaps(const std::vector<AddrMapBuild>& builds, const IndexRequest& req, unsigned jobs,
                             PrivateFileBatch* made = nullptr);

// Step 5b: the probe bits (kernel/probe_bits.h) of the code symbols of vmlinux and of the
// modules `want` selects, from the kernel's own tables in each part's debug file (else the
// module file itself; vmlinux's areas from its symbols). Files without tables are a warning.
// Each module is judged alone; what looks across parts (a clone's base name, a unit without an
// fentry site) is settled once all are, from what each kept per name and per unit.
absl::Status JudgeProbes(store::Db& db, kernel::KernelTarget& t, const PartFilter& want, IndexSummary& sum);

// (Step 7, WriteTarget, is store::ReplaceTarget / store::ReplaceModules: one transaction.)

// A stored debug file's join table, read from the store.
absl::StatusOr<std::shared_ptr<const JoinTable>> LoadJoinTable(store::Db& db, int64_t debug_file_id);
// The join table of `idx`, stored with `function_ids` (store::StoredDebugFile), without a
// round trip through SQLite: the same rows LoadJoinTable would read.
std::shared_ptr<const JoinTable> JoinTableOf(const debuginfo::DwarfIndex& idx,
                                             const std::vector<int64_t>& function_ids);

}  // namespace symdex::indexer
