// One function instance as each tracer names it. The kprobe_events line (KprobeDefinition) is
// what the kernel's tracefs takes; perf, bpftrace, libbpf and cilium/ebpf each have their own
// syntax, and each reaches exactly one copy of a duplicated name only in some of its forms:
//
//   kprobe_events  p:GRP/EVENT _text+N | MOD:NAME | 0xADDR [FETCHARGS]     (KASLR-proof for vmlinux)
//   perf           perf probe [-m MOD] -a 'GRP:EVENT=NAME[@DECL_FILE][+off][%return] [ARGS]' when
//                  NAME (in MOD) or NAME@DECL_FILE (a path suffix of DW_AT_decl_file) is one
//                  copy; else the live address 0xADDR (perf's absolute-address probe)
//   bpftrace       kprobe:NAME | kprobe:MOD:NAME when unique there; else kprobe:0xADDR on a
//                  live target (bpftrace's address kprobes, run with --unsafe)
//   libbpf         by address: func_name NULL, bpf_kprobe_opts.offset = the address
//                  (cilium/ebpf: link.Kprobe("", prog, &link.KprobeOptions{Address: ...}))
//   cilium         link.Kprobe("NAME", prog, nil) for a unique name; a vmlinux copy as its anchor plus
//                  offset, link.Kprobe("_text", prog, &link.KprobeOptions{Offset: N}) (0.9.1,
//                  Debian 12's, has no address option: a module's shared name has no form)
//   kprobe_multi   libbpf bpf_program__attach_kprobe_multi_opts: a unique name as its pattern, else the
//                  live address in .addrs; none on a kernel without CONFIG_FPROBE
//   fentry         fentry/NAME (fexit/NAME): libbpf's section, bpftrace kfunc:NAME, cilium/ebpf
//                  AttachTo NAME, when the kernel resolves NAME to this copy (fentry_verdict.h)
//
// An absolute address holds for one boot of one host: it is given only for a live target, never
// for an offline kernel (whose addresses are the link-time ones, before KASLR).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"
#include "server/query/answers.h"

namespace symdex::query {

// The kprobe_events line of `m` (resolver.h KprobeDefinition), with no name in it that holds a
// control byte: a kernel keeps such a name (a module's "foo\x01"), but a line written to tracefs
// carries none, so that copy is named by its address form instead (_text+N for vmlinux, the
// address of a loaded module's copy), its event name kept. Where there is none (an offline
// module), the line still names it: the caller refuses a line with a control byte (HasControlByte).
absl::StatusOr<std::string> KprobeLine(const Match& m, const KprobeOptions& opts);

// Whether any of `fetchargs` names a variable (perf probe's syntax, ingest/probe_arg.h) rather
// than being kprobe_events' own; InvalidArgument for one that is neither.
absl::StatusOr<bool> ProbeArgsAreNamed(const std::vector<std::string>& fetchargs);

enum class TracerSyntax { kKprobeEvents, kPerf, kBpftrace, kLibbpf, kFentry, kCilium, kKprobeMulti };

// The fetch args FormFor takes for `syntax`: perf the ones the user wrote (it compiles names
// itself), the others those of `kprobe`, the kprobe_events definition symdex compiled them into.
std::vector<std::string> TracerFetchArgs(TracerSyntax syntax, const std::vector<std::string>& written,
                                         std::string_view kprobe);

// "kprobe_events" | "perf" | "bpftrace" | "libbpf" | "cilium" | "kprobe_multi" | "fentry", or
// InvalidArgument naming the choices.
absl::StatusOr<TracerSyntax> TracerSyntaxArg(std::string_view s);
std::string_view TracerSyntaxName(TracerSyntax s);

struct ProbeForm {
  std::string text;                 // the line to paste: a command (perf), a probe (bpftrace), C (libbpf)
  std::string fetch;                // libbpf with arguments: the C struct of fetches (tracer_fetches.h)
  std::string note;                 // what the user must know to use it ("needs --unsafe"), or ""
  std::optional<uint64_t> address;  // when the form is an absolute address
};

// The form of `m` (its instance and offset, on target `t`) in `syntax`, for the probe `opts`
// describes (group and event name the perf event, a return probe, fetch args); kprobe_events is
// KprobeDefinition's line. perf takes the fetch args as the user wrote them (it compiles names
// itself); bpftrace and libbpf take them as kprobe_events fetch args (the compiled ones) and
// read them in their program: bpftrace's text is then the whole program, libbpf's `fetch` the C
// struct of fetches (query/tracer_fetches.h). `same_decl_file` counts the instances of the name
// whose DWARF declaration file is the instance's own (itself included; 0 = unknown).
// FailedPrecondition when the tracer has no form for exactly this copy or for one of the
// arguments; InvalidArgument for a malformed fetch arg.
absl::StatusOr<ProbeForm> FormFor(TracerSyntax syntax, const Match& m, const TargetInfo& t, const KprobeOptions& opts,
                                  size_t same_decl_file);

}  // namespace symdex::query
