// The fentry verdict of every copy of one name: where a BPF trampoline attached by that name
// (fentry/fexit/fmod_ret: libbpf SEC("fentry/NAME"), bpftrace kfunc:NAME, cilium/ebpf
// AttachTracing) lands, as the kernel resolves it. The indexed facts per copy: whether its
// owner's BTF has a function of that name (kernel/probe_bits.h kProbeBtfFunc) and whether it has
// an fentry call at its entry.
//  - The BTF: libbpf and bpftrace look the name up in vmlinux's BTF first, then in the
//    modules' (libbpf: in load order); a name in no BTF is refused before the kernel is asked.
//    pahole encodes one function per name and prototype, so a static function repeated in many
//    files is one name to BTF, whichever copy it was taken from.
//  - The address (kernel/bpf/verifier.c bpf_check_attach_target): vmlinux's BTF, and before 6.4
//    any BTF, resolves by kallsyms_lookup_name: vmlinux's symbols first, the lowest address
//    among a name's copies (kallsyms' name table sorts equal names by address), then the modules
//    newest first; from 6.4 a module's BTF resolves in that module's own symbols.
//  - The trampoline is patched into that address's fentry call: a copy without one fails the
//    attach, and so does every copy on a kernel without CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS
//    (arm64 before 6.4), where a function ftrace patches takes no trampoline. A copy the name does
//    not reach can only be traced by address (a kprobe).
#pragma once

#include <vector>

#include "server/common/kernel_records.h"
#include "server/query/answers.h"

namespace symdex::query {

// Sets `fentry` of each of `copies`: every symbol (any type) the target has with one name.
void FillFentryVerdicts(const TargetInfo& t, std::vector<Instance*>& copies);

}  // namespace symdex::query
