// A probe's arguments, as kprobe_events fetches them, written for the tracers that read
// arguments in a program of their own: a bpftrace program that prints them as the trace line
// would, and a BPF C program's struct of fetches (libbpf, or cilium/ebpf through bpf2go) that
// reads the same registers and the same memory at the same offsets.
//
//   name=+0(+40(+24(%di))):string count=%dx:x64                          (x86-64)
//   bpftrace: printf("name=\"%s\" count=0x%lx\n",
//                    str(*(uint64*)(*(uint64*)(reg("di") + 24) + 40) + 0), (uint64)reg("dx"))
//   C:        struct vfs_read_args { char name[64]; __u64 count; };
//             v = ctx->di; bpf_probe_read_kernel(&v, 8, v + 24); ...; a->count = ctx->dx;
//
// A register is named as each tracer names it on the kernel's architecture (KernelArch); a
// static's '@SYMBOL' becomes bpftrace's kaddr() and a C program's __ksym. What a tracer cannot
// read the same way is refused (FailedPrecondition) by name, never approximated.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/common/kernel_arch.h"
#include "server/common/status.h"
#include "server/ingest/kprobe_fetch.h"

namespace symdex::query {

// Each of `fetchargs` parsed (ingest/kprobe_fetch.h), named argN by its place when unnamed.
absl::StatusOr<std::vector<ingest::KprobeFetch>> ParseFetchArgs(const std::vector<std::string>& fetchargs);

// `probe { printf("NAME=FMT ...\n", VALUE, ...); }`: the whole program, one line.
absl::StatusOr<std::string> BpftraceProgram(std::string_view probe, const std::vector<ingest::KprobeFetch>& args,
                                            const KernelArch& arch);

// C for a BPF kprobe program: `struct EVENT_args` with a field per argument and
// `EVENT_fetch(ctx, args)` that fills it, with the `__ksym` declarations the statics need. It
// compiles with `vmlinux.h` (struct pt_regs, struct user_pt_regs) and `bpf/bpf_helpers.h`.
absl::StatusOr<std::string> CFetchStruct(std::string_view event, std::string_view definition,
                                         const std::vector<ingest::KprobeFetch>& args, const KernelArch& arch);

}  // namespace symdex::query
