// What the kernel's tables say about probing one code symbol, stored per symbol (symbols.probe)
// at index time and turned into a verdict by the query layer (query::ProbeVerdictOf). Bits, not
// an enum: a symbol can be blacklisted and traceable by ftrace at once, and the kernel's
// CONFIG_KPROBE_EVENTS_ON_NOTRACE decides at query time what "no fentry site" means.
#pragma once

#include <cstdint>

namespace symdex::kernel {

enum ProbeBits : uint32_t {
  // Its owner's fentry sites are known (vmlinux __mcount_loc, or the module's); without this
  // bit the fentry bits say nothing.
  kProbeJudged = 1u << 0,
  // An fentry site at its entry: ftrace lists it in available_filter_functions.
  kProbeFentryEntry = 1u << 1,
  // An fentry site anywhere in it (kallsyms extent): kprobe events' notrace check passes.
  kProbeFentryInside = 1u << 2,
  // NAME.suffix (a .constprop/.isra/.cold clone) whose base NAME, as the kernel looks it up,
  // passes the notrace check: the kernel accepts the clone too (trace_kprobe.c within_notrace_func).
  kProbeBaseTraceable = 1u << 3,
  // Init text: freed after boot (vmlinux) or after the module's load.
  kProbeInit = 1u << 4,
  // On the kprobe blacklist (NOKPROBE_SYMBOL, .kprobes.text, .noinstr.text, .entry.text), or a
  // clone whose base name is.
  kProbeBlacklisted = 1u << 5,
  // No symbol of its compilation unit has an fentry site: the file is built without them
  // (kernel/trace/, CFLAGS_REMOVE_x.o = $(CC_FLAGS_FTRACE), ...).
  kProbeUnitWithoutFentry = 1u << 6,
  // In .noinstr.text (noinstr: no instrumentation at all).
  kProbeNoinstr = 1u << 7,
  // Its fentry call is 4 bytes in, after an ENDBR64 (x86-64 with IBT, Debian's 6.12): the kernel
  // moves a probe at its entry past the ENDBR64 (arch_adjust_kprobe_addr), to NAME+0x4.
  kProbeEntryEndbr = 1u << 8,
  // Its owner's BTF was read (vmlinux's .BTF; a module's, split over vmlinux's): without this
  // bit kProbeBtfFunc says nothing.
  kProbeBtfJudged = 1u << 9,
  // Its name is a function (BTF_KIND_FUNC) of its owner's BTF: fentry/fexit can name it.
  kProbeBtfFunc = 1u << 10,
};

// Bits 24-31: how many more lines ftrace lists under its name, after its own site's, for
// recorded sites in no function that kallsyms attributes to it (arm64: the bodies of overridden
// __weak functions after it; common/kernel_arch.h ftrace_names_far_sites). Saturates at 255.
constexpr uint32_t kProbeFarSitesShift = 24;
constexpr uint32_t kProbeFarSitesMask = 0xffu << kProbeFarSitesShift;
constexpr uint32_t FarFtraceSites(uint32_t bits) { return (bits & kProbeFarSitesMask) >> kProbeFarSitesShift; }

}  // namespace symdex::kernel
