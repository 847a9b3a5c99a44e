// The verbs of the query API declared once each: the question (Request), the answer (Answer),
// the RPC that carries them (kMethod in symdex.v1.SymbolService, the proto messages' fields named
// as the structs' fields), whether it runs on the daemon's pool (kHeavy), what a caller must be
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
// verb whose answer holds addresses outside its Instances zeroes them in HideAddresses(Answer&).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "server/common/status.h"
#include "server/query/answers.h"
#include "server/query/fields.h"

namespace symdex::query {

class LocalQuery;

enum class VerbAccess {
  kAnyone,         // nothing in the answer reveals the kernel's layout
  kHideAddresses,  // for a live target an unprivileged caller gets `target` without the kernel's
                   // base, and every Instance as _text+N / SECTION+0xOFF (CallerView::Hide)
  kPrivileged,     // refused to unprivileged callers
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

// Every verb declared above. (Verbs declared before this table are QueryApi's virtual methods;
// they move here as they are touched.)
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
using Verbs = VerbList<Inlined, Lines, Vars, InlinedProbes>;
using AnyRequest = Verbs::Requests;
using AnyAnswer = Verbs::Answers;

}  // namespace symdex::query
