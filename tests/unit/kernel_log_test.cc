// Kernel logs, perf script and bpftrace output as the decoder reads them (ingest/kernel_log.h).
#include "server/ingest/kernel_log.h"
#include "server/ingest/call_insn.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace symdex::ingest {
namespace {

KernelLog Scan(std::string_view text) {
  auto log = ScanKernelLog(text);
  EXPECT_TRUE(log.ok()) << log.status().message();
  return log.ok() ? *log : KernelLog{};
}

// The shape of a 6.1 WARN: the WARN line and RIP: name the faulting instruction, the register
// dump sits between RIP: and the Call Trace, an interrupt breaks the chain of callers.
constexpr std::string_view kWarn = R"([   41.234567] ------------[ cut here ]------------
[   41.234570] WARNING: CPU: 0 PID: 97 at drivers/pnp/card.c:190 name_show+0x1c/0x30 [pnp]
[   41.234600] Modules linked in: uio pnp
[   41.234610] CPU: 0 PID: 97 Comm: cat Not tainted 6.1.0-57-cloud-amd64 #1  Debian 6.1.192-3
[   41.234620] RIP: 0010:name_show+0x1c/0x30 [pnp]
[   41.234621] Code: 48 89 e5 0f 0b <0f> 0b 5d c3
[   41.234622] RSP: 0018:ffffb1c0c0153d98 EFLAGS: 00010246
[   41.234623] RAX: 0000000000000000 RBX: ffff9e2a01b3c000 RCX: 0000000000000000
[   41.234630] Call Trace:
[   41.234631]  <TASK>
[   41.234632]  dev_attr_show+0x19/0x40
[   41.234633]  ? type_show+0x1c/0x30 [uio 0123456789abcdef0123456789abcdef01234567]
[   41.234634]  sysfs_kf_seq_show+0xa0/0x100
[   41.234635]  <IRQ>
[   41.234636]  irq_handler+0x10/0x20
[   41.234637]  </IRQ>
[   41.234638]  seq_read_iter+0x120/0x480
[   41.234639]  </TASK>
[   41.234640] ---[ end trace 0000000000000000 ]---
)";

TEST(KernelLogTest, WarnFramesRolesAndCallers) {
  KernelLog log = Scan(kWarn);
  EXPECT_EQ(log.release, "6.1.0-57-cloud-amd64");
  ASSERT_EQ(log.frames.size(), 7u);
  const LogFrame& warn = log.frames[0];
  EXPECT_EQ(warn.frame.symbol, "name_show");
  EXPECT_EQ(warn.frame.module, "pnp");
  EXPECT_TRUE(warn.regs);
  EXPECT_FALSE(warn.return_address);
  EXPECT_FALSE(warn.caller) << "the WARN line is followed by 'Modules linked in': its stack ends there";
  EXPECT_EQ(log.lines[warn.line].substr(warn.begin, warn.end - warn.begin), "name_show+0x1c/0x30 [pnp]");

  const LogFrame& rip = log.frames[1];
  EXPECT_TRUE(rip.regs);
  EXPECT_EQ(log.lines[rip.line].substr(rip.begin, rip.end - rip.begin), "name_show+0x1c/0x30 [pnp]");
  ASSERT_TRUE(rip.caller) << "register dumps and 'Call Trace:' stay inside the stack";
  EXPECT_EQ(*rip.caller, 2u);
  EXPECT_EQ(rip.trace, log.frames[2].trace);

  const LogFrame& dev = log.frames[2];
  EXPECT_TRUE(dev.return_address);
  ASSERT_TRUE(dev.caller) << "the '?' frame between is not in the chain";
  EXPECT_EQ(*dev.caller, 4u);
  const LogFrame& unreliable = log.frames[3];
  EXPECT_TRUE(unreliable.frame.unreliable);
  EXPECT_TRUE(unreliable.return_address);
  EXPECT_FALSE(unreliable.caller);
  EXPECT_EQ(unreliable.frame.module_build_id, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(log.lines[unreliable.line].substr(unreliable.begin, unreliable.end - unreliable.begin),
            "? type_show+0x1c/0x30 [uio 0123456789abcdef0123456789abcdef01234567]");

  EXPECT_FALSE(log.frames[4].caller) << "<IRQ> switches stacks: sysfs_kf_seq_show was not called by the IRQ frame";
  EXPECT_FALSE(log.frames[5].caller) << "</IRQ> too";
  EXPECT_FALSE(log.frames[6].caller);
  EXPECT_EQ(log.frames[6].frame.symbol, "seq_read_iter");
  EXPECT_EQ(log.frames[6].normalized, "seq_read_iter+0x120/0x480");
}

// The shape of an arm64 6.1 oops (arch/arm64/kernel/process.c __show_regs, stacktrace.c
// dump_backtrace): pc and lr in the register dump, and a "Call trace:" that starts with the pc.
constexpr std::string_view kArm64Oops = R"([   12.345000] Internal error: Oops: 0000000096000005 [#1] SMP
[   12.345001] Modules linked in: uio
[   12.345002] CPU: 0 PID: 97 Comm: cat Not tainted 6.1.0-57-cloud-arm64 #1  Debian 6.1.192-3
[   12.345003] Hardware name: linux,dummy-virt (DT)
[   12.345004] pstate: 60400005 (nZCv daif +PAN -UAO -TCO -DIT -SSBS BTYPE=--)
[   12.345005] pc : name_show+0x1c/0x3c [uio]
[   12.345006] lr : dev_attr_show+0x24/0x64
[   12.345007] sp : ffff80000a0dbc40
[   12.345008] x29: ffff80000a0dbc40 x28: ffff00000a3c8000 x27: 0000000000000000
[   12.345009] x2 : 0000000000000000 x1 : ffff80000895d2a8 x0 : 0000000000000000
[   12.345010] Call trace:
[   12.345011]  name_show+0x1c/0x3c [uio]
[   12.345012]  dev_attr_show+0x24/0x64
[   12.345013]  sysfs_kf_seq_show+0xa8/0x14c
[   12.345014] Code: f9400000 b40000a0 d503233f a9bf7bfd (f9400000)
[   12.345015] ---[ end trace 0000000000000000 ]---
)";

TEST(KernelLogTest, Arm64OopsPcLrAndCallTrace) {
  KernelLog log = Scan(kArm64Oops);
  EXPECT_EQ(log.release, "6.1.0-57-cloud-arm64");
  ASSERT_EQ(log.frames.size(), 5u);
  const LogFrame& pc = log.frames[0];
  EXPECT_EQ(pc.frame.symbol, "name_show");
  EXPECT_EQ(pc.frame.module, "uio");
  EXPECT_TRUE(pc.regs);
  EXPECT_FALSE(pc.return_address);
  const LogFrame& lr = log.frames[1];
  EXPECT_EQ(lr.frame.symbol, "dev_attr_show");
  EXPECT_FALSE(lr.regs);
  EXPECT_TRUE(lr.return_address) << "the link register follows a BL";
  EXPECT_FALSE(lr.caller) << "lr stands alone: it may be stale";
  EXPECT_FALSE(pc.caller) << "nor is it pc's caller";
  EXPECT_EQ(lr.trace, pc.trace) << "the register dump and 'Call trace:' stay inside the stack";
  const LogFrame& first = log.frames[2];
  EXPECT_EQ(first.frame.symbol, "name_show");
  EXPECT_FALSE(first.return_address) << "arm64's Call trace starts with the pc itself";
  ASSERT_TRUE(first.caller);
  EXPECT_EQ(*first.caller, 3u);
  EXPECT_TRUE(log.frames[3].return_address);
  ASSERT_TRUE(log.frames[3].caller);
  EXPECT_EQ(*log.frames[3].caller, 4u);
  EXPECT_TRUE(log.frames[4].return_address);
  // Without a pc before it (a dump_stack), the first frame is a return address as any other.
  KernelLog plain =
      Scan("[    1.0] Call trace:\n[    1.0]  dump_backtrace+0x0/0x1e0\n[    1.0]  show_stack+0x20/0x30\n");
  ASSERT_EQ(plain.frames.size(), 2u);
  EXPECT_TRUE(plain.frames[0].return_address);
}

// arm64 6.12's sysrq l on a CPU that an interrupt caught at the entry of __cond_resched (from the
// booted Debian kernel): the frame record el1h_64_irq builds holds the interrupted pc, printed
// as the next frame; read_zero, which called __cond_resched, had no frame record yet and is
// missing, so vfs_read follows.
constexpr std::string_view kArm64Interrupted = R"([   52.180688] Call trace:
[   52.181020]  el1_interrupt+0x34/0x58
[   52.181032]  el1h_64_irq_handler+0x18/0x28
[   52.181041]  el1h_64_irq+0x64/0x68
[   52.181051]  __cond_resched+0x0/0x70
[   52.181061]  vfs_read+0xcc/0x330
[   52.181075]  ksys_read+0x7c/0x120
[   51.781135]  el0t_64_sync+0x190/0x198
)";

TEST(KernelLogTest, Arm64FrameAfterAnExceptionVectorIsTheInterruptedPc) {
  KernelLog log = Scan(kArm64Interrupted);
  ASSERT_EQ(log.frames.size(), 7u);
  EXPECT_EQ(log.traces, 1u);
  const LogFrame& vector = log.frames[2];
  EXPECT_EQ(vector.frame.symbol, "el1h_64_irq");
  EXPECT_TRUE(vector.return_address);
  EXPECT_FALSE(vector.caller) << "no call led from the interrupted code to the vector";
  const LogFrame& pc = log.frames[3];
  EXPECT_EQ(pc.frame.symbol, "__cond_resched");
  EXPECT_FALSE(pc.return_address) << "the interrupted instruction itself, not one after a call";
  EXPECT_FALSE(pc.regs) << "printed as a stack frame, not a register dump";
  EXPECT_FALSE(pc.caller) << "the next frame may be its caller's caller";
  const LogFrame& after = log.frames[4];
  EXPECT_EQ(after.frame.symbol, "vfs_read");
  EXPECT_TRUE(after.return_address);
  ASSERT_TRUE(after.caller);
  EXPECT_EQ(*after.caller, 5u);
  EXPECT_TRUE(log.frames[1].caller) << "el1_interrupt's caller chain before the vector stays";
  EXPECT_TRUE(log.frames[6].return_address) << "a vector's frame that ends the stack is a return address";
  // The handlers the vectors call are functions like any other; so are names merely like them.
  for (std::string_view name : {"el1h_64_irq_handler", "el0t_64_sync_handler", "el1_interrupt", "el1h_64_irqx"}) {
    KernelLog other = Scan(fmt::format("Call trace:\n {}+0x18/0x28\n __cond_resched+0x0/0x70\n", name));
    ASSERT_EQ(other.frames.size(), 2u) << name;
    EXPECT_TRUE(other.frames[1].return_address) << name;
  }
  // Older kernels' vectors (el1_irq, el0_sync) do the same.
  KernelLog old = Scan("Call trace:\n el1_irq+0xc8/0x180\n arch_cpu_idle+0x18/0x28\n do_idle+0x1d8/0x2a0\n");
  ASSERT_EQ(old.frames.size(), 3u);
  EXPECT_FALSE(old.frames[1].return_address);
  EXPECT_TRUE(old.frames[2].return_address);
}

TEST(KernelLogTest, ProcStackHidesAddressesAndOldFormatKeepsThem) {
  KernelLog log = Scan(
      "[<0>] do_select+0x2e5/0x7e0\n"
      "[<0>] core_sys_select+0x1c8/0x3a0\n"
      "\n"
      " [<ffffffff8123abcd>] name_show+0x1c/0x40\n"
      " [<000000006a1b2c3d>] type_show+0x1c/0x40\n");
  ASSERT_EQ(log.frames.size(), 4u);
  EXPECT_FALSE(log.frames[0].frame.address) << "[<0>] is no address";
  EXPECT_TRUE(log.frames[0].return_address);
  EXPECT_EQ(log.frames[0].caller, 1u);
  EXPECT_EQ(log.traces, 2u) << "a blank line ends a stack";
  EXPECT_FALSE(log.frames[1].caller);
  ASSERT_TRUE(log.frames[2].frame.address);
  EXPECT_EQ(*log.frames[2].frame.address, 0xffffffff8123abcdull);
  EXPECT_EQ(log.frames[2].normalized, "[<ffffffff8123abcd>] name_show+0x1c/0x40");
  EXPECT_FALSE(log.frames[3].frame.address) << "a hashed pointer (%p) is no address";
}

TEST(KernelLogTest, PerfScriptKernelFramesOnly) {
  KernelLog log = Scan(
      "cat   97 [000]    41.234567: cpu-clock:\n"
      "\tffffffff8123abcd name_show+0x1c ([kernel.kallsyms])\n"
      "\tffffffffc0a01234 uio_read+0x40 ([uio])\n"
      "\tffffffff81300000 vfs_read ([kernel.kallsyms])\n"
      "\t    7f1234567890 __GI___libc_read+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
      "\n"
      "cat   97 [000]    41.334567: cpu-clock:\n"
      "\tffffffff8123abce name_show+0x1d ([kernel.kallsyms])\n");
  ASSERT_EQ(log.frames.size(), 4u);
  EXPECT_FALSE(log.frames[0].return_address) << "a sample's first frame is where it was taken";
  EXPECT_EQ(*log.frames[0].frame.address, 0xffffffff8123abcdull);
  EXPECT_EQ(log.frames[0].frame.symbol, "name_show");
  EXPECT_EQ(log.frames[0].frame.offset, 0x1cu);
  EXPECT_EQ(log.frames[0].caller, 1u);
  EXPECT_EQ(log.frames[1].frame.module, "uio");
  EXPECT_TRUE(log.frames[1].return_address);
  EXPECT_EQ(log.frames[2].frame.symbol, "") << "without symoff only the address says where";
  EXPECT_EQ(log.frames[2].normalized, "0xffffffff81300000");
  EXPECT_FALSE(log.frames[2].caller) << "the user-space frame is not decoded, and does not call it";
  EXPECT_FALSE(log.frames[3].return_address) << "a new sample";
  EXPECT_NE(log.frames[3].trace, log.frames[2].trace);
}

TEST(KernelLogTest, BpftraceDecimalOffsetsAndFtraceArrows) {
  KernelLog log = Scan(
      "@[\n"
      "    name_show+28\n"
      "    dev_attr_show+25\n"
      "]: 3\n"
      "      cat-97  [000] .....  41.2: <stack trace>\n"
      " => name_show+0x1c/0x30\n"
      " => dev_attr_show+0x19/0x40\n"
      "      cat-97  [000] .....  41.2: name_show+0x0/0x30 <-dev_attr_show+0x19/0x40\n");
  ASSERT_EQ(log.frames.size(), 5u);
  EXPECT_FALSE(log.frames[4].return_address) << "the function tracer's own line: the traced function's entry";
  EXPECT_FALSE(log.frames[3].caller) << "and no caller of the stack above it";
  EXPECT_EQ(log.frames[4].frame.symbol, "name_show");
  EXPECT_EQ(log.frames[0].frame.offset, 28u);
  EXPECT_EQ(log.frames[0].normalized, "name_show+0x1c");
  EXPECT_FALSE(log.frames[0].return_address);
  EXPECT_TRUE(log.frames[1].return_address);
  EXPECT_EQ(log.frames[0].caller, 1u);
  EXPECT_FALSE(log.frames[2].return_address) << "an ftrace stack starts where the event fired";
  EXPECT_EQ(log.frames[2].caller, 3u);
  EXPECT_TRUE(log.frames[3].return_address);
}

// KASAN prints the bad access's stack, then where the object was allocated and freed: three
// stacks, each its own chain. lockdep's "at:" lines name the acquiring call's return address.
TEST(KernelLogTest, KasanStacksAndLockdepSites) {
  KernelLog log = Scan(
      "BUG: KASAN: slab-use-after-free in name_show+0x1c/0x30 [pnp]\n"
      "Read of size 8 at addr ffff888003a1b2c8 by task cat/97\n"
      "Call Trace:\n"
      " <TASK>\n"
      " dump_stack_lvl+0x44/0x5c\n"
      " kasan_report+0xb8/0xf0\n"
      " </TASK>\n"
      "\n"
      "Allocated by task 1:\n"
      " kasan_save_stack+0x22/0x50\n"
      " __kmalloc+0x4b/0x130\n"
      "\n"
      "2 locks held by cat/97:\n"
      " #0: ffff888003a1b2c8 (&p->lock){+.+.}-{3:3}, at: seq_read_iter+0x5a/0x450\n");
  ASSERT_EQ(log.frames.size(), 6u);
  EXPECT_TRUE(log.frames[0].regs) << "BUG: ... in f+off/size is the faulting instruction";
  EXPECT_FALSE(log.frames[0].caller);
  EXPECT_EQ(log.frames[1].caller, 2u);
  EXPECT_NE(log.frames[3].trace, log.frames[2].trace) << "'Allocated by task' starts another stack";
  EXPECT_EQ(log.frames[3].caller, 4u);
  EXPECT_FALSE(log.frames[4].caller);
  EXPECT_EQ(log.frames[5].frame.symbol, "seq_read_iter");
  EXPECT_TRUE(log.frames[5].return_address);
  EXPECT_FALSE(log.frames[5].caller);
}

TEST(KernelLogTest, TextWithoutFramesAndSeveralReleases) {
  KernelLog log = Scan(
      "Linux version 6.1.0-57-cloud-amd64 (debian-kernel@lists.debian.org) (gcc-12)\n"
      "a+b, x+1 and 1+0x2/0x3 are not frames\n"
      "CPU: 1 PID: 0 Comm: swapper/1 Tainted: G        W          6.1.0-58-amd64 #1 Debian 6.1.193-1\n");
  EXPECT_TRUE(log.frames.empty());
  EXPECT_EQ(log.release, "6.1.0-57-cloud-amd64");
  ASSERT_EQ(log.releases.size(), 2u);
  EXPECT_EQ(log.releases[1], "6.1.0-58-amd64");
}

TEST(KernelLogTest, OversizedInputIsRefused) {
  std::string big(kMaxLogBytes + 1, 'x');
  EXPECT_FALSE(ScanKernelLog(big).ok());
  std::string lines;
  for (int i = 0; i < 3; ++i) lines += std::string(kMaxFrameLineLength + 10, 'a') + "+0x1/0x2\n";
  lines += "b+0x1/0x2\n";
  lines = "a+0x1/0x2\n" + lines;
  KernelLog log = Scan(lines);
  ASSERT_EQ(log.frames.size(), 2u) << "over-long lines are skipped, not parsed";
  EXPECT_EQ(log.frames[1].line, 4u);
  EXPECT_FALSE(log.frames[0].caller) << "a skipped line ends the stack";
}

}  // namespace
}  // namespace symdex::ingest

// The call before a return address (ingest/call_insn.h), on encodings gcc emits in the kernel.
namespace symdex::ingest {
namespace {

std::optional<CallInsn> Before(std::initializer_list<uint8_t> bytes) {
  std::vector<uint8_t> v(bytes);
  return CallEndingAt(v);
}

TEST(X86CallTest, DirectAndIndirectCalls) {
  auto d = Before({0x48, 0x89, 0xc7, 0xe8, 0x10, 0xff, 0xff, 0xff});  // mov; call rel32 -0xf0
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->direct);
  EXPECT_EQ(d->length, 5u);
  EXPECT_EQ(d->rel32, -0xf0);
  auto reg = Before({0x90, 0x90, 0x41, 0xff, 0xd3});  // call *%r11
  ASSERT_TRUE(reg);
  EXPECT_FALSE(reg->direct);
  EXPECT_EQ(reg->length, 3u);
  auto rip = Before({0x90, 0xff, 0x15, 0x00, 0x10, 0x00, 0x00});  // call *0x1000(%rip) (paravirt)
  ASSERT_TRUE(rip);
  EXPECT_EQ(rip->length, 6u);
  auto sib = Before({0xff, 0x54, 0x24, 0x08});  // call *0x8(%rsp)
  ASSERT_TRUE(sib);
  EXPECT_EQ(sib->length, 4u);
  EXPECT_FALSE(Before({0x48, 0x89, 0xc7, 0x5d, 0xc3}));  // mov; pop; ret
  EXPECT_FALSE(Before({0xff, 0xe0}));                    // jmp *%rax (FF /4) is no call
  EXPECT_FALSE(Before({0xe8, 0x00, 0x00}));              // too short to be one
  EXPECT_FALSE(Before({}));
}

}  // namespace
}  // namespace symdex::ingest

// AArch64 (ingest/call_insn.h A64CallEndingAt): BL, BLR and the pointer-authenticated BLRAA*.
namespace symdex::ingest {
namespace {

TEST(A64CallTest, DirectAndIndirectCalls) {
  auto bl = A64CallEndingAt(0x97fffffe);  // bl .-8
  ASSERT_TRUE(bl);
  EXPECT_TRUE(bl->direct);
  EXPECT_EQ(bl->length, 4u);
  EXPECT_EQ(bl->rel32, -8 - 4) << "from the return address";
  auto fwd = A64CallEndingAt(0x94000010);  // bl .+0x40
  ASSERT_TRUE(fwd);
  EXPECT_EQ(fwd->rel32, 0x40 - 4);
  auto blr = A64CallEndingAt(0xd63f0060);  // blr x3
  ASSERT_TRUE(blr);
  EXPECT_FALSE(blr->direct);
  EXPECT_TRUE(A64CallEndingAt(0xd63f081f));   // blraaz x0
  EXPECT_TRUE(A64CallEndingAt(0xd73f0861));   // blraa x3, x1
  EXPECT_FALSE(A64CallEndingAt(0x14000010));  // b (a tail call returns nowhere here)
  EXPECT_FALSE(A64CallEndingAt(0xd65f03c0));  // ret
  EXPECT_FALSE(A64CallEndingAt(0xd503201f));  // nop
  EXPECT_FALSE(A64CallEndingAt(0xd61f0060));  // br x3
}

}  // namespace
}  // namespace symdex::ingest

// Where a direct call or jump goes (ingest/call_insn.h X86DirectBranch, A64DirectBranch): what
// `symdex callers` finds a copy's calls by.
namespace symdex::ingest {
namespace {

std::optional<DirectBranch> X86(std::initializer_list<uint8_t> bytes) {
  std::vector<uint8_t> v(bytes);
  return X86DirectBranch(v);
}

TEST(DirectBranchTest, X86CallsAndJumps) {
  auto call = X86({0xe8, 0x10, 0xff, 0xff, 0xff});  // call .-0xeb
  ASSERT_TRUE(call);
  EXPECT_TRUE(call->call);
  EXPECT_EQ(call->operand, 1u);
  EXPECT_EQ(call->target, 5 - 0xf0);
  auto jmp = X86({0xe9, 0x00, 0x01, 0x00, 0x00});  // jmp .+0x105 (a tail call)
  ASSERT_TRUE(jmp);
  EXPECT_FALSE(jmp->call);
  EXPECT_EQ(jmp->target, 0x105);
  auto shortj = X86({0xeb, 0xfe});  // jmp . (rel8)
  ASSERT_TRUE(shortj);
  EXPECT_EQ(shortj->target, 0);
  auto jcc8 = X86({0x75, 0x10});  // jne .+0x12
  ASSERT_TRUE(jcc8);
  EXPECT_EQ(jcc8->target, 0x12);
  auto jcc32 = X86({0x0f, 0x85, 0x00, 0x00, 0x00, 0x00});  // jne rel32, a module's operand before relocation
  ASSERT_TRUE(jcc32);
  EXPECT_EQ(jcc32->operand, 2u);
  EXPECT_EQ(jcc32->target, 6);
  auto hinted = X86({0x3e, 0xe9, 0x00, 0x00, 0x00, 0x00});  // ds jmp (a branch hint prefix)
  ASSERT_TRUE(hinted);
  EXPECT_EQ(hinted->operand, 2u);
  EXPECT_EQ(hinted->target, 6);
  EXPECT_FALSE(X86({0xff, 0xd0}));              // call *%rax: no destination in the instruction
  EXPECT_FALSE(X86({0xff, 0xe0}));              // jmp *%rax
  EXPECT_FALSE(X86({0xc3}));                    // ret
  EXPECT_FALSE(X86({0x48, 0x89, 0xc7}));        // mov
  EXPECT_FALSE(X86({0xe8, 0x00, 0x00, 0x00}));  // cut short
  EXPECT_FALSE(X86({}));
}

TEST(DirectBranchTest, A64CallsAndJumps) {
  auto bl = A64DirectBranch(0x97fffffe);  // bl .-8
  ASSERT_TRUE(bl);
  EXPECT_TRUE(bl->call);
  EXPECT_EQ(bl->target, -8);
  auto b = A64DirectBranch(0x14000010);  // b .+0x40 (a tail call)
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->call);
  EXPECT_EQ(b->target, 0x40);
  auto bcond = A64DirectBranch(0x54ffffe1);  // b.ne .-4
  ASSERT_TRUE(bcond);
  EXPECT_EQ(bcond->target, -4);
  auto cbz = A64DirectBranch(0xb4000080);  // cbz x0, .+0x10
  ASSERT_TRUE(cbz);
  EXPECT_EQ(cbz->target, 0x10);
  auto tbnz = A64DirectBranch(0x37180040);  // tbnz w0, #3, .+8
  ASSERT_TRUE(tbnz);
  EXPECT_EQ(tbnz->target, 8);
  EXPECT_FALSE(A64DirectBranch(0xd63f0060));  // blr x3
  EXPECT_FALSE(A64DirectBranch(0xd61f0060));  // br x3
  EXPECT_FALSE(A64DirectBranch(0xd65f03c0));  // ret
  EXPECT_FALSE(A64DirectBranch(0xd503201f));  // nop
}

}  // namespace
}  // namespace symdex::ingest
