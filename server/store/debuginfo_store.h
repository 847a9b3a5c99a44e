// Debug-file facts in the index, keyed by build-ID and immutable: written once, in their own
// transaction, and shared by every target that uses the build-ID.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/dwarf/symbol_join.h"
#include "server/debuginfo/files/file_stamp.h"
#include "server/store/sqlite_db.h"

namespace symdex::store {

struct DebugFileInfo {
  int64_t id = 0;
  std::string build_id;
  bool relocatable = false;
  std::string path;
  std::optional<uint64_t> text_addr;
  double index_seconds = 0;
  int64_t units = 0, functions = 0, variables = 0;
  // What `path` was when it was parsed; none for rows stored before schema 006.
  std::optional<debuginfo::FileStamp> stamp;
};

absl::StatusOr<std::optional<DebugFileInfo>> FindDebugFile(Db& db, const std::string& build_id_hex);
absl::StatusOr<std::optional<DebugFileInfo>> FindDebugFileById(Db& db, int64_t id);
// How many debug files the index holds.
absl::StatusOr<int64_t> CountDebugFiles(Db& db);

// Stores `idx` under `build_id_hex` in one transaction and returns its id. If the build-ID is
// already stored from the same file with the same stamp (another run got there first) nothing
// is written and the existing id returned; if it was stored from a file that has changed since,
// its DWARF rows are replaced in place (same id: targets that use it keep pointing at it).
struct StoredDebugFile {
  int64_t id = 0;
  // When this call wrote the rows: the dwarf_functions row id of each idx.functions[i], so the
  // caller can join symbols to `idx` in memory instead of reading the rows back. Empty when
  // the rows were already there (they are the store's, not necessarily `idx`'s).
  std::optional<std::vector<int64_t>> function_ids;
};
// InsertDebugFile in steps, for an index that arrives in parts (debuginfo/worker/worker_client.h
// IndexStream): Begin opens the transaction and decides, as InsertDebugFile does, whether rows
// are written at all; Add writes the rows of a part as it comes; Finish writes the rest and the
// file's counts and commits. Destroyed before Finish: nothing stored (rolled back). Holds the
// connection's write transaction meanwhile, with foreign-key enforcement off (see below).
class DebugFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<DebugFileWriter>> Begin(Db& db, const std::string& build_id_hex,
                                                                const std::string& path,
                                                                const std::optional<debuginfo::FileStamp>& stamp,
                                                                bool relocatable, int64_t now_unix);
  DebugFileWriter(const DebugFileWriter&) = delete;
  DebugFileWriter& operator=(const DebugFileWriter&) = delete;

  int64_t id() const { return id_; }
  // False when the build-ID is stored from this very file already: Add and Finish write nothing.
  bool writes() const { return writes_; }
  // idx.functions[i] is stored as row first_function_id() + i; FunctionIds(n): the ids of the
  // first n functions.
  int64_t first_function_id() const { return first_function_id_; }
  std::vector<int64_t> FunctionIds(size_t n) const;
  // The rows of `idx` past `from` (what earlier Adds wrote).
  absl::Status Add(const debuginfo::DwarfIndex& idx, const debuginfo::DwarfIndexSizes& from);
  // Add, then the file's counts, address and time; commits. function_ids as InsertDebugFile's.
  absl::StatusOr<StoredDebugFile> Finish(const debuginfo::DwarfIndex& idx, const debuginfo::DwarfIndexSizes& from,
                                         std::optional<uint64_t> text_addr, double index_seconds);

 private:
  explicit DebugFileWriter(Db& db) : db_(db), fk_(db) {}
  Db& db_;
  // Every row refers to the debug_files row this transaction writes, or to a function it numbers
  // itself: foreign-key enforcement, a parent lookup per row (half of SQLite's time for these
  // tables), is off, and what its cascades would delete is deleted by hand.
  ForeignKeysOff fk_;
  std::optional<Transaction> tx_;
  std::vector<IndexesAfterLoad> later_;
  int64_t id_ = 0;
  int64_t first_function_id_ = 1;
  bool writes_ = true;
};

// `ids_known`, when given, is called with those ids as soon as they are decided, inside the
// transaction and before any DWARF row is written, so that work needing only them (the
// indexer's join table) can run beside the insert. Not called when nothing is written; if the
// insert fails after it, the ids name nothing.
using FunctionIdsKnown = std::function<void(const std::vector<int64_t>& function_ids)>;
absl::StatusOr<StoredDebugFile> InsertDebugFile(Db& db, const debuginfo::DwarfIndex& idx,
                                                const std::string& build_id_hex, const std::string& path,
                                                const std::optional<debuginfo::FileStamp>& stamp,
                                                std::optional<uint64_t> text_addr, double index_seconds,
                                                int64_t now_unix, const FunctionIdsKnown& ids_known = {});

// Whether a stored index may be reused without parsing: its file is unchanged, or gone (nothing
// to re-check against: the index was whole when it was made). Changed, or stored before file
// stamps were recorded while the file is still there: parse again.
bool StoredIndexIsCurrent(const DebugFileInfo& d);

// The debug file a target uses for vmlinux (module "") or a module, if any.
absl::StatusOr<std::optional<DebugFileInfo>> DebugFileOf(Db& db, int64_t target_id, const std::string& module);

// The modules of a target whose debug file names `file_suffix` (whole path components) as a
// CU or a source file of a function or symbol line: where `lines` looks for module code.
// (A header whose code was only ever inlined into a module is not recorded there.)
absl::StatusOr<std::vector<std::string>> ModulesMentioningSource(Db& db, int64_t target_id,
                                                                 const std::string& file_suffix);

// A loaded module's section bases (/sys/module/M/sections/*) in a live target: (name, address).
absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> ModuleSections(Db& db, int64_t target_id,
                                                                             const std::string& module);

// The line-table row at a text symbol address of a debug file.
struct SymbolLine {
  std::string section;  // "" for linked images
  uint64_t addr = 0;
  std::optional<int64_t> unit, file;
  int64_t line = 0;
};
absl::StatusOr<std::vector<SymbolLine>> LoadSymbolLines(Db& db, int64_t debug_file_id);

// Address ranges of every function of a debug file, for the symbol join: by function name,
// then row id, each function's ranges in order.
absl::StatusOr<std::vector<debuginfo::FunctionSpan>> LoadFunctionSpans(Db& db, int64_t debug_file_id);

}  // namespace symdex::store
