// The verbs of the query API declared once each: the question (Request), the answer (Answer),
// the RPC that carries them (kMethod in symdex.v1.SymbolService, the proto messages' fields named
// as the structs' fields), the `symdex` command that asks it (kCli, held to `symdex --help` by a
// test), whether it runs on the daemon's pool (kHeavy), what a caller must be
// to see it (kAccess: the caller view's policy), the limits every front end enforces (Check) and
// the answer from the index (Local, in the query layer). From that one declaration:
//   QueryApi::Ask<V>          the question, to whichever implementation answers it
//   LocalQuery                Check, then Local
//   CallerView                kAccess: refused, or every Instance in the answer hidden as a
//                             Which answer's are (caller_view.h)
//   api::RemoteQuery          the request put on the wire by field name, the answer read back
//   the daemon's handler      the same in reverse, in Serve with the peer's limits and the fleet's
//                             kernel by build-ID (server/api/verb_service.h)
// so a new verb is this declaration, its Local, its proto messages and the CLI's printing. A
// verb whose answer holds addresses outside its Instances zeroes them in HideAddresses(Answer&)
// (returning a Status when it may refuse instead). A request with a `spec` is refused to such a
// caller when the spec names an absolute address of a live target (an address oracle). A verb
// whose answer names one copy on the wire says where its list of copies is: Resolved(Answer&).
// A verb whose answer holds parts for privileged callers only removes them for others in
// HidePrivileged(Answer&), and may say in ForUnprivileged(Request&) how not to look for them. A verb whose RPC answered
// "nothing" as NOT_FOUND before it was declared keeps that wire: NotFoundMessage(answer) ("" = an answer to send) and
// Empty(request), what the client reads NOT_FOUND back as. A verb of another service names it (kService, with kLabel
// for its metrics); a privileged verb says why in its refusal (kWhyPrivileged); a verb whose request carries a list is
// asked in parts (kParts, Merge: QueryApi::Ask), on the daemon in cancellable slices (kSlice); a long answer goes as a
// stream of parts (Part, PartOf, Joined); a verb with a bidi stream of calls names it (kStreamMethod); the daemon
// routes by RouteOf and counts Weight addresses until the answer is read; a client sends frames as concurrent parts
// (ConcurrentParts, Join); a composed verb answers from other verbs over whichever API is asked (Composed); the Status
// verb's ServerPart is what the daemon says of itself. Every read RPC is a verb here: the file is long because it is
// the table, each verb's request, answer and traits side by side.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "server/common/status.h"
#include "server/query/answers.h"
#include "server/query/decode.h"
#include "server/query/fields.h"
#include "server/query/jit_types.h"
#include "server/query/pprof.h"

namespace symdex::query {

class LocalQuery;
class QueryApi;

// The most addresses (or other list elements) one request may carry.
inline constexpr size_t kMaxAddressesPerRequest = 65536;

// Where the daemon sends a call (a verb's RouteOf, else its request's target): the kernel (a
// build-ID as "build-id:HEX") and the modules it names, to be indexed first on a fleet replica.
struct VerbRoute {
  std::string target;
  absl::StatusOr<std::vector<FrameModule>> modules = std::vector<FrameModule>{};
  std::string build_id;  // the kernel build-ID a fleet proxy routes the call on (a client's header)
};
// A build-ID names the kernel when no target does.
VerbRoute RouteByBuildId(const std::string& target, const std::string& kernel_build_id);

enum class VerbAccess {
  kAnyone,         // nothing in the answer reveals the kernel's layout
  kHideAddresses,  // for a live target an unprivileged caller gets `target` without the kernel's
                   // base, and every Instance as _text+N / SECTION+0xOFF (CallerView::Hide); an
                   // answer without a `target` has each TargetInfo in it without the base
  kPrivileged,     // refused to unprivileged callers
  kAbsoluteInput,  // the request holds a live kernel's absolute addresses (an address oracle):
                   // refused for a live target to a caller denied them, naming kAsked
};

// Every indexed kernel with its counts: what `symdex status` and a front end choosing a target
// list. A caller denied a live kernel's addresses gets its entry without the kernel's base.
struct TargetSummary {
  TargetInfo info;
  TargetCounts counts;
  SYMDEX_FIELDS(TargetSummary, info, counts)
};
struct TargetsRequest {
  SYMDEX_FIELDS(TargetsRequest)
};
struct TargetsAnswer {
  std::vector<TargetSummary> targets;
  SYMDEX_FIELDS(TargetsAnswer, targets)
};
struct Targets {
  static constexpr const char* kMethod = "ListTargets";
  static constexpr const char* kCli = "status";  // status lists the same targets, with the index's state (IndexStatus)
  static constexpr bool kHeavy = false;          // one small query, its counts cached per generation
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = TargetsRequest;
  using Answer = TargetsAnswer;
  static absl::Status Check(const Request&) { return absl::OkStatus(); }
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// `symdex which NAME`: every symbol instance named NAME (with its compiler clones unless
// `exact`), each with its DWARF row and probe verdict. Empty is an answer (the CLI exits 1).
struct WhichRequest {
  std::string target;  // "" = the default target
  std::string name;
  bool exact = false;  // false: also NAME.isra.0, NAME.cold, ...
  SYMDEX_FIELDS(WhichRequest, target, name, exact)
};
struct WhichResult {
  TargetInfo target;
  std::vector<Instance> instances;
  SYMDEX_FIELDS(WhichResult, target, instances)
};
struct Which {
  static constexpr const char* kMethod = "Which";
  static constexpr const char* kCli = "which";
  static constexpr bool kHeavy = false;  // the name's rows, cached per generation
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = WhichRequest;
  using Answer = WhichResult;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// A verb whose answer is long goes out as a stream of parts (the RPC's messages, each a Part):
// PartOf(answer, i, part) fills part i (false past the last); Joined(request, parts) is the answer
// again, or DataLoss saying what does not add up. On the daemon a stream holds one part in flight
// and its stream slot (and kListing: a listing slot) until the last is read.

// `symdex dups`: every name more than one symbol instance has, with its instances.
struct DupsRequest {
  std::string target;  // "" = the default target
  DupsOptions opts;
  static constexpr auto Fields() {
    return std::make_tuple(Field<DupsRequest, std::string>{"target", &DupsRequest::target},
                           Field<DupsRequest, DupsOptions>{"", &DupsRequest::opts});
  }
};
struct DupsResult {
  TargetInfo target;
  // Shared and immutable: computed once per (target generation, options) and handed to every
  // caller (the daemon streams it to many clients at once without copying it).
  std::shared_ptr<const std::vector<DupGroup>> groups = std::make_shared<const std::vector<DupGroup>>();
  SYMDEX_FIELDS(DupsResult, target, groups)
};
struct DupsPart {  // a group; the first part carries the target too
  std::optional<TargetInfo> target_info;
  std::string name;  // "": a part with the target only (no duplicates)
  std::vector<Instance> instances;
  SYMDEX_FIELDS(DupsPart, target_info, name, instances)
};
struct ListDuplicates {
  static constexpr const char* kMethod = "ListDuplicates";
  static constexpr const char* kCli = "dups";
  static constexpr bool kHeavy = true;  // counts every name of the target (cached per generation)
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = DupsRequest;
  using Answer = DupsResult;
  using Part = DupsPart;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  static bool PartOf(const Answer& a, size_t i, Part& p) {
    const std::vector<DupGroup>& groups = *a.groups;
    if (i >= std::max<size_t>(groups.size(), 1)) return false;
    if (i == 0) p.target_info = a.target;
    if (groups.empty()) return true;
    p.name = groups[i].name;
    p.instances = groups[i].instances;
    return true;
  }
  static absl::StatusOr<Answer> Joined(const Request&, std::vector<Part>&& parts) {
    Answer a;
    std::vector<DupGroup> groups;
    for (Part& p : parts) {
      if (p.target_info) a.target = std::move(*p.target_info);
      if (!p.name.empty()) groups.push_back({std::move(p.name), std::move(p.instances)});
    }
    a.groups = std::make_shared<const std::vector<DupGroup>>(std::move(groups));
    return a;
  }
};

// `symdex symbols` and `symdex kallsyms`: every symbol instance of a target.
struct SymbolsOptions {
  std::string module;      // only this module ("vmlinux" for the core kernel); "" = all
  bool all_types = false;  // every symbol type, not only text
  bool canonical = false;  // text instances only, each with its canonical spec
  bool aliases = false;    // kas_alias suffixes (path_c_LINE) for duplicated text names
  static constexpr auto Fields() {
    return std::make_tuple(Field<SymbolsOptions, std::string>{"module", &SymbolsOptions::module},
                           Field<SymbolsOptions, bool>{"all_types", &SymbolsOptions::all_types},
                           Field<SymbolsOptions, bool>{"canonical", &SymbolsOptions::canonical},
                           Field<SymbolsOptions, bool>{"kas_aliases", &SymbolsOptions::aliases});
  }
};
struct SymbolsRequest {
  std::string target;  // "" = the default target
  SymbolsOptions opts;
  static constexpr auto Fields() {
    return std::make_tuple(Field<SymbolsRequest, std::string>{"target", &SymbolsRequest::target},
                           Field<SymbolsRequest, SymbolsOptions>{"", &SymbolsRequest::opts});
  }
};
struct SymbolsResult {
  TargetInfo target;
  std::vector<Instance> instances;
  std::vector<std::string> canonical;  // parallel to instances when asked, else empty
  std::vector<std::string> alias;      // parallel to instances when asked ("" = none), else empty
  SYMDEX_FIELDS(SymbolsResult, target, instances, canonical, alias)
};
struct SymbolsPart {  // up to kChunk instances; the first part carries the target too
  std::optional<TargetInfo> target_info;
  std::vector<Instance> instances;
  std::vector<std::string> canonical, alias;
  SYMDEX_FIELDS(SymbolsPart, target_info, instances, canonical, alias)
};
struct ListSymbols {
  static constexpr const char* kMethod = "ListSymbols";
  static constexpr const char* kCli = "symbols";
  static constexpr bool kHeavy = true;    // every symbol of the target
  static constexpr bool kListing = true;  // a listing slot too: the biggest answers there are
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = SymbolsRequest;
  using Answer = SymbolsResult;
  using Part = SymbolsPart;
  static constexpr size_t kChunk = 1024;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  // A canonical spec of last resort names the copy by its address (NAME@0xADDR).
  static void HideAddresses(Answer& a) {
    for (std::string& c : a.canonical) {
      if (c.find("@0x") != std::string::npos) c.clear();
    }
  }
  static bool PartOf(const Answer& a, size_t i, Part& p) {
    const size_t n = a.instances.size(), begin = i * kChunk;
    if (begin >= std::max<size_t>(n, 1)) return false;
    if (i == 0) p.target_info = a.target;
    const size_t end = std::min(n, begin + kChunk);
    p.instances.assign(a.instances.begin() + static_cast<ptrdiff_t>(begin),
                       a.instances.begin() + static_cast<ptrdiff_t>(end));
    if (!a.canonical.empty()) {
      p.canonical.assign(a.canonical.begin() + static_cast<ptrdiff_t>(begin),
                         a.canonical.begin() + static_cast<ptrdiff_t>(end));
    }
    if (!a.alias.empty()) {
      p.alias.assign(a.alias.begin() + static_cast<ptrdiff_t>(begin), a.alias.begin() + static_cast<ptrdiff_t>(end));
    }
    return true;
  }
  static absl::StatusOr<Answer> Joined(const Request& r, std::vector<Part>&& parts);
};

// `symdex status`: the index, each target's inputs and their problems — and, through a daemon,
// the daemon's own state (ServerPart: what the daemon fills in; empty embedded).
template <>
struct FieldsOf<DroppedSymbols> {
  static constexpr auto Fields() {
    return std::make_tuple(Field<DroppedSymbols, std::string>{"rule", &DroppedSymbols::rule},
                           Field<DroppedSymbols, uint64_t>{"count", &DroppedSymbols::count});
  }
};
struct InputFileState {
  std::string role, path, status, detail;
  bool problem = false;  // worth showing without --verbose
  // Symbols it lists that the index left out, as the kernel does, by rule (ingest/kallsyms.h).
  std::vector<DroppedSymbols> dropped;
  SYMDEX_FIELDS(InputFileState, role, path, status, detail, problem, dropped)
};
struct DebugFileState {
  std::string module;  // "" = vmlinux
  std::string build_id, status, path, origin, detail;
  bool usable = false;  // its DWARF answers queries (used or cached)
  std::string reader;   // which reader read its DWARF (dwarf_index.h DwarfIndex::reader)
  SYMDEX_FIELDS(DebugFileState, module, build_id, status, path, origin, detail, usable, reader)
};
// vmlinux's address map (debuginfo/symbolize/addr_map.h) next to the index.
enum class AddrMapStatus { kNone, kPresent, kMissing, kInvalid };  // kNone: no vmlinux debug file to map
std::string_view AddrMapStatusName(AddrMapStatus s);               // "", present, missing, invalid
absl::StatusOr<AddrMapStatus> ParseAddrMapStatus(std::string_view name);
struct AddrMapState {  // on the wire by hand: its status by name
  AddrMapStatus status = AddrMapStatus::kNone;
  std::string path, detail;  // detail: its size, or what is wrong with it
};
struct TargetState {
  TargetSummary summary;
  std::vector<InputFileState> files;
  std::vector<DebugFileState> debuginfo;
  AddrMapState addr_map;
  static constexpr auto Fields() {
    return std::make_tuple(Field<TargetState, TargetSummary>{"target", &TargetState::summary},
                           Field<TargetState, std::vector<InputFileState>>{"files", &TargetState::files},
                           Field<TargetState, std::vector<DebugFileState>>{"debuginfo", &TargetState::debuginfo},
                           Field<TargetState, AddrMapState>{"addr_map", &TargetState::addr_map});
  }
};
struct IndexOptions {
  bool check_integrity = false;  // run PRAGMA quick_check first
  // false: each target's name and address map only (no counts, input files or debug files):
  // what `symdex addr` asks mid-stream, cheaply.
  bool details = true;
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
  SYMDEX_FIELDS(IndexState, database, schema_version, integrity_checked, integrity_seconds, addr_map_temp_files,
                targets)
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
  SYMDEX_FIELDS(FleetKernelState, build_id, state, bytes, modules, modules_failed, index_seconds, idle_seconds, error)
};
// The daemon's live target is behind the host: its last re-index failed.
struct LiveBehindState {
  int64_t since = 0;         // unix seconds: the first failure since the last success
  std::string attempt;       // start | modules changed: +m -m ~m | retry[, modules changed: …] | SIGHUP
  std::string error;         // why it failed
  int64_t failures = 0;      // attempts failed since `since`
  int64_t next_attempt = 0;  // unix seconds; 0: none scheduled
  SYMDEX_FIELDS(LiveBehindState, since, attempt, error, failures, next_attempt)
};
// What only a daemon knows of itself.
struct ServerState {
  std::string version;
  int64_t started_at = 0;  // unix seconds
  int64_t requests_served = 0;
  // Tracking the live host: how, the re-indexes applied since the start, and whether the live
  // target is behind (empty / 0 / nullopt otherwise).
  std::string live_tracking;
  int64_t live_updates = 0;
  std::optional<LiveBehindState> live_behind;
  // --fleet-cache: its kernels by build-ID, and the requests waiting for an index run.
  std::string fleet_cache;
  std::vector<FleetKernelState> fleet_kernels;
  int64_t fleet_waiting = 0;
  SYMDEX_FIELDS(ServerState, version, started_at, requests_served, live_tracking, live_updates, live_behind,
                fleet_cache, fleet_kernels, fleet_waiting)
};
struct StatusRequest {
  bool index = false;            // also the index's state
  bool check_integrity = false;  // ... after PRAGMA quick_check
  bool addr_maps_only = false;   // ... each target's name and address map only (cheap)
  SYMDEX_FIELDS(StatusRequest, index, check_integrity, addr_maps_only)
};
struct StatusAnswer {
  std::string database;
  std::vector<TargetSummary> targets;
  int64_t debug_files = 0;
  std::optional<IndexState> index;  // when asked
  ServerState server;
  static constexpr auto Fields() {
    return std::make_tuple(Field<StatusAnswer, std::string>{"database", &StatusAnswer::database},
                           Field<StatusAnswer, std::vector<TargetSummary>>{"targets", &StatusAnswer::targets},
                           Field<StatusAnswer, int64_t>{"debug_files", &StatusAnswer::debug_files},
                           Field<StatusAnswer, std::optional<IndexState>>{"index", &StatusAnswer::index},
                           Field<StatusAnswer, ServerState>{"", &StatusAnswer::server});
  }
};
struct IndexStatus {
  static constexpr const char* kMethod = "Status";
  static constexpr const char* kCli = "status";
  static constexpr bool kHeavy = true;  // the index's state: every target's files (and quick_check)
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = StatusRequest;
  using Answer = StatusAnswer;
  static absl::Status Check(const Request&) { return absl::OkStatus(); }
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  static ServerState& ServerPart(Answer& a) { return a.server; }
};

// `symdex addr ADDR...`: each address's symbol, offset, file:line and inline chain. On the daemon
// in slices of kSlice (a cancelled call stops within one), all from one generation of the target.
struct SymbolizeRequest {  // on the wire by hand: the addresses copied as one block
  std::string target;      // "" = the default target
  std::vector<uint64_t> addresses;
};
struct SymbolizeResult {  // on the wire by hand: the answers by the thousand, each in brief
  TargetInfo target;
  std::vector<uint64_t> addresses;
  // Parallel to addresses. Shared and immutable: the daemon hands out its cached answers
  // without copying them.
  std::vector<std::shared_ptr<const AddressInfo>> results;
};
struct SymbolizeAddresses {
  static constexpr const char* kMethod = "Symbolize";
  static constexpr const char* kCli = "addr";
  static constexpr const char* kStreamMethod = "SymbolizeStream";  // a bidi stream of such calls
  static constexpr bool kHeavy = true;                             // DWARF for an address not in the address map
  static constexpr VerbAccess kAccess = VerbAccess::kAbsoluteInput;
  static constexpr std::string_view kAsked = "symbolizing absolute addresses";
  static constexpr size_t kSlice = 4096;
  using Request = SymbolizeRequest;
  using Answer = SymbolizeResult;
  static constexpr auto kParts = &SymbolizeRequest::addresses;
  static void Merge(Answer& a, Answer&& part) {
    a.target = std::move(part.target);
    a.addresses.insert(a.addresses.end(), part.addresses.begin(), part.addresses.end());
    std::move(part.results.begin(), part.results.end(), std::back_inserter(a.results));
  }
  static size_t Weight(const Request& r) { return r.addresses.size(); }
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// `symdex frames`: frames from another host running this target's kernel — runtime addresses,
// module offsets, printed symbol+offset frames — each pinned to its copy (answers.h: the forms,
// which are exact). Routed to the kernel the request names (a fleet's by build-ID, with its
// modules). A client sends a big request as up to kMaxParts calls at once over its one
// connection, cut where no stack is split (ConcurrentParts, Join): the daemon answers the later
// parts while the client reads the first.
struct FramesRequest {  // on the wire by hand: frames in three forms, callers by index
  std::string target;   // "" = by ctx.kernel_build_id, else the default target
  FramesContext ctx;
  std::vector<FrameIn> frames;
};
struct SymbolizeFrames {
  static constexpr const char* kMethod = "SymbolizeFrames";
  static constexpr const char* kCli = "frames";
  static constexpr const char* kStreamMethod = "SymbolizeFramesStream";
  static constexpr bool kHeavy = true;  // DWARF for frames not in the address map
  static constexpr VerbAccess kAccess = VerbAccess::kAbsoluteInput;
  static constexpr std::string_view kAsked = "symbolizing frames against the live host";
  static constexpr size_t kFramesPerPart = 2048, kMaxParts = 4;
  using Request = FramesRequest;
  using Answer = FramesResult;
  static size_t Weight(const Request& r) { return r.frames.size(); }
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  static VerbRoute RouteOf(const Request& r) {
    return {FramesTarget(r.target, r.ctx), r.ctx.modules, r.ctx.kernel_build_id};
  }
  // The parts of a request a client sends at once (one: the request as it is), each stack whole
  // in one part, callers renumbered in it; InvalidArgument past the request limit.
  static absl::StatusOr<std::vector<Request>> ConcurrentParts(const Request& r);
  // Part `part` (as asked: `asked`) joined to `whole`: DataLoss when it answers another number of
  // frames, Aborted (kPartsSawTwoGenerations) when it is from another generation of the target.
  static absl::Status Join(Answer& whole, Answer&& part, const Request& asked, bool first);
};
inline constexpr std::string_view kPartsSawTwoGenerations = "the target changed between the parts of one request";

// `symdex resolve SPEC`: the copies a spec names (query/spec.h), each with its canonical spec —
// the one spec that names it alone. On the wire an answer names exactly one copy; none or several
// travel as NOT_FOUND / ABORTED with the candidates in the status details (symdex.v1.Ambiguity):
// the verb's Resolved(answer) says where that list is in its answer.
struct CanonicalMatch {
  Match match;
  std::string canonical;
  SYMDEX_FIELDS(CanonicalMatch, match, canonical)
};
struct ResolveRequest {
  std::string target;  // "" = the default target
  std::string spec;
  SYMDEX_FIELDS(ResolveRequest, target, spec)
};
// No match (not found), one, or several (ambiguous). A malformed spec is InvalidArgument instead.
struct ResolveResult {
  TargetInfo target;
  std::vector<CanonicalMatch> matches;
  // `matches` is the wire's one `match`.
  static constexpr auto Fields() {
    return std::make_tuple(Field<ResolveResult, TargetInfo>{"target", &ResolveResult::target},
                           Field<ResolveResult, std::vector<CanonicalMatch>>{"match", &ResolveResult::matches, true});
  }
};
struct Resolve {
  static constexpr const char* kMethod = "Resolve";
  static constexpr const char* kCli = "resolve";
  static constexpr bool kHeavy = false;  // the name's rows and canonical specs, cached per generation
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = ResolveRequest;
  using Answer = ResolveResult;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  static ResolveResult& Resolved(Answer& a) { return a; }
  // A canonical spec of last resort names the copy by its address (NAME@0xADDR).
  static void HideAddresses(Answer& a) {
    for (CanonicalMatch& m : a.matches) {
      if (m.canonical.find("@0x") != std::string::npos) m.canonical.clear();
    }
  }
};

// `symdex kprobe SPEC [ARGS...]`: the spec resolved, then (exactly one copy) its kprobe_events
// line, the arguments by name compiled from that copy's DWARF; FailedPrecondition when no kprobe
// form names the copy. With a line, a definition per place the line has in the copy.
struct ProbeRequest {
  std::string target;  // "" = the default target
  std::string spec;
  KprobeOptions opts;  // "" group = symdex
  static constexpr auto Fields() {
    return std::make_tuple(Field<ProbeRequest, std::string>{"target", &ProbeRequest::target},
                           Field<ProbeRequest, std::string>{"spec", &ProbeRequest::spec},
                           Field<ProbeRequest, KprobeOptions>{"", &ProbeRequest::opts});
  }
};
// One place of a line in a copy's body, with its own definition.
struct ProbePlace {
  uint64_t offset = 0;  // from the copy's symbol
  std::string event;    // its event name (NAME_L<N>, then _1, _2 ...)
  std::string kprobe;
  std::vector<std::string> notes;
  SYMDEX_FIELDS(ProbePlace, offset, event, kprobe, notes)
};
struct ProbeResult {
  ResolveResult resolved;  // exactly one match when `kprobe` is set
  std::string kprobe;      // the kprobe_events line, its arguments by name compiled to fetch args
  std::string ftrace_filter;
  std::vector<std::string> notes;  // what the line does not show (a value cut to 64 bits)
  // With a line (KprobeOptions::line, rel_line): each place the line has in the copy, in address
  // order (a line the compiler split has several), each with its own notes; `kprobe` is the
  // first's, `notes` what was left out of the line.
  std::vector<ProbePlace> places;
  std::string line_file;  // the file of that line (source-tree relative)
  int line = 0;           // the line, absolute
  // `resolved`'s fields are the message's own.
  static constexpr auto Fields() {
    return std::make_tuple(Field<ProbeResult, ResolveResult>{"", &ProbeResult::resolved},
                           Field<ProbeResult, std::string>{"kprobe", &ProbeResult::kprobe},
                           Field<ProbeResult, std::string>{"ftrace_filter", &ProbeResult::ftrace_filter},
                           Field<ProbeResult, std::vector<std::string>>{"notes", &ProbeResult::notes},
                           Field<ProbeResult, std::vector<ProbePlace>>{"places", &ProbeResult::places},
                           Field<ProbeResult, std::string>{"line_file", &ProbeResult::line_file},
                           Field<ProbeResult, int>{"line", &ProbeResult::line});
  }
};
struct Probe {
  static constexpr const char* kMethod = "ProbeDefinition";
  static constexpr const char* kCli = "kprobe";
  static constexpr bool kHeavy = false;  // heavy work (arguments by name) is one unit of DWARF
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = ProbeRequest;
  using Answer = ProbeResult;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  static ResolveResult& Resolved(Answer& a) { return a.resolved; }
  // A module copy whose name repeats inside its module has only its absolute address: refused.
  static absl::Status HideAddresses(Answer& a);
};

// `symdex inlined NAME`: every place NAME's body was copied by the compiler into another function —
// the copies a kprobe on NAME never sees. From the address maps of vmlinux and of each module with
// debug info (the inline nesting of every address, debuginfo/symbolize/addr_map.h): each copy with
// the function instance it is in, where in it, the call site (file:line:column) and what it was
// inlined into directly. A module's copy is placed by its section's runtime address where the
// target has one (a live host's loaded module), else by the module's symbol at its section offset.
struct InlinedRequest {
  std::string target;  // "" = the default target
  std::string name;    // the inlined function's DWARF name
  SYMDEX_FIELDS(InlinedRequest, target, name)
};
struct InlinedSite {
  std::optional<Instance> caller;  // the text symbol holding the copy (none: outside every symbol)
  uint64_t offset = 0;             // the copy's first address, as an offset into caller
  std::string file;                // the call site: source-tree relative
  int32_t line = 0, column = 0;
  std::string inlined_into;  // the function it was inlined into directly (caller's, or a copy's in it)
  uint32_t depth = 1;        // 1: into the caller's own body; 2: into a copy inlined there; ...
  SYMDEX_FIELDS(InlinedSite, caller, offset, file, line, column, inlined_into, depth)
};
struct InlinedAnswer {
  TargetInfo target;
  std::string name;
  std::vector<InlinedSite> sites;  // by caller's address (module, section offset), then offset
  std::vector<std::string> notes;  // what was not looked at, and why
  SYMDEX_FIELDS(InlinedAnswer, target, name, sites, notes)
};
struct Inlined {
  static constexpr const char* kMethod = "Inlined";
  static constexpr const char* kCli = "inlined";
  static constexpr bool kHeavy = true;  // a walk of every address map: vmlinux's and the modules'
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = InlinedRequest;
  using Answer = InlinedAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// `symdex lines PATH:LINE`: every statement start of a source line (perf probe's SRC:ALN) — in
// vmlinux, and in modules whose section bases the target knows — with the symbol holding each and
// its inline chain.
struct LinesRequest {
  std::string target;  // "" = the default target
  std::string file;    // a suffix on whole path components
  int32_t line = 0;
  SYMDEX_FIELDS(LinesRequest, target, file, line)
};
struct LineAddress {
  uint64_t address = 0;            // 0 for a caller not shown the kernel's addresses
  std::optional<Instance> symbol;  // the text symbol holding it (none: outside every symbol)
  uint64_t offset = 0;             // address - the symbol's start
  std::vector<Frame> frames;       // leaf first
  std::string note;                // why frames are missing or partial
  SYMDEX_FIELDS(LineAddress, address, symbol, offset, frames, note)
};
struct LinesAnswer {
  TargetInfo target;
  std::vector<LineAddress> addresses;  // by address
  SYMDEX_FIELDS(LinesAnswer, target, addresses)
};
struct Lines {
  static constexpr const char* kMethod = "Lines";
  static constexpr const char* kCli = "lines";
  static constexpr bool kHeavy = true;  // reads the line tables of vmlinux and of modules
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = LinesRequest;
  using Answer = LinesAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  // Hidden beyond the Instances: each address (its symbol and offset still place it).
  static void HideAddresses(Answer& a) {
    for (LineAddress& x : a.addresses) x.address = 0;
  }
};

// `symdex vars SPEC`: perf probe -V for exactly the copy SPEC names — every parameter and local
// in scope at SPEC's address (its +OFFSET, else the entry), its C type, its fetch arg there or
// why there is none, and the offsets where it has a location (compiled as `symdex kprobe`'s
// arguments by name are: debuginfo/dwarf/fetch_args.h).
struct VarsRequest {
  std::string target;  // "" = the default target
  std::string spec;    // exactly one copy (query/spec.h)
  SYMDEX_FIELDS(VarsRequest, target, spec)
};
struct ScopeVar {
  std::string name, type;
  bool parameter = false;
  bool available = false;        // fetchable at the address
  std::string fetch;             // its fetch arg there ("" when not)
  std::string why;               // why not
  std::vector<uint64_t> ranges;  // pairs: [lo, hi) offsets from the symbol where it has a location
  SYMDEX_FIELDS(ScopeVar, name, type, parameter, available, fetch, why, ranges)
};
struct VarsAnswer {
  TargetInfo target;
  std::optional<Instance> instance;  // the copy
  uint64_t offset = 0;               // the address, as an offset into it
  std::string canonical;             // its canonical spec
  std::vector<ScopeVar> variables;   // in DWARF order: parameters first
  SYMDEX_FIELDS(VarsAnswer, target, instance, offset, canonical, variables)
};
struct Vars {
  static constexpr const char* kMethod = "Vars";
  static constexpr const char* kCli = "vars";
  static constexpr bool kHeavy = true;  // reads a unit of DWARF
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = VarsRequest;
  using Answer = VarsAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// `symdex kprobe --inlined NAME[@FILE] [ARGS...]`: a probe definition at each place NAME's body
// was inlined (the places `symdex inlined` lists), its arguments by name compiled from that
// copy's own DWARF — the parameters as they are there, not at NAME's entry. @FILE keeps the
// copies of the function declared in that file (a name several files define). A place whose
// holder the kernel would refuse, or where an argument cannot be fetched, is left out and said.
struct InlinedProbesRequest {
  std::string target;  // "" = the default target
  std::string spec;    // NAME or NAME@FILE (the file the inlined function is declared in)
  std::string group;   // "" = symdex
  std::string event;   // "" = NAME; the places are EVENT, EVENT_1, EVENT_2 ...
  std::vector<std::string> fetchargs;
  SYMDEX_FIELDS(InlinedProbesRequest, target, spec, group, event, fetchargs)
};
struct InlinedProbe {
  std::optional<Instance> caller;  // the text symbol holding the copy
  uint64_t offset = 0;             // the copy's first address, as an offset into caller
  std::string file;                // the call site: source-tree relative
  int32_t line = 0, column = 0;
  std::string decl_file;  // where the inlined function is declared
  std::string event;
  std::string kprobe;  // the kprobe_events line
  std::vector<std::string> notes;
  SYMDEX_FIELDS(InlinedProbe, caller, offset, file, line, column, decl_file, event, kprobe, notes)
};
struct InlinedProbesAnswer {
  TargetInfo target;
  std::string name;
  std::vector<InlinedProbe> probes;   // in `symdex inlined`'s order
  std::vector<std::string> left_out;  // each place left out, and why
  std::vector<std::string> notes;     // what was not looked at
  SYMDEX_FIELDS(InlinedProbesAnswer, target, name, probes, left_out, notes)
};
struct InlinedProbes {
  static constexpr const char* kMethod = "InlinedProbes";
  static constexpr const char* kCli = "kprobe --inlined";
  static constexpr bool kHeavy = true;  // a walk of every address map, a unit of DWARF per place
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = InlinedProbesRequest;
  using Answer = InlinedProbesAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  // A definition whose only form is an absolute address is not shown to a caller denied them.
  static void HideAddresses(Answer& a) {
    std::erase_if(a.probes, [&](const InlinedProbe& p) {
      if (p.kprobe.find(" 0x") == std::string::npos) return false;
      a.left_out.push_back(p.event + ": its only kprobe form is an absolute address, shown to privileged callers only");
      return true;
    });
  }
};

// `symdex callers SPEC`: who calls exactly the copy SPEC names — every direct call and jump (a
// tail call) in its file's code that lands on its first byte, decoded from each function's start
// (query/call_evidence.h), each with the function it is in, the call's file:line and inline chain
// from the debug info, and a kprobe target at the call. Calls through pointers, static calls and
// code patched at boot are not in the code as linked: they are not found.
struct CallersRequest {
  std::string target;  // "" = the default target
  std::string spec;    // exactly one copy (query/spec.h), without +OFFSET
  SYMDEX_FIELDS(CallersRequest, target, spec)
};
struct CallerSite {
  LineAddress where;       // the call instruction: its address, the caller, offset, frames (leaf first)
  bool tail_call = false;  // a jump, not a call: the copy returns to the caller's caller
  std::string probe;       // kprobe_events' target for the call (_text+N, MOD:NAME+N, 0xADDR); "" when none
  // `where`'s fields are the message's own.
  static constexpr auto Fields() {
    return std::make_tuple(Field<CallerSite, LineAddress>{"", &CallerSite::where},
                           Field<CallerSite, bool>{"tail_call", &CallerSite::tail_call},
                           Field<CallerSite, std::string>{"probe", &CallerSite::probe});
  }
};
struct CallersAnswer {
  TargetInfo target;
  std::optional<Instance> instance;  // the copy
  std::string canonical;             // its canonical spec
  std::vector<CallerSite> sites;     // vmlinux's by address, then a module's by section and offset
  std::vector<std::string> notes;    // where callers may be that were not looked at
  SYMDEX_FIELDS(CallersAnswer, target, instance, canonical, sites, notes)
};
struct Callers {
  static constexpr const char* kMethod = "Callers";
  static constexpr const char* kCli = "callers";
  static constexpr bool kHeavy = true;  // decodes the code of vmlinux or of the copy's module
  static constexpr VerbAccess kAccess = VerbAccess::kHideAddresses;
  using Request = CallersRequest;
  using Answer = CallersAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  // Hidden beyond the Instances: each call's address, a probe target that is one, and a canonical
  // spec of last resort (NAME@0xADDR).
  static void HideAddresses(Answer& a) {
    for (CallerSite& s : a.sites) {
      s.where.address = 0;
      if (s.probe.starts_with("0x")) s.probe.clear();
    }
    if (a.canonical.find("@0x") != std::string::npos) a.canonical.clear();
  }
};

// `symdex buildid HEX`: what has build-ID HEX — kernels, modules and debug files, and the jitted
// loads (other users' processes: for privileged callers only). InvalidArgument when HEX is not a
// build-ID; nothing found is an empty answer (NOT_FOUND on the wire).
inline constexpr size_t kMaxBuildIdHexLength = 128;  // 64 bytes: longer than any build-ID note holds
struct BuildIdRequest {
  std::string build_id;  // hex
  // false: the jitted loads are not looked at — set by the caller view for a caller they are
  // hidden from (ForUnprivileged), not on the wire.
  bool jitted = true;
  SYMDEX_FIELDS(BuildIdRequest, build_id)
};
struct LookupBuildId {
  static constexpr const char* kMethod = "LookupBuildId";
  static constexpr const char* kCli = "buildid";
  static constexpr bool kHeavy = false;  // a few indexed lookups
  static constexpr VerbAccess kAccess = VerbAccess::kAnyone;
  using Request = BuildIdRequest;
  using Answer = BuildIdAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
  static void ForUnprivileged(Request& r) { r.jitted = false; }
  static void HidePrivileged(Answer& a) { a.jitted.clear(); }
  static std::string NotFoundMessage(const Answer& a) {
    return a.empty() ? "nothing indexed has build-ID " + a.build_id : std::string();
  }
  static Answer Empty(const Request& r) { return Answer{.build_id = r.build_id}; }
};

// The JIT verbs (symdex.v1.JitService): JIT-ed code from jitdumps and perf maps (jit_query.h
// says how each is answered). Their records are other users' processes — addresses and paths —
// so they are for privileged callers only (kWhyPrivileged says so in the refusal). A request
// carrying a list (kParts) is sent in parts of kMaxAddressesPerRequest by QueryApi::Ask, each
// part's answer merged into the whole (Merge); Check refuses a longer list.
inline constexpr std::string_view kJitRecordsArePrivate = "JIT records hold other users' process addresses and paths";

// `symdex jit addr PID ADDR...`: the jitted load (where it was at the time asked) holding each
// address of process PID, else the perf map's symbol.
struct JitAddr {
  static constexpr const char* kService = "JitService";
  static constexpr const char* kMethod = "Addr";
  static constexpr const char* kCli = "jit addr";
  static constexpr const char* kLabel = "JitAddr";
  static constexpr bool kHeavy = true;  // reads the loads and placements of a process
  static constexpr VerbAccess kAccess = VerbAccess::kPrivileged;
  static constexpr std::string_view kWhyPrivileged = kJitRecordsArePrivate;
  using Request = JitAddrRequest;
  using Answer = JitAddrAnswer;
  static constexpr auto kParts = &JitAddrRequest::addresses;
  static void Merge(Answer& a, Answer&& part) {
    a.instance = std::move(part.instance);
    for (JitAddrResult& r : part.results) a.results.push_back(std::move(r));
  }
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// `symdex jit collisions`: loads of different code that share a build-ID, per scheme, and each
// scheme's counts.
struct JitCollisionsRequest {
  std::string scheme;  // a canonical scheme name (JitSchemeArg); "" = every scheme
  SYMDEX_FIELDS(JitCollisionsRequest, scheme)
};
struct JitCollisions {
  static constexpr const char* kService = "JitService";
  static constexpr const char* kMethod = "Collisions";
  static constexpr const char* kCli = "jit collisions";
  static constexpr const char* kLabel = "JitCollisions";
  static constexpr bool kHeavy = true;  // groups every load's IDs
  static constexpr VerbAccess kAccess = VerbAccess::kPrivileged;
  static constexpr std::string_view kWhyPrivileged = kJitRecordsArePrivate;
  using Request = JitCollisionsRequest;
  using Answer = JitCollisionsAnswer;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// `symdex jit dsos`: which ingested load each jitted DSO (as the caller read it from disk) is,
// in order.
struct MatchDsosRequest {
  std::vector<JittedDsoKey> dsos;
  SYMDEX_FIELDS(MatchDsosRequest, dsos)
};
struct MatchDsosAnswer {
  std::vector<DsoMatch> matches;  // in request order
  SYMDEX_FIELDS(MatchDsosAnswer, matches)
};
struct MatchJittedDsos {
  static constexpr const char* kService = "JitService";
  static constexpr const char* kMethod = "MatchDsos";
  static constexpr const char* kCli = "jit dsos";
  static constexpr const char* kLabel = "JitMatchDsos";
  static constexpr bool kHeavy = true;  // a few lookups per DSO
  static constexpr VerbAccess kAccess = VerbAccess::kPrivileged;
  static constexpr std::string_view kWhyPrivileged = kJitRecordsArePrivate;
  using Request = MatchDsosRequest;
  using Answer = MatchDsosAnswer;
  static constexpr auto kParts = &MatchDsosRequest::dsos;
  static void Merge(Answer& a, Answer&& part) {
    for (DsoMatch& m : part.matches) a.matches.push_back(std::move(m));
  }
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Local(LocalQuery& q, const Request& r);
};

// A composed verb answers from other verbs: Composed(api, request), over whichever QueryApi is
// asked — LocalQuery; the caller view (so each verb it asks applies its own access); and the
// daemon's client (RemoteQuery), which composes over its own calls, so that an input bigger than
// one message still goes (the RPC is for front ends that send the whole input at once). On the
// daemon, RouteOf(request) is the kernel a call goes to (a build-ID as "build-id:HEX") and the
// modules it names, checked (Check) before anything is fetched for them; Weight(request) is how
// many addresses the call counts as while its answer is unread.
// `symdex decode`: the kernel frames of a log, each pinned to its copy (decode.h).
struct DecodeLog {
  static constexpr const char* kMethod = "Decode";
  static constexpr const char* kCli = "decode";
  static constexpr bool kHeavy = true;                        // a log's frames
  static constexpr VerbAccess kAccess = VerbAccess::kAnyone;  // the frames it asks are the view's
  using Request = DecodeRequest;
  using Answer = DecodeResult;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Composed(QueryApi& api, const Request& r);
  static VerbRoute RouteOf(const Request& r);
  // As the frames a log of this size could hold (a frame line is 20 bytes or more).
  static size_t Weight(const Request& r) { return std::min(kMaxAddressesPerRequest, r.text.size() / 20 + 1); }
};

// `symdex pprof`: a pprof profile's kernel locations given functions and lines (pprof.h).
struct SymbolizeProfile {
  static constexpr const char* kMethod = "SymbolizePprof";
  static constexpr const char* kCli = "pprof";
  static constexpr bool kHeavy = true;                        // a profile's kernel locations
  static constexpr VerbAccess kAccess = VerbAccess::kAnyone;  // the frames it asks are the view's
  using Request = PprofRequest;
  using Answer = PprofResult;
  static absl::Status Check(const Request& r);
  static absl::StatusOr<Answer> Composed(QueryApi& api, const Request& r);
  static VerbRoute RouteOf(const Request& r) { return RouteByBuildId(r.target, r.kernel_build_id); }
  // As the locations a profile of this size could hold (a location is 6 bytes or more).
  static size_t Weight(const Request& r) { return std::min(kMaxAddressesPerRequest, r.profile.size() / 6 + 1); }
};

// The service of a verb's RPC (kService; SymbolService unless it says) and the label of its
// metrics and log lines (kLabel; the RPC's name unless it says).
template <class V>
constexpr const char* ServiceOf() {
  if constexpr (requires { V::kService; }) {
    return V::kService;
  } else {
    return "SymbolService";
  }
}
template <class V>
constexpr const char* LabelOf() {
  if constexpr (requires { V::kLabel; }) {
    return V::kLabel;
  } else {
    return V::kMethod;
  }
}
// How texts name a verb's RPC: "Which" (SymbolService's), "JitService.Addr" (another service's).
template <class V>
std::string VerbName() {
  const std::string_view service = ServiceOf<V>();
  return service == "SymbolService" ? std::string(V::kMethod) : std::string(service) + "." + V::kMethod;
}

// Every verb declared above. (The verbs declared before this table — Symbolize, Dups, Symbols,
// Frames, Index — are still QueryApi's virtual methods.)
template <class... V>
struct VerbList {
  using Requests = std::variant<typename V::Request...>;
  using Answers = std::variant<typename V::Answer...>;
  static constexpr size_t kCount = sizeof...(V);
  // The position of W in the list.
  template <class W>
  static constexpr size_t IndexOf() {
    size_t i = 0, found = kCount;
    ((std::is_same_v<W, V> ? (found = i, ++i) : ++i), ...);
    return found;
  }
  // f(std::type_identity<V>{}) for the verb at `index`.
  template <class F>
  static auto Visit(size_t index, F&& f) {
    return VisitFrom<0, V...>(index, f);
  }
  // f(std::type_identity<V>{}) for every verb.
  template <class F>
  static void ForEach(F&& f) {
    (f(std::type_identity<V>{}), ...);
  }

 private:
  template <size_t I, class W, class... Rest, class F>
  static auto VisitFrom(size_t index, F& f) {
    if constexpr (sizeof...(Rest) == 0) {
      return f(std::type_identity<W>{});
    } else {
      if (index == I) return f(std::type_identity<W>{});
      return VisitFrom<I + 1, Rest...>(index, f);
    }
  }
};
using Verbs = VerbList<Targets, Which, Resolve, SymbolizeAddresses, SymbolizeFrames, ListDuplicates, ListSymbols,
                       IndexStatus, Probe, Inlined, Lines, Vars, InlinedProbes, Callers, LookupBuildId, JitAddr,
                       MatchJittedDsos, JitCollisions, DecodeLog, SymbolizeProfile>;
using AnyRequest = Verbs::Requests;
using AnyAnswer = Verbs::Answers;

}  // namespace symdex::query
