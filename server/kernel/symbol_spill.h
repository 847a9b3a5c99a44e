// A target's module symbols, parked outside memory for the length of an index run.
//
// An index run used to hold every symbol of the kernel from the load to the write: 128 bytes and
// a name each, 235k symbols for Debian 6.1 with its 1,121 modules, twice that for a kernel with
// twice the modules. Here each module's symbols live in an unlinked scratch file (common/
// file_util.h ScratchDirs: disk, not tmpfs, where they differ), serialized, and a step that works
// on a module takes them out, changes them and puts them back: what an index run holds of the
// modules is the few being worked on, whatever their number. vmlinux's symbols stay in
// KernelTarget::symbols (one part, worked on by every step at once).
//
// The load order of the symbols is kept (vmlinux's and each module's, as KernelTarget::symbols had
// them), and ForEachSymbol gives them back in it: the store's row order is the load's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/common/unique_fd.h"
#include "server/kernel/kernel_target.h"

namespace symdex::kernel {

class SymbolSpill {
 public:
  // A spill in an unlinked scratch file; in memory (serialized, still a third of the symbols'
  // size) when no scratch directory takes one.
  static std::unique_ptr<SymbolSpill> Create();
  static std::unique_ptr<SymbolSpill> InMemory();
  SymbolSpill(const SymbolSpill&) = delete;
  SymbolSpill& operator=(const SymbolSpill&) = delete;

  // Module `module`'s symbols as the last Put left them (none: empty), in their order.
  absl::StatusOr<std::vector<SymbolEntry>> Get(int module) const;
  // Replaces module `module`'s symbols. Each symbol's `module` must be `module` (it is not
  // stored). Threads may Get and Put different modules at once; one module, one thread.
  absl::Status Put(int module, const std::vector<SymbolEntry>& syms);
  // Get, `change`, Put: the change made to the module's symbols in place.
  absl::Status Update(int module, const std::function<void(std::vector<SymbolEntry>&)>& change);

  // What a pass over every module needs of a symbol without making it: read from the record as
  // it lies (the name a view into it, valid for the call).
  struct Brief {
    char type;
    uint32_t probe;
    bool joined;  // a DWARF function or a line-table row
    std::string_view name;
  };
  absl::Status VisitBriefs(int module, const std::function<void(const Brief&)>& fn) const;

  size_t Count(int module) const;
  size_t total() const;
  bool on_disk() const { return fd_.valid(); }
  // The modules that have symbols here, by index.
  std::vector<int> Modules() const;

  // The load order: (owner, how many of its symbols next), owner -1 being vmlinux.
  std::vector<std::pair<int, uint32_t>> runs;
  // Applied to each module's symbols as ForEachSymbol hands them out: a last change that needs
  // every part seen first (the probe step's cross-part verdicts), made on the way to the store
  // instead of by one more trip through the spill. Get does not apply it.
  std::function<void(std::vector<SymbolEntry>&)> finish;

 private:
  explicit SymbolSpill(UniqueFd fd) : fd_(std::move(fd)) {}
  struct Record {
    uint64_t offset = 0, bytes = 0, capacity = 0;
    uint32_t count = 0;
  };
  absl::Status Read(const Record& r, std::string& out) const;
  // Module `module`'s record into `bytes`; how many symbols it holds (0: none, `bytes` empty).
  absl::StatusOr<uint32_t> Fetch(int module, std::string& bytes) const;

  mutable std::mutex mu_;
  std::vector<Record> records_;  // by module index
  UniqueFd fd_;                  // invalid: the records are in memory_
  std::string memory_;
  uint64_t end_ = 0;
  size_t total_ = 0;
};

// Moves every module symbol of t.symbols into a new spill (t.spill), in their order, leaving
// vmlinux's in t.symbols. A target already spilled is left as it is.
absl::Status SpillModuleSymbols(KernelTarget& t);

// Every symbol of `t` in load order: all of t.symbols when nothing is spilled; else vmlinux's and
// each module's interleaved as they were loaded. Stops at the first error `fn` returns.
absl::Status ForEachSymbol(const KernelTarget& t, const std::function<absl::Status(const SymbolEntry&)>& fn);
// How many symbols `t` has, spilled or not.
size_t SymbolCount(const KernelTarget& t);

}  // namespace symdex::kernel
