// The verdict on probing one symbol, from the bits the indexer stored (kernel/probe_bits.h) and
// the target's kernel config: what kprobe events (kprobe_events, perf probe, bpftrace kprobe:,
// BPF kprobe links: all go through trace_kprobe) and ftrace (available_filter_functions,
// set_ftrace_filter) will do with it, and why. Offline: the kernel's own tables, no live
// tracefs needed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/common/status.h"
#include "server/query/answers.h"
#include "server/store/index_store.h"

namespace symdex::query {

ProbeVerdict ProbeVerdictOf(const TargetInfo& t, const store::SymbolRecord& r);

}  // namespace symdex::query
