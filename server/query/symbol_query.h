// kallsyms-level answers: which instances carry a name, which names are duplicated. Shared by
// the CLI (embedded) and, later, the daemon: no formatting here, only results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/query/probe_verdict.h"
#include "server/store/index_store.h"

namespace symdex::query {

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
  std::string text_anchor = "_text";    // the target's (store::TargetInfo::text_anchor)
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
  std::optional<store::DwarfInfo> dwarf;
  std::string dwarf_note;
  // What the kernel will do with a probe on it (probe_verdict.h).
  ProbeVerdict verdict;
};

// A requested target "build-id:HEX" names the target whose vmlinux build-ID is HEX (the CLI's
// --build-id), whatever its name.
inline constexpr std::string_view kBuildIdTargetPrefix = "build-id:";

// Picks the target a query runs against: `requested` when given; otherwise "host" if indexed,
// else the only target. FailedPrecondition when there is none; InvalidArgument for an unknown name, or
// listing the choices when several exist and none was named.
absl::StatusOr<store::TargetInfo> SelectTarget(store::Db& db, const std::string& requested);
// The same rule over a list of targets (a cached one).
absl::StatusOr<store::TargetInfo> SelectTargetFrom(const std::vector<store::TargetInfo>& all,
                                                   const std::string& requested);

// One symbol row as an Instance, without the per-name counts and probe hint (which need every
// symbol of that name).
Instance InstanceOf(const store::TargetInfo& t, const store::SymbolRecord& r);

// Every instance named `name` (and with `with_clones`, its compiler clones
// name.isra.0/.constprop.0/.part.0/.cold/...).
absl::StatusOr<std::vector<Instance>> Which(store::Db& db, const store::TargetInfo& t, const std::string& name,
                                            bool with_clones);

// Every symbol of the target as an Instance (text only unless all_types), without the per-name
// counts and probe hints (cheap enough for a whole kernel).
absl::StatusOr<std::vector<Instance>> AllInstances(store::Db& db, const store::TargetInfo& t, bool all_types);

// The names kas_alias gives no alias: compiler/macro-generated statics (__func__.N, CSWTCH.N,
// __key.N, ...), __pfx_/__cfi_ padding and __UNIQUE_ID_ symbols.
bool IsAliasNoise(std::string_view name);

struct DupsOptions {
  std::string module;      // only names with an instance in this module ("vmlinux" allowed)
  bool all_types = false;  // default: text symbols (t/T) only, as kas_alias
  bool with_init = false;  // also count module .init/.exit symbols (plain `nm` counting)
  // List only the instances kprobe events accept (ProbeVerdict::kprobe), and only names with
  // one; the counts stay over every copy (the kernel's name lookup sees them all).
  bool traceable = false;
};

struct DupGroup {
  std::string name;
  std::vector<Instance> instances;
};

// Names carried by more than one symbol, counted over vmlinux + all modules as kas_alias did:
// text symbols only (unless all_types), alias noise and pseudo-modules ([bpf],
// [__builtin__ftrace]) skipped, and module .init/.exit symbols skipped (kas_alias gave them no
// alias: they are freed after load) unless with_init. Sorted by name.
absl::StatusOr<std::vector<DupGroup>> Dups(store::Db& db, const store::TargetInfo& t, const DupsOptions& opts);

}  // namespace symdex::query
