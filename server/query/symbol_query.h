// kallsyms-level answers: which instances carry a name, which names are duplicated. Shared by
// the CLI (embedded) and, later, the daemon: no formatting here, only results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/query/answers.h"
#include "server/query/probe_verdict.h"
#include "server/store/index_store.h"

namespace symdex::query {

// Picks the target a query runs against: `requested` when given; otherwise "host" if indexed,
// else the only target. FailedPrecondition when there is none; InvalidArgument for an unknown name, or
// listing the choices when several exist and none was named.
absl::StatusOr<TargetInfo> SelectTarget(store::Db& db, const std::string& requested);
// The same rule over a list of targets (a cached one).
absl::StatusOr<TargetInfo> SelectTargetFrom(const std::vector<TargetInfo>& all, const std::string& requested);

// One symbol row as an Instance, without the per-name counts and probe hint (which need every
// symbol of that name).
Instance InstanceOf(const TargetInfo& t, const store::SymbolRecord& r);

// Every instance named `name` (and with `with_clones`, its compiler clones
// name.isra.0/.constprop.0/.part.0/.cold/...).
absl::StatusOr<std::vector<Instance>> InstancesNamed(store::Db& db, const TargetInfo& t, const std::string& name,
                                                     bool with_clones);

// Every symbol of the target as an Instance (text only unless all_types), without the per-name
// counts and probe hints (cheap enough for a whole kernel).
absl::StatusOr<std::vector<Instance>> AllInstances(store::Db& db, const TargetInfo& t, bool all_types);

// The names kas_alias gives no alias: compiler/macro-generated statics (__func__.N, CSWTCH.N,
// __key.N, ...), __pfx_/__cfi_ padding and __UNIQUE_ID_ symbols.
bool IsAliasNoise(std::string_view name);

// Names carried by more than one symbol, counted over vmlinux + all modules as kas_alias did:
// text symbols only (unless all_types), alias noise and pseudo-modules ([bpf],
// [__builtin__ftrace]) skipped, and module .init/.exit symbols skipped (kas_alias gave them no
// alias: they are freed after load) unless with_init. Sorted by name.
absl::StatusOr<std::vector<DupGroup>> Dups(store::Db& db, const TargetInfo& t, const DupsOptions& opts);

}  // namespace symdex::query
