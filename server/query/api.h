// The query API every front end uses: the CLI embedded (query/local_query.h: LocalQuery over the
// index file), the daemon's gRPC handlers (the same LocalQuery, shared by all calls, seen through
// query/caller_view.h per peer), and the CLI as a client of the daemon (api::RemoteQuery, the
// same interface over gRPC). Answers are plain structs (answers.h, jit_types.h, verbs.h); the
// printing lives in the CLI, the wire format in server/api/ (convert.h by hand, wire_fields.h by
// field name for the verbs of verbs.h), so the CLI prints the same bytes whichever
// implementation answered. This header reaches no store, libdw or gRPC header: a front
// end that includes it sees the questions and answers only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"
#include "server/common/strings.h"
#include "server/query/answers.h"
#include "server/query/decode.h"
#include "server/query/jit_types.h"
#include "server/query/pprof.h"
#include "server/query/probe_forms.h"
#include "server/query/verbs.h"

namespace symdex::query {

struct SymbolizeResult {
  TargetInfo target;
  std::vector<uint64_t> addresses;
  // Parallel to addresses. Shared and immutable: the daemon hands out its cached answers
  // without copying them.
  std::vector<std::shared_ptr<const AddressInfo>> results;
};

// What `symdex status` reports: the index, each target's inputs and their problems.
struct InputFileState {
  std::string role, path, status, detail;
  bool problem = false;  // worth showing without --verbose
  // Symbols it lists that the index left out, as the kernel does, by rule (ingest/kallsyms.h).
  std::vector<DroppedSymbols> dropped;
};
struct DebugFileState {
  std::string module;  // "" = vmlinux
  std::string build_id, status, path, origin, detail;
  bool usable = false;  // its DWARF answers queries (used or cached)
  std::string reader;   // which reader read its DWARF (dwarf_index.h DwarfIndex::reader)
};
// vmlinux's address map (debuginfo/symbolize/addr_map.h) next to the index.
enum class AddrMapStatus { kNone, kPresent, kMissing, kInvalid };  // kNone: no vmlinux debug file to map
std::string_view AddrMapStatusName(AddrMapStatus s);               // "", present, missing, invalid
absl::StatusOr<AddrMapStatus> ParseAddrMapStatus(std::string_view name);
struct AddrMapState {
  AddrMapStatus status = AddrMapStatus::kNone;
  std::string path, detail;  // detail: its size, or what is wrong with it
};
struct TargetState {
  TargetSummary summary;
  std::vector<InputFileState> files;
  std::vector<DebugFileState> debuginfo;
  AddrMapState addr_map;
};
struct IndexOptions {
  bool check_integrity = false;  // run PRAGMA quick_check first
  // false: each target's name and address map only (no counts, input files or debug files):
  // what `symdex addr` asks mid-stream, cheaply.
  bool details = true;
};
// A kernel a fleet replica indexed on demand (symdexd --fleet-cache; fleet/kernel_cache.h).
struct FleetKernelState {
  std::string build_id;
  std::string state;  // indexed | indexing | failed | on-disk (kept from an earlier run)
  uint64_t bytes = 0;
  size_t modules = 0, modules_failed = 0;
  double index_seconds = 0;  // the last run
  double idle_seconds = 0;   // since last use
  std::string error;         // state failed: why (and for how much longer it is remembered)
};
// The daemon's live target is behind the host: its last re-index failed (proto LiveBehind).
struct LiveBehindState {
  int64_t since = 0;  // unix seconds: the first failure since the last success
  std::string attempt, error;
  int64_t failures = 0;
  int64_t next_attempt = 0;  // unix seconds; 0: none scheduled
};
struct IndexState {
  std::string database;
  int64_t schema_version = -1;
  // PRAGMA quick_check ran to the end (a damaged index is an error instead); false: it ran
  // over its time limit, or was not asked for.
  bool integrity_checked = false;
  double integrity_seconds = 0;                  // the time limit it had
  std::vector<std::string> addr_map_temp_files;  // "PATH (why, N s old)"
  std::vector<TargetState> targets;
  // Through a daemon with --fleet-cache: its kernels by build-ID (empty otherwise).
  std::string fleet_cache;
  std::vector<FleetKernelState> fleet_kernels;
  // Through a daemon that tracks the live host: how, the re-indexes applied since it started,
  // and whether the live target is behind (empty / 0 / nullopt otherwise).
  std::string live_tracking;
  int64_t live_updates = 0;
  std::optional<LiveBehindState> live_behind;
};

// Limits both implementations enforce, so a hostile request is refused the same way anywhere.
// Every string a request carries has one; a refusal names the field and the limit, never echoes
// the value.
inline constexpr size_t kMaxSpecLength = 4096;
inline constexpr size_t kMaxTargetNameLength = 256;
inline constexpr size_t kMaxSymbolNameLength = 1024;  // the kernel's KSYM_NAME_LEN is 512
inline constexpr size_t kMaxModuleNameLength = 256;
inline constexpr size_t kMaxPathLength = 4096;
inline constexpr size_t kMaxEventNameLength = 256;  // group and event of a kprobe definition
inline constexpr size_t kMaxFetchargs = 128;        // MAX_TRACE_ARGS in the kernel
inline constexpr int kMaxSourceLine = 1 << 24;      // a line number no source file reaches
inline constexpr size_t kMaxFetchargsBytes = 4096;
// InvalidArgument "FIELD is N bytes; the limit is L" when value is longer than limit.
absl::Status CheckFieldSize(std::string_view field, std::string_view value, size_t limit);
absl::Status CheckKprobeOptions(const KprobeOptions& o);

class QueryApi {
 public:
  virtual ~QueryApi() = default;
  // `target` "" = the default target (query::SelectTarget's rule).
  virtual absl::StatusOr<SymbolizeResult> Symbolize(const std::string& target, const std::vector<uint64_t>& addrs) = 0;
  // Frames from another host running this target's kernel (answers.h: the forms, which are exact).
  virtual absl::StatusOr<FramesResult> Frames(const std::string& target, const FramesContext& ctx,
                                              const std::vector<FrameIn>& frames) = 0;
  // The index and every target's state.
  virtual absl::StatusOr<IndexState> Index(const IndexOptions& opts) = 0;

  // A verb declared in verbs.h, asked of this implementation; a list longer than one request may
  // carry (the verb's kParts) asked in parts, their answers merged.
  template <class V>
  absl::StatusOr<typename V::Answer> Ask(const typename V::Request& r) {
    if constexpr (requires { V::kParts; }) {
      const auto& list = r.*V::kParts;
      if (list.size() > kMaxAddressesPerRequest) {
        typename V::Request part = r;
        typename V::Answer whole;
        for (size_t i = 0; i < list.size(); i += kMaxAddressesPerRequest) {
          const auto end = list.begin() + static_cast<ptrdiff_t>(std::min(list.size(), i + kMaxAddressesPerRequest));
          (part.*V::kParts).assign(list.begin() + static_cast<ptrdiff_t>(i), end);
          ASSIGN_OR_RETURN(typename V::Answer a, AskWhole<V>(part));
          V::Merge(whole, std::move(a));
        }
        return whole;
      }
    }
    return AskWhole<V>(r);
  }
  // Ask, the request as it is: what a server answers (its Check refuses a list too long).
  template <class V>
  absl::StatusOr<typename V::Answer> AskWhole(const typename V::Request& r) {
    constexpr size_t kIndex = Verbs::IndexOf<V>();
    ASSIGN_OR_RETURN(AnyAnswer a, Call(AnyRequest(std::in_place_index<kIndex>, r)));
    if (a.index() != kIndex) return absl::InternalError(StrCat(V::kMethod, " was answered with another verb's answer"));
    return std::get<kIndex>(std::move(a));
  }
  // The verbs of verbs.h, each request answered by the verb at the same place in Verbs.
  virtual absl::StatusOr<AnyAnswer> Call(const AnyRequest& r) = 0;
};

// The index at `db_path` opened for one process's questions (the CLI embedded): checks the file
// exists and this user may read it (PermissionDenied / FailedPrecondition naming the path and the
// cure), migrates an index written by an older symdex when this user may write it, and keeps
// per-generation tables but no answers across the process's calls (local_query.h: LocalQuery).
absl::StatusOr<std::unique_ptr<QueryApi>> OpenEmbeddedApi(const std::string& db_path);

// What `symdex --version` and `symdexd --version` print after the program's name: its version
// and the formats it writes, "0.1.0 (index schema 9, address maps v2, gRPC API symdex.v1)" — so
// that a bug report or a fleet inventory says which index a binary reads. The schema is the
// last migration the binary applies (an index made by a newer one is refused, not half read).
std::string VersionText(std::string_view program_version);

}  // namespace symdex::query
