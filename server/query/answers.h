// The values the query API's questions and answers are made of: a symbol instance with its
// DWARF row and probe verdict, a spec's match, an address's symbol and inline chain, frames from
// another host, a decoded log, a symbolized profile. Plain structs over std and absl only, so
// every front end (the CLI, the gRPC handlers and client, scripts' bindings) names them without
// reaching the store, libdw or gRPC; the functions declared here run over any QueryApi.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/common/kernel_records.h"
#include "server/common/status.h"
#include "server/query/fields.h"

namespace symdex::query {

class QueryApi;

enum class Probeability {
  kUnknown,      // no tables to judge by (no debug or module file, or indexed before verdicts)
  kTraceable,    // kprobe events accept it (ftrace may or may not list it: see `ftrace`)
  kNoFentry,     // no fentry call: kprobe events refuse it unless CONFIG_KPROBE_EVENTS_ON_NOTRACE
  kInit,         // init text, freed after boot or after its module's load
  kBlacklisted,  // on the kprobe blacklist
  kNotCode,      // a data symbol
};
std::string_view ProbeabilityName(Probeability p);  // unknown, traceable, no-fentry, init, ...
absl::StatusOr<Probeability> ParseProbeability(std::string_view name);

struct ProbeVerdict {
  Probeability kind = Probeability::kUnknown;
  bool kprobe = false;  // `p:SYM` (or _text+N, MOD:SYM, 0xADDR) is accepted
  bool ftrace = false;  // available_filter_functions lists it
  std::string reason;   // why not, or how (empty for an ordinary traceable function)
  uint32_t bits = 0;    // kernel::ProbeBits as indexed
  bool known() const { return kind != Probeability::kUnknown; }
  // No function of its compilation unit has an fentry call (the whole file is built without).
  bool unit_without_fentry() const;
  // How many more lines ftrace lists under its name after its own (kernel/probe_bits.h).
  unsigned far_ftrace_sites() const;
};

// What a BPF trampoline attached by the function's name (libbpf SEC("fentry/NAME"), fexit,
// bpftrace kfunc:NAME, cilium/ebpf AttachTracing) does about this copy: the kernel resolves the
// name to one address (query/fentry_verdict.h).
enum class FentryReach {
  kUnknown,      // a BTF this index did not read (no debug or module file, or indexed before)
  kReaches,      // the name attaches here
  kElsewhere,    // the name attaches at another copy; this one only by address (kprobe)
  kAttachFails,  // the name resolves to a copy without an fentry call: the attach fails
  kNoBtf,        // not a function of any BTF: libbpf and bpftrace refuse the name
  kLoadOrder,    // which copy depends on the order the modules were loaded in
};
std::string_view FentryReachName(FentryReach r);  // unknown, reaches, elsewhere, attach-fails, ...
std::optional<FentryReach> ParseFentryReach(std::string_view name);

struct FentryVerdict {
  FentryReach kind = FentryReach::kUnknown;
  std::string reason;  // which copy the name reaches instead, and how to reach this one
};

struct Instance {
  std::string name;
  std::string module;  // "" = vmlinux
  char type = '?';
  std::optional<uint64_t> addr;  // absolute address, when the target has one (not offline modules)
  std::string section;           // offline modules: addr is unknown, this + section_offset is
  uint64_t section_offset = 0;
  std::optional<uint64_t> size;
  bool size_exact = false;
  std::optional<uint64_t> text_offset;  // vmlinux: addr - text_anchor (what `_text+N` probes use)
  std::string text_anchor = "_text";    // the target's (TargetInfo::text_anchor)
  int64_t same_name_total = 0;          // symbols of any type with this name in the target
  int64_t same_name_in_module = 0;      // ... inside this instance's module (or vmlinux)
  // The kprobe_events target the kernel accepts for exactly this instance, from kallsyms alone:
  // NAME when unique, MOD:NAME when unique in MOD, _text+N (_stext+N) for vmlinux, 0xADDR for a loaded
  // module; "" when none exists (offline module symbol whose name repeats inside the module).
  std::string probe;
  // Offline module symbol in .init.* / .exit.*: freed after load (init) or never loaded
  // without CONFIG_MODULE_UNLOAD; kas_alias counted these but gave them no alias.
  bool init_or_exit = false;
  // From DWARF (debug info indexed for this vmlinux/module), else dwarf_note says why not.
  std::optional<DwarfInfo> dwarf;
  std::string dwarf_note;
  // What the kernel will do with a probe on it (probe_verdict.h).
  ProbeVerdict verdict;
  // What fentry/fexit by its name reaches (fentry_verdict.h); set where every copy of the name
  // is at hand (InstancesNamed).
  FentryVerdict fentry;
};

// Whether `a` and `b` are at the same place: the same owner, absolute address, and section and
// offset (an offline module's). Two names there are aliases of one code.
inline bool SamePlace(const Instance& a, const Instance& b) {
  return a.module == b.module && a.addr == b.addr && a.section == b.section && a.section_offset == b.section_offset;
}

// A requested target "build-id:HEX" names the target whose vmlinux build-ID is HEX (the CLI's
// --build-id), whatever its name.
inline constexpr std::string_view kBuildIdTargetPrefix = "build-id:";

struct DupsOptions {
  std::string module;      // only names with an instance in this module ("vmlinux" allowed)
  bool all_types = false;  // default: text symbols (t/T) only, as kas_alias
  bool with_init = false;  // also count module .init/.exit symbols (plain `nm` counting)
  // List only the instances kprobe events accept (ProbeVerdict::kprobe), and only names with
  // one; the counts stay over every copy (the kernel's name lookup sees them all).
  bool traceable = false;
  SYMDEX_FIELDS(DupsOptions, module, all_types, with_init, traceable)
};

struct DupGroup {
  std::string name;
  std::vector<Instance> instances;
  SYMDEX_FIELDS(DupGroup, name, instances)
};

// Every text-symbol instance the spec matches (NAME exactly; its compiler clones only when no
// symbol carries NAME itself). For an ADDRESS spec: the function containing the address.
// Each result's `spec_offset` is the spec's +OFFSET (or the address's distance from the start).
struct Match {
  Instance instance;
  uint64_t offset = 0;
  SYMDEX_FIELDS(Match, instance, offset)
};

// Address -> symbol+offset and the inline chain (leaf first) from the debug file.
// A frame's fields, as symdex.v1.Frame names them (query/fields.h).
template <>
struct FieldsOf<Frame> {
  static constexpr auto Fields() {
    return std::make_tuple(Field<Frame, std::string>{"function", &Frame::function},
                           Field<Frame, std::string>{"file", &Frame::file}, Field<Frame, int>{"line", &Frame::line},
                           Field<Frame, int>{"column", &Frame::column});
  }
};

struct AddressInfo {
  std::optional<Instance> symbol;  // the text symbol holding the address (store/symbol_extent.h)
  uint64_t offset = 0;
  std::vector<Frame> frames;  // leaf first
  std::string note;  // why there is no symbol ("not in vmlinux or any module"), or why frames are missing or partial
};

struct KprobeOptions {
  std::string group = "symdex";
  std::string event;  // default: derived from the name and, for duplicates, its file:line
  bool ret = false;   // r: instead of p:
  std::vector<std::string> fetchargs;
  // A line of the copy's body instead of its entry: absolute (in the copy's declaration file)
  // or relative to its declaration line (perf's FUNC:RLN); at most one, and not with +OFFSET.
  std::optional<int> line, rel_line;
  // As symdex.v1.ProbeDefinitionRequest names them (`ret` is return_probe).
  static constexpr auto Fields() {
    return std::make_tuple(Field<KprobeOptions, std::string>{"group", &KprobeOptions::group},
                           Field<KprobeOptions, std::string>{"event", &KprobeOptions::event},
                           Field<KprobeOptions, bool>{"return_probe", &KprobeOptions::ret},
                           Field<KprobeOptions, std::vector<std::string>>{"fetchargs", &KprobeOptions::fetchargs},
                           Field<KprobeOptions, std::optional<int>>{"line", &KprobeOptions::line},
                           Field<KprobeOptions, std::optional<int>>{"rel_line", &KprobeOptions::rel_line});
  }
};

inline constexpr size_t kMaxFrameModules = 8192;      // a host's loaded modules (~100-300 usually)
inline constexpr size_t kMaxSectionsPerModule = 256;  // /sys/module/M/sections (~40 usually)
inline constexpr size_t kMaxFrameTextLength = 4096;   // a printed frame (ingest/frame_text.h)

// The GNU build-ID (hex) in a blob of ELF notes as a machine shows them (/sys/kernel/notes,
// /sys/module/M/notes/.note.gnu.build-id): InvalidArgument for a malformed blob or one without
// that note. What a front end reads from a machine's captured notes to name its kernel.
absl::StatusOr<std::string> NotesBuildId(std::string_view notes);

// Frames that come from elsewhere: a fleet host's stack frames, symbolized against a
// target indexed here — typically the host's kernel, known by build-ID. The host says where its
// kernel and modules were loaded; each frame is an address, a module-relative offset, or a line as
// a kernel log or perf printed it (ingest/frame_text.h).
//
// Which inputs are exact (FrameAnswer::exact):
//   address, with the host's _text or KASLR offset        exact (vmlinux: address - slide)
//   address in a module, with its section bases           exact (the section holding it + offset)
//   address in a module, with only its .text base         exact inside .text; other sections
//                                                          (.text.unlikely, .init.text) are not placed
//   module + section + offset                             exact
//   symbol+off/size [module]                              exact when that name (of that size) is
//                                                          unique in its module/vmlinux; else chosen
//                                                          (not exact, `note` says how) by the offset
//                                                          fitting, and for frames of one stack
//                                                          (FrameIn::return_address, caller) by the
//                                                          code: a call before the return address,
//                                                          the caller's call landing on the callee;
//                                                          else the candidates, and no answer
//   address with neither _text nor KASLR offset           taken as the target's own address: exact
//                                                          only for a live target, or a host booted
//                                                          without KASLR (said in `note`)
// A module whose build-ID the host gives and the target's differs is never answered from: wrong
// answers are worse than none.

// A module as the host loaded it.
struct FrameModule {
  std::string name;
  std::string build_id;  // hex; "" = not known (the target's module of that name is trusted)
  // Runtime section bases (/sys/module/M/sections/*); often just ".text".
  std::vector<std::pair<std::string, uint64_t>> sections;
  std::optional<uint64_t> size;  // /proc/modules' size: bounds the module's core
};

struct FramesContext {
  std::string kernel_build_id;          // hex; when given, must be the target's vmlinux build-ID
  std::optional<uint64_t> text;         // the host's _text (runtime; _stext for a target anchored there)
  std::optional<int64_t> kaslr_offset;  // runtime _text - link-time _text
  std::vector<FrameModule> modules;
};

// One frame: exactly one of the three forms.
struct FrameIn {
  std::optional<uint64_t> address;  // a runtime address on the host
  // A module-relative offset: `offset` bytes into `section` (default ".text") of `module`.
  std::string module, section;
  std::optional<uint64_t> offset;
  std::string text;  // a printed frame (ingest/frame_text.h)
  // What the frame's stack says about it (`symdex decode` fills these from a log), used to pick
  // among the copies a symbol+offset frame may be (query/call_evidence.h):
  bool return_address = false;     // its address follows a call (a saved return address)
  std::optional<uint32_t> caller;  // index in the request of the frame that called this one
};

// Where a batch of frames may be cut into requests with each stack whole (its frames narrow each
// other): every c in (0, frames.size()) such that no frame before c has its caller at or past c.
// Ascending.
std::vector<size_t> StackCuts(const std::vector<FrameIn>& frames);

// The empty answer every FrameAnswer starts with.
const std::shared_ptr<const AddressInfo>& NoAddressInfo();

enum class FrameBasis { kNone, kAddress, kModuleOffset, kSymbolOffset };
std::string_view FrameBasisName(FrameBasis b);  // "", address, module-offset, symbol+offset

struct FrameAnswer {
  FrameBasis basis = FrameBasis::kNone;  // what the answer was computed from
  bool exact = false;                    // which inputs are exact: "Frames that come from elsewhere" above
  // Symbol (+offset), inline chain (leaf first). Shared and immutable: a cached answer is handed
  // out without copying it. Never null.
  std::shared_ptr<const AddressInfo> info = NoAddressInfo();
  std::string canonical;  // the symbol's canonical spec (resolves to exactly it)
  // Where the frame is in the target's terms: vmlinux's link-time address, or SECTION+offset
  // of a module. What a kprobe or a later query can use on any host running this kernel.
  std::optional<uint64_t> target_address;
  std::string module, section;
  uint64_t section_offset = 0;
  std::vector<std::string> candidates;  // symbol+offset matching several instances: their canonical specs
  std::string error;                    // the frame could not be read (a malformed line); nothing else is set
  std::string note;                     // why it is not exact, or not answered
};

struct FramesResult {
  TargetInfo target;
  std::vector<FrameAnswer> frames;  // parallel to the request's
};

// The target a frames request is answered from: `target` when given, else the one whose vmlinux
// build-ID is ctx.kernel_build_id ("build-id:HEX"), else the default target ("").
std::string FramesTarget(const std::string& target, const FramesContext& ctx);

// InvalidArgument for a request no frame of which can be answered (a bad build-ID, too many
// modules/sections, both _text and a KASLR offset); per-frame problems are per-frame answers.
absl::Status CheckFramesRequest(const FramesContext& ctx, size_t frames);

}  // namespace symdex::query
