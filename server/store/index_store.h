// Reads and writes kernel targets in the SQLite index. A (re)index replaces a target in one
// IMMEDIATE transaction: concurrent readers (WAL) see either the old or the new version.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/kernel_records.h"
#include "server/common/mapped_file.h"
#include "server/kernel/kernel_target.h"
#include "server/store/sqlite_db.h"
#include "server/store/symbol_extent.h"

namespace symdex::store {

struct FileRecord {
  std::string role, path;
  kernel::InputFileStatus status = kernel::InputFileStatus::kUsed;
  std::string detail;
  std::vector<DroppedSymbols> dropped;  // what the run left out of it, by rule
};

struct ModuleRecord {
  std::string name, build_id, path;
  std::optional<uint64_t> text_addr, size;
};

// One symbol row joined with its module (and DWARF function, when known).
struct SymbolRecord {
  std::string name;
  char type = '?';
  std::string module;  // "" = vmlinux
  uint64_t addr = 0;   // absolute, or offset into `section` when section is non-empty
  std::string section;
  std::optional<uint64_t> size;
  bool size_exact = false;
  std::optional<DwarfInfo> dwarf;
  std::string dwarf_note;            // why there is no DWARF function, or where in it the symbol is
  uint32_t probe = 0;                // kernel::ProbeBits
  std::optional<uint8_t> elf_facts;  // common/elf_facts.h bits; absent: no ELF symbol table said
};

// A new symbols_stamp: random, never 0.
int64_t NewSymbolsStamp();

// Writes `t`, replacing any target of the same name. Returns the new generation.
absl::StatusOr<int64_t> ReplaceTarget(Db& db, const kernel::KernelTarget& t, int64_t now_unix);

// Replaces the warnings stored with the target named `name` at `generation` (warnings learnt
// after it was written, such as an address map that could not be built). NotFound when the
// target has moved on to another generation (its writer's warnings stand).
absl::Status SetTargetWarnings(Db& db, const std::string& name, int64_t generation,
                               const std::vector<std::string>& warnings);

// Replaces, in the target named t.name, just the modules named in `names`: their rows (module,
// sections, symbols, debug-info record) are deleted and those of `t` with these names inserted
// (a name absent from `t` is an unloaded module). vmlinux and every other module stay as they
// are; the target keeps its id and its generation goes up by one, in one transaction.
// NotFound when there is no such target yet.
absl::StatusOr<int64_t> ReplaceModules(Db& db, const kernel::KernelTarget& t, const std::set<std::string>& names,
                                       int64_t now_unix);

// The names of a target's modules (pseudo-modules such as "bpf" included).
absl::StatusOr<std::vector<std::string>> ModuleNames(Db& db, int64_t target_id);

absl::StatusOr<std::vector<TargetInfo>> ListTargets(Db& db);
absl::StatusOr<std::optional<TargetInfo>> FindTarget(Db& db, const std::string& name);
absl::StatusOr<TargetCounts> CountTarget(Db& db, int64_t target_id);
absl::StatusOr<std::vector<FileRecord>> TargetFiles(Db& db, int64_t target_id);
struct DebugInfoStatus {
  std::string module;  // "" = vmlinux
  std::string build_id;
  kernel::DebugFileStatus status = kernel::DebugFileStatus::kNotFound;
  std::string path, origin, detail;
  std::optional<int64_t> debug_file_id;
  std::string reader;  // debug_files.reader of its file ("" when none or not recorded)
};
absl::StatusOr<std::vector<DebugInfoStatus>> TargetDebugInfo(Db& db, int64_t target_id);

absl::StatusOr<std::optional<ModuleRecord>> FindModule(Db& db, int64_t target_id, const std::string& name);

// Symbols named exactly `name`; with `with_clones`, also compiler clones "name.<suffix>"
// (.isra.0, .constprop.0, .part.0, .cold, ...).
absl::StatusOr<std::vector<SymbolRecord>> SymbolsByName(Db& db, int64_t target_id, const std::string& name,
                                                        bool with_clones);

// How many symbols of any type carry `name`, over the whole target and inside `module`.
struct NameCounts {
  int64_t total = 0;
  int64_t in_module = 0;
};
absl::StatusOr<NameCounts> CountName(Db& db, int64_t target_id, const std::string& name, const std::string& module);
// How many of the target's symbols are vmlinux's (not a module's).
absl::StatusOr<int64_t> CountVmlinuxSymbols(Db& db, int64_t target_id);

// What of the kernel index carries build-ID `hex` (lowercase hex): targets (kind "target", `name`
// the target's), modules ("module", the module's name and its target's) and debug files
// ("debug-file", `name` the file's path), in that order.
struct BuildIdOwner {
  std::string kind;
  std::string name;
  std::string target;
};
absl::StatusOr<std::vector<BuildIdOwner>> KernelObjectsWithBuildId(Db& db, const std::string& hex);

// How many symbols of the target, of any type, are named exactly `name` (from the covering
// index symbols_by_name alone: no row is read).
absl::StatusOr<int64_t> CountSymbolsNamed(Db& db, int64_t target_id, const std::string& name);

// An address lookup's answer: the symbol holding the address, or why none does.
struct Containment {
  std::optional<SymbolRecord> symbol;
  std::string why;  // set when !symbol: "not in vmlinux or any module", ...
  // When !symbol because `addr` is exactly a label that ends a code region (__end_*,
  // __*_text_end, ...; store/symbol_extent.h): that label. It holds no code, but it is the
  // name kallsyms gives the address (label+0x0) and an instance 'which' lists there, so an
  // address spec names it (and its probe verdict) rather than nothing.
  std::optional<SymbolRecord> end_label;
};

// The text symbol holding `addr` (absolute addresses only): the function an address is in,
// by the rule of store/symbol_extent.h. Among aliases at one address, a real function with
// DWARF and a plain name is preferred.
absl::StatusOr<Containment> SymbolContaining(Db& db, int64_t target_id, uint64_t addr);

// The code symbol of an offline module (its symbols are offsets into their sections) holding
// `offset` in `section`: the one at the greatest offset <= it (aliases ranked as above), if the
// offset is inside its size. A symbol without a size (an assembly label) holds everything up to
// the next symbol. `why` says what is missing: the module, the section, or a symbol there.
absl::StatusOr<Containment> SymbolInSection(Db& db, int64_t target_id, const std::string& module,
                                            const std::string& section, uint64_t offset);

// One module's code symbols by section, read at once: SymbolInSection's answers for a batch
// of offsets into that module (a query per frame cost two statements each).
class ModuleCodeSymbols {
 public:
  // Exactly what SymbolInSection(db, target, module, section, offset) returns.
  Containment InSection(const std::string& section, uint64_t offset) const;
  size_t size() const { return count_; }

 private:
  friend absl::StatusOr<std::shared_ptr<const ModuleCodeSymbols>> LoadModuleCodeSymbols(Db& db, int64_t target_id,
                                                                                        const std::string& module);
  std::string module_;
  bool indexed_ = false;
  size_t count_ = 0;
  std::map<std::string, std::vector<SymbolRecord>, std::less<>> by_section_;  // each in (addr, id) order
};
absl::StatusOr<std::shared_ptr<const ModuleCodeSymbols>> LoadModuleCodeSymbols(Db& db, int64_t target_id,
                                                                               const std::string& module);

// A target's text symbols with absolute addresses, in address order, in brief (no DWARF
// columns), and where its owners lie: what SymbolContaining answers, for a batch of addresses
// at once.
class TextSymbolTable {
 public:
  // What SymbolContaining(addr) returns, in brief: `dwarf` carries has_function only,
  // dwarf_note is empty (the probe bits are there).
  Containment Containing(uint64_t addr) const;
  size_t size() const { return entries_.size(); }

  struct Entry {
    int64_t addr;  // as stored: kernel addresses are negative, and so sort below user ones
    uint64_t size;
    uint32_t name;  // offset into names_
    uint32_t module;
    char type;
    uint8_t flags;
    uint8_t elf_facts;  // common/elf_facts.h bits, when flags say they are known
    uint8_t reserved;   // 0 (no padding: the records are written to a file as they are)
    uint32_t probe;     // kernel/probe_bits.h
  };

 private:
  friend absl::StatusOr<std::shared_ptr<const TextSymbolTable>> LoadTextSymbolTable(Db& db, int64_t target_id);
  friend struct TextSymbolFileAccess;  // store/text_symbol_file.cc: the table as a file and back
  // Read from the database into own_*, or viewed in a mapped text-symbol file (file_).
  std::vector<Entry> own_entries_;
  std::string own_names_;
  std::shared_ptr<const MappedFile> file_;
  std::span<const Entry> entries_;  // by (addr, row id), as SymbolContaining reads them
  std::string_view names_;          // NUL-terminated names
  std::vector<std::string> modules_;
  OwnerExtents extents_;
};
absl::StatusOr<std::shared_ptr<const TextSymbolTable>> LoadTextSymbolTable(Db& db, int64_t target_id);

// Every symbol of the target (text only unless all_types), ordered by name then owner.
absl::StatusOr<std::vector<SymbolRecord>> AllSymbols(Db& db, int64_t target_id, bool all_types);

}  // namespace symdex::store
