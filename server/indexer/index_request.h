// One index run as its caller asks for it (indexer.h runs it): which kernel, where its debug
// files are, what to build, and the summary it answers with. Plain values over
// common/index_inputs.h: `symdex index` includes this and nothing of the indexer's machinery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/common/index_inputs.h"
#include "server/common/status.h"

namespace symdex::indexer {

struct IndexRequest {
  std::optional<LiveHostOptions> live;  // exactly one of live / offline / build_id
  std::optional<OfflineKernelOptions> offline;
  std::optional<BuildIdTargetOptions> build_id;  // a kernel known by its vmlinux build-ID
  bool debuginfo = true;
  DebugFinderOptions finder;
  unsigned jobs = 0;  // 0 = all cores
  // Build the address map (debuginfo/symbolize/addr_map.h) of each linked debug file the target uses
  // that has none yet, in AddrMapDirFor(db.path()).
  bool addr_maps = true;
  ProgressFn progress;
  // Replace the target even when its input looks truncated (indexer/input_checks.h).
  bool force = false;
  // The kernel's .config (for CONFIG_KPROBE_EVENTS_ON_NOTRACE); "" = look in the usual places
  // (kernel/kernel_config.h).
  std::string kernel_config;
};

struct IndexSummary {
  std::string name, kind, release, build_id;
  int64_t generation = 0;
  size_t symbols = 0, modules = 0, file_errors = 0;
  size_t text_symbols = 0, text_with_dwarf = 0;
  size_t debug_indexed = 0, debug_cached = 0, debug_missing = 0, debug_failed = 0;
  size_t debug_stored_as_read = 0;  // of debug_indexed: stored while the worker read them (steps.h)
  size_t addr_maps_built = 0, addr_maps_present = 0;
  size_t probe_tables_read = 0;  // files whose fentry/blacklist/init tables gave probe verdicts
  std::string entry_layout;      // the vmlinux's entry layout (common/kernel_arch.h), "" unknown
  double probe_seconds = 0;      // the probe step (JudgeProbes)
  double load_seconds = 0, dwarf_seconds = 0, addr_map_seconds = 0, store_seconds = 0;
  // Parts of dwarf_seconds: parsing debug files (workers, wall; with the rows of a file stored as
  // it is read), storing the other files' rows, the symbol join with the ELF facts.
  double dwarf_parse_seconds = 0, dwarf_store_seconds = 0, join_seconds = 0;
  std::vector<std::string> warnings;
  // Why vmlinux's debug file could not be read (a parse error: damaged, or a form or compression
  // symdex does not read), "" when it was or there was none to read.
  std::string vmlinux_debug_error;
  std::vector<std::string> delta_modules;  // UpdateModules: the modules replaced (empty: whole target)
};

// IndexTarget on the index at `db_path`, opened as a writer's run opens it (store::IndexUse::kWrite):
// what `symdex index` calls.
absl::StatusOr<IndexSummary> IndexInto(const std::string& db_path, const IndexRequest& req);

}  // namespace symdex::indexer
