// Which symbols kas_alias gives an alias (the rejected kernel patch "scripts/link-vmlinux.sh:
// Add alias to duplicate symbols for kallsyms", Alessandro Carminati, v2..v7, 2023): the rule
// `symdex kallsyms --aliases` follows, so its alias lines are the ones that kernel would list.
//
// kas_alias counts every name `nm` prints for vmlinux and every module (text, data, bss,
// rodata, absolute: any defined symbol), then aliases a symbol when
//   - its name occurs more than once in that count (a text symbol sharing its name with only a
//     data symbol, e.g. `watchdog` t + `watchdog` b, gets one),
//   - it is text (nm type t/T; weak W and everything else never),
//   - its name is not on the filter list (IsAliasNoise: __func__.N, __pfx_, ...),
//   - in a module, it is not in an .init*/.exit* section (freed after load, or never loaded).
// vmlinux's init text is aliased like the rest. Its alias also needs a source line (addr2line
// answering ?:?? gives none), which the caller checks.
#pragma once

#include <vector>

#include "server/query/symbol_query.h"

namespace symdex::query {

// For every instance of `all` (one target, every symbol type), whether kas_alias aliases it.
// Pseudo-modules ([bpf], [__builtin__kprobes], ...) exist only in a running kernel, which
// kas_alias never saw: they are neither counted nor aliased.
std::vector<bool> KasAliasCandidates(const std::vector<Instance>& all);

}  // namespace symdex::query
