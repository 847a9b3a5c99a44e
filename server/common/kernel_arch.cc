#include "server/common/kernel_arch.h"

#include <elf.h>

namespace symdex {
namespace {

// arch/x86/kernel/kprobes/core.c arch_populate_kprobe_blacklist.
constexpr BoundedText kX86Blacklist[] = {{"__entry_text_start", "__entry_text_end", ".entry.text"}};

// arch/x86/include/asm/ftrace.h: ftrace_call_adjust returns the address it is given, and
// FTRACE_MCOUNT_MAX_OFFSET is ENDBR_INSN_SIZE (4 with CONFIG_X86_KERNEL_IBT, else 0). With IBT
// every function that may be called indirectly starts with ENDBR64 and its fentry call follows
// it; the others keep the call at the symbol, so an IBT kernel has sites of both kinds.
constexpr EntryLayout kX86Layouts[] = {
    {
        .name = "x86-64 endbr64; call __fentry__ (IBT)",
        .config = "CONFIG_X86_KERNEL_IBT",
        .pad_before_record = 4,
        .ftrace_entry_max_offset = 4,
        .kprobe_entry_pad = 4,
    },
    {
        .name = "x86-64 call __fentry__",
    },
};

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

// arch/arm64/Makefile and arch/arm64/kernel/ftrace.c ftrace_call_adjust. The compiler records
// each function's first patchable NOP in __patchable_function_entries, which vmlinux.lds.h puts
// between __start_mcount_loc and __stop_mcount_loc and a module keeps under that name. ftrace
// patches the second NOP at the symbol into `bl ftrace_caller` and lists that address; arm64
// defines no FTRACE_MCOUNT_MAX_OFFSET, so a site further in is listed under the symbol before it.
constexpr EntryLayout kArm64Layouts[] = {
    {
        // CC_FLAGS_FTRACE := -fpatchable-function-entry=4,2 (and -falign-functions=8): the two
        // NOPs before the symbol hold the ftrace_ops pointer. ftrace_call_adjust skips them,
        // then a BTI if one is at the symbol, then the first NOP.
        .name = "arm64 -fpatchable-function-entry=4,2 (CALL_OPS)",
        .config = "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS",
        .pre_words = 2,
        .site_after_record = 12,
        .skip_landing_pad_at = 8,
        .ftrace_entry_max_offset = 8,
        .ftrace_names_far_sites = true,
    },
    {
        // CC_FLAGS_FTRACE := -fpatchable-function-entry=2: the record is the first NOP (after a
        // BTI where the compiler puts the BTI first); ftrace_call_adjust adds 4.
        .name = "arm64 -fpatchable-function-entry=2",
        .site_after_record = 4,
        .ftrace_entry_max_offset = 8,
        .ftrace_names_far_sites = true,
    },
};

// kprobe_events' register names (arch/*/kernel/ptrace.c regoffset_table) by DWARF register
// number (the psABI's numbering: x86-64 0-7 are rax rdx rcx rbx rsi rdi rbp rsp; AArch64 0-30
// are x0-x30, 31 sp).
constexpr std::string_view kX86Registers[] = {"ax", "dx", "cx",  "bx",  "si",  "di",  "bp",  "sp",
                                              "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"};
constexpr std::string_view kArm64Registers[] = {
    "x0",  "x1",  "x2",  "x3",  "x4",  "x5",  "x6",  "x7",  "x8",  "x9",  "x10", "x11", "x12", "x13", "x14", "x15",
    "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp"};

constexpr std::string_view kX86OtherRegisters[] = {"ip", "flags", "cs", "ss", "orig_ax"};
constexpr std::string_view kX86ArgumentRegisters[] = {"di", "si", "dx", "cx", "r8", "r9"};
constexpr std::string_view kArm64OtherRegisters[] = {"pc", "pstate"};
constexpr std::string_view kArm64ArgumentRegisters[] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};

constexpr KernelArch kArchs[] = {
    {
        .machine = EM_X86_64,
        .name = "x86_64",
        .debian = "amd64",
        .module_ftrace_section = "__mcount_loc",
        .layouts = kX86Layouts,
        .landing_pad_mask = 0xffffffff,
        .landing_pad_word = 0xfa1e0ff3,  // endbr64: f3 0f 1e fa
        .blacklist_areas = kX86Blacklist,
        .dwarf_registers = kX86Registers,
        .stack_pointer = 7,
        .other_registers = kX86OtherRegisters,
        .argument_registers = kX86ArgumentRegisters,
        .return_register = "ax",
        .c_registers = "ctx->",
    },
    {
        .machine = EM_AARCH64,
        .name = "aarch64",
        .debian = "arm64",
        .module_ftrace_section = "__patchable_function_entries",
        .layouts = kArm64Layouts,
        .entry_pad_words = 2,
        .nop_word = 0xd503201f,
        .landing_pad_mask = 0xffffff3f,
        .landing_pad_word = 0xd503241f,  // bti, bti c, bti j, bti jc
        .blacklist_areas = kArm64Blacklist,
        .call_size = 4,
        .insn_align = 4,
        .dwarf_registers = kArm64Registers,
        .stack_pointer = 31,
        .other_registers = kArm64OtherRegisters,
        .argument_registers = kArm64ArgumentRegisters,
        .return_register = "x0",
        .numbered_register_prefix = "x",
        .bpftrace_numbered_prefix = "r",
        .c_registers = "((const struct user_pt_regs *)ctx)->",
        .c_numbered_array = "regs",
    },
};

}  // namespace

const EntryLayout* KernelArch::Layout(std::string_view wanted) const {
  for (const EntryLayout& l : layouts) {
    if (l.name == wanted) return &l;
  }
  return nullptr;
}

bool KernelArch::HasRegister(std::string_view name) const {
  for (auto set : {dwarf_registers, other_registers}) {
    for (std::string_view r : set) {
      if (r == name) return true;
    }
  }
  return false;
}

namespace {
// The number of a numbered register ("x19" -> "19"), or "" when `name` is not one.
std::string_view RegisterNumber(const KernelArch& a, std::string_view name) {
  if (a.numbered_register_prefix.empty() || !name.starts_with(a.numbered_register_prefix)) return "";
  std::string_view n = name.substr(a.numbered_register_prefix.size());
  if (n.empty()) return "";
  for (char c : n) {
    if (c < '0' || c > '9') return "";
  }
  return n;
}
}  // namespace

std::string KernelArch::BpftraceRegister(std::string_view name) const {
  std::string_view n = RegisterNumber(*this, name);
  return n.empty() ? std::string(name) : std::string(bpftrace_numbered_prefix) + std::string(n);
}

std::string KernelArch::CRegister(std::string_view name) const {
  std::string_view n = RegisterNumber(*this, name);
  if (n.empty()) return std::string(c_registers) + std::string(name);
  return std::string(c_registers) + std::string(c_numbered_array) + "[" + std::string(n) + "]";
}

const KernelArch* ArchOfMachine(uint16_t machine) {
  for (const KernelArch& a : kArchs) {
    if (a.machine == machine) return &a;
  }
  return nullptr;
}

std::span<const KernelArch> KnownArchs() { return kArchs; }

}  // namespace symdex
