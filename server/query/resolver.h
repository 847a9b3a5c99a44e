// Spec resolution (spec.h grammar) to function instances, canonical specs, and the
// kprobe_events / ftrace text for an instance. Shared by the CLI and the daemon.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/debuginfo/symbolize/symbolizer.h"
#include "server/query/answers.h"
#include "server/query/spec.h"
#include "server/query/symbol_query.h"
#include "server/store/debuginfo_store.h"

namespace symdex::query {

// Where Resolve gets instances from: the database (DbSource), or a cache in front of it (the
// daemon's). Implementations answer exactly as Which() / store::SymbolContaining() do.
class InstanceSource {
 public:
  virtual ~InstanceSource() = default;
  // Shared and immutable: a cache hands out its list without copying it.
  using List = std::shared_ptr<const std::vector<Instance>>;
  virtual absl::StatusOr<List> Which(const std::string& name, bool with_clones) = 0;
  // The symbol holding addr, or why none does (store/symbol_extent.h: both lookups apply that rule).
  virtual absl::StatusOr<store::Containment> Containing(uint64_t addr) = 0;
  // The same row in brief (store::TextSymbolTable): name, type, module, address, size; its
  // `dwarf` carries has_function only. A batch answers this from one table in memory.
  virtual absl::StatusOr<store::Containment> ContainingBrief(uint64_t addr) { return Containing(addr); }
};

class DbSource : public InstanceSource {
 public:
  DbSource(store::Db& db, const TargetInfo& t) : db_(db), t_(t) {}
  absl::StatusOr<List> Which(const std::string& name, bool with_clones) override;
  absl::StatusOr<store::Containment> Containing(uint64_t addr) override;

 private:
  store::Db& db_;
  const TargetInfo& t_;
};

// `candidates`, when given, receives every text instance the spec's name reaches (for canonical specs).
// `group`, when given, receives the name whose text instances `candidates` holds (the spec's
// name, or for an address the name of the symbol there): what a canonical-spec cache keys on.
absl::StatusOr<std::vector<Match>> MatchSpec(InstanceSource& src, const TargetInfo& t, const Spec& spec,
                                             std::vector<Instance>* candidates = nullptr, std::string* group = nullptr);
absl::StatusOr<std::vector<Match>> MatchSpec(store::Db& db, const TargetInfo& t, const Spec& spec,
                                             std::vector<Instance>* candidates = nullptr);

// Does `spec`'s name-independent part (module, WHERE, CU) select `in`?
bool SpecMatches(const Spec& spec, const Instance& in);

// The shortest spec that resolves to exactly `in` among `same_name` (all text instances that a
// spec naming in.name can reach, `in` included). Never fails: the last resort names the
// instance's own address (NAME@0xADDR or MOD:NAME@SECTION+0xOFF).
std::string CanonicalSpec(const Instance& in, const std::vector<Instance>& same_name);

// CanonicalSpec against every text instance of the target that carries in.name.
absl::StatusOr<std::string> CanonicalSpecFor(store::Db& db, const TargetInfo& t, const Instance& in);

// Canonical specs for every text instance of the target, keyed like AllInstances' order.
absl::StatusOr<std::vector<std::pair<Instance, std::string>>> AllCanonicalSpecs(store::Db& db, const TargetInfo& t);

// The offset into `in` whose line-table row describes an address `offset` into it: past the
// patchable-entry NOPs of a traceable arm64 function (the line table gives them the function
// before's last row; ftrace prints its traced function at +0x4), else `offset` itself.
uint64_t CodeOffset(const TargetInfo& t, const Instance& in, uint64_t offset);

// The section of a loaded module holding `addr`: the one whose base is the highest at or below it
// (`sections` as store::ModuleSections gives them); nullptr when none is.
const std::pair<std::string, uint64_t>* SectionHolding(const std::vector<std::pair<std::string, uint64_t>>& sections,
                                                       uint64_t addr);

absl::StatusOr<AddressInfo> SymbolizeAddress(store::Db& db, const TargetInfo& t, debuginfo::Symbolizer& sym,
                                             uint64_t addr);
// The same with instances from `src` and the debug file looked up through `debug_file_of`
// (module name -> file; the daemon caches it).
// nullptr: the module (or vmlinux, "") has no debug file.
using DebugFileLookup =
    std::function<absl::StatusOr<std::shared_ptr<const store::DebugFileInfo>>(const std::string& module)>;
// A loaded module's section bases (store::ModuleSections).
using SectionLookup =
    std::function<absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>>(const std::string& module)>;
absl::StatusOr<AddressInfo> SymbolizeAddress(InstanceSource& src, const DebugFileLookup& debug_file_of,
                                             const SectionLookup& sections_of, const TargetInfo& t,
                                             debuginfo::Symbolizer& sym, uint64_t addr);

// The function whose padding `in` is ("" = none): objtool's __pfx_NAME (CONFIG_FUNCTION_PADDING,
// x86-64 since 6.2) and kCFI's __cfi_NAME are the bytes before NAME's entry — NOPs, a call thunk
// or a type hash the kernel patches — code of no source line.
std::string_view PaddedFunction(const Instance& in);
// What an address in that padding answers instead of a source line.
std::string PaddingNote(std::string_view padded);

// The kprobe_events line the kernel accepts for exactly this instance (+offset):
//   vmlinux: _text+<decimal>   (what `perf probe -D` prints on a live kernel; KASLR-proof)
//   module:  MOD:NAME[+off] when NAME is unique inside MOD, else the absolute address
//   unique anywhere: NAME[+off]
// FailedPrecondition when no form exists (an offline module symbol whose name repeats inside
// its module has no address until the module is loaded).
absl::StatusOr<std::string> KprobeDefinition(const Match& m, const KprobeOptions& opts);

// The default event name: "name_show_card_c_186" (sanitised, <= 63 characters).
std::string DefaultEventName(const Instance& in);

// The event the probe `opts` describes on `in` gets: its own, else DefaultEventName.
std::string ProbeEventName(const Instance& in, const KprobeOptions& opts);

// InvalidArgument when `opts` asks for a return probe at an offset into the function.
absl::Status CheckReturnProbe(const Match& m, const KprobeOptions& opts);

}  // namespace symdex::query
