// The verdict on probing one symbol, from the bits the indexer stored (target/probe_bits.h) and
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
#include "server/store/index_store.h"

namespace symdex::query {

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
  uint32_t bits = 0;    // target::ProbeBits as indexed
  bool known() const { return kind != Probeability::kUnknown; }
  // No function of its compilation unit has an fentry call (the whole file is built without).
  bool unit_without_fentry() const;
  // How many more lines ftrace lists under its name after its own (target/probe_bits.h).
  unsigned far_ftrace_sites() const;
};

ProbeVerdict ProbeVerdictOf(const store::TargetInfo& t, const store::SymbolRecord& r);

}  // namespace symdex::query
