// `symdex pprof`: the kernel locations of a pprof profile — the kernel's and its
// modules' mappings ("[kernel.kallsyms]", "vmlinux", "[MOD]" or "MOD.ko") — given their functions,
// file:line:column and inline frames, every other location and field left as they were, so the
// most common profile format gets symdex's answers (duplicated names are told apart: a copy's
// Function.name is its canonical spec, name_show@card.c, its system_name the symbol).
//
// Works over any QueryApi through Frames. Addresses are runtime addresses: vmlinux's are placed
// with the host's _text or KASLR offset when given, as the target's own when it is live, else
// taken as link-time (a note says so). A module mapping's memory_start is taken as its .text base
// (the start of a module's core on x86-64), its build-ID as the module's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/query/answers.h"

namespace symdex::query {

class QueryApi;

struct PprofRequest {
  std::string target;           // "" = by the kernel mapping's build-ID, else the default target
  std::string kernel_build_id;  // hex; default: the kernel mapping's
  std::optional<uint64_t> host_text;
  std::optional<int64_t> kaslr_offset;
  std::string profile;  // gzip-compressed or not
};

struct PprofResult {
  std::string profile;  // gzip-compressed
  TargetInfo target;
  size_t samples = 0, locations = 0;
  size_t kernel_locations = 0;  // in kernel or module mappings
  size_t symbolized = 0;        // given functions and lines
  std::vector<std::string> notes;
};

// InvalidArgument for bytes that are not a profile (or over the limits of ingest/pprof_wire.h);
// a profile without kernel locations is returned as it was (recompressed), with a note.
absl::StatusOr<PprofResult> SymbolizePprof(QueryApi& api, const PprofRequest& req);

}  // namespace symdex::query
