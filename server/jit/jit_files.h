// The JIT verbs that work on files of this machine and on the index file itself, not through a
// daemon: `symdex jit ingest` (jitdumps and perf maps into the index), `jit export` (a jitted DSO
// per load, written from the code bytes in the index) and `jit dsos` (the jitted DSOs already on
// disk). What a caller asks and what it gets, as plain values over common/jit_records.h: the CLI
// includes this and nothing of the ingest, the store or the ELF writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/common/jit_records.h"
#include "server/common/status.h"

namespace symdex::jit {

// Every jit-*.dump and perf-*.map of `paths` (a DIR: the ones directly in it) into the index at
// `db_path`, one transaction per file, in order. An error (a PATH that does not exist, an index
// that cannot be opened for writing) comes before anything is read; a file that fails is reported
// (status "error") and the others go on. No files: an empty list.
absl::StatusOr<std::vector<JitIngestReport>> IngestJitFilesInto(const std::string& db_path,
                                                                const std::vector<std::string>& paths);

struct JitExportRequest {
  std::string out;     // the directory (created)
  std::string scheme;  // canonical (query::JitSchemeArg)
  std::optional<uint32_t> pid;
  std::optional<uint64_t> instance;
};
struct ExportedDso {
  std::string path;
  std::string name;      // the function
  std::string build_id;  // hex, in the scheme asked
  size_t lines = 0;      // .debug_line entries written
};
struct JitExportSummary {
  std::vector<ExportedDso> files;
  size_t with_lines = 0;
  size_t distinct_build_ids = 0;
};
// One `jitted-<pid>-<code_index>.so` per load of the instances chosen (query::JitExportInstances),
// read from the index at `db_path`. An instance whose e_machine the ELF writer does not know is
// skipped, told through `on_skip` (pid, e_machine) as it is met. Errors name what failed: the
// instances, a directory or file that cannot be written.
absl::StatusOr<JitExportSummary> ExportJitDsos(const std::string& db_path, const JitExportRequest& req,
                                               const std::function<void(uint32_t pid, uint32_t elf_mach)>& on_skip);

struct JittedDsosOnDisk {
  std::vector<JittedDso> dsos;  // read, in the order found
  // (path, why) of what could not be read; the path is empty for a PATH that cannot be listed.
  std::vector<std::pair<std::string, std::string>> unreadable;
  std::vector<SharedDsoId> shared;  // build-IDs more than one of `dsos` carries
};
// The jitted-*.so files `paths` name (a DIR: directly in it and one level down, as perf's
// ~/.debug/jit/<name>/ holds them), each read and parsed within bounds.
JittedDsosOnDisk ReadJittedDsos(const std::vector<std::string>& paths);

}  // namespace symdex::jit
