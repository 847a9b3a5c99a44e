#include "server/common/kernel_arch.h"

#include <elf.h>

namespace symdex {
namespace {

// arch/x86/kernel/kprobes/core.c arch_populate_kprobe_blacklist.
constexpr BoundedText kX86Blacklist[] = {{"__entry_text_start", "__entry_text_end", ".entry.text"}};

// arch/arm64/kernel/probes/kprobes.c arch_populate_kprobe_blacklist (6.1). The hypervisor's
// identity-mapped text is blacklisted when the kernel does not run in hyp mode (VHE), as a
// guest or a host booted at EL1 does; a VHE host would accept probes there that this refuses.
constexpr BoundedText kArm64Blacklist[] = {
    {"__entry_text_start", "__entry_text_end", ".entry.text"},
    {"__irqentry_text_start", "__irqentry_text_end", ".irqentry.text"},
    {"__idmap_text_start", "__idmap_text_end", ".idmap.text"},
    {"__hyp_text_start", "__hyp_text_end", ".hyp.text"},
    {"__hyp_idmap_text_start", "__hyp_idmap_text_end", ".hyp.idmap.text"},
};

constexpr KernelArch kArchs[] = {
    {
        .machine = EM_X86_64,
        .name = "x86_64",
        .debian = "amd64",
        .module_ftrace_section = "__mcount_loc",
        .ftrace_entry_max_offset = 4,  // FTRACE_MCOUNT_MAX_OFFSET with IBT (endbr64)
        .kprobe_entry_pad = 4,         // ENDBR64
        .blacklist_areas = kX86Blacklist,
    },
    {
        .machine = EM_AARCH64,
        .name = "aarch64",
        .debian = "arm64",
        // arch/arm64/Makefile: CC_FLAGS_FTRACE := -fpatchable-function-entry=2; the compiler
        // records each function's NOPs in __patchable_function_entries, which vmlinux.lds.h puts
        // between __start_mcount_loc and __stop_mcount_loc and a module keeps under this name.
        .module_ftrace_section = "__patchable_function_entries",
        .ftrace_entry_max_offset = 0,
        .ftrace_names_far_sites = true,
        .entry_pad_words = 2,
        .nop_word = 0xd503201f,
        .blacklist_areas = kArm64Blacklist,
        .call_size = 4,
    },
};

}  // namespace

const KernelArch* ArchOfMachine(uint16_t machine) {
  for (const KernelArch& a : kArchs) {
    if (a.machine == machine) return &a;
  }
  return nullptr;
}

std::span<const KernelArch> KnownArchs() { return kArchs; }

}  // namespace symdex
