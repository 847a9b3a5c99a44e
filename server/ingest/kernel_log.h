// The kernel frames in a text as people paste it (`symdex decode`): an oops, a WARN,
// a KASAN/KFENCE report, lockdep, sysrq backtraces, /proc/PID/stack, an ftrace stacktrace,
// `perf script` output, bpftrace `kstack` output. Pure: the text in; where each frame is, what it
// names, and how the frames of one stack relate; what they mean on which kernel is the query
// layer's job (query/decode.h).
//
// A line is a frame when it holds one of (anything before it — timestamps, "kernel:", "=>" — is kept):
//   NAME+0xOFF/0xSIZE [MOD [BUILDID]]     dump_stack, /proc/PID/stack ([<0>] first), ftrace sym-offset
//   RIP: 0010:NAME+0xOFF/0xSIZE          the registers' ip (the faulting or interrupted instruction)
//   pc : NAME+0xOFF/0xSIZE [MOD]         arm64's (its "lr : ..." is the link register: a return
//                                        address, but not the caller's for sure — it stands alone)
//   [<ffffffff8123abcd>] NAME+0xOFF/...  old kernels: the address too
//   ffffffff8123abcd NAME+0xOFF (DSO)    perf script -F +symoff; (DSO) [kernel.kallsyms] or a module
//   ffffffff8123abcd NAME (DSO)          perf script without symoff: the address alone says which
//   NAME+DECIMAL                         bpftrace kstack (the whole line; decimal offset)
// A stack (Trace) is a run of frame lines and the lines that sit inside kernel stacks (<IRQ>,
// </TASK>, register dumps, "Call Trace:", arm64's "Call trace:"); anything else ends it. Inside a
// stack each frame's caller is the next reliable frame, unless a context switch (<IRQ>, </IRQ>,
// <NMI>, a register dump) lies between them. arm64 starts the "Call trace:" of a report with
// registers at the pc itself (dump_backtrace from regs): that first frame is not a return
// address; x86-64 lists the frames after RIP only. Inside an arm64 stack, the frame after an
// exception vector (el1h_64_irq+0x64/0x68) is the pc it interrupted, not a return address either,
// and no call links it to the frames around it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/ingest/frame_text.h"

namespace symdex::ingest {

inline constexpr size_t kMaxLogBytes = 64u << 20;  // a whole dmesg is ~1 MB; perf script can be big
inline constexpr size_t kMaxLogFrames = 1u << 20;

struct LogFrame {
  size_t line = 0;               // 0-based line number in the text
  size_t begin = 0, end = 0;     // where the frame is printed in that line (decoded text goes after `end`)
  FrameText frame;               // what it names; `address` only when it is a kernel-half address
  std::string normalized;        // the frame as ParseFrameText reads it back: [<ADDR>] NAME+0xOFF/0xSIZE [MOD ID]
  bool return_address = false;   // the address follows a call instruction (a stack's saved return address)
  bool regs = false;             // RIP: / pc : — the faulting or interrupted instruction itself
  std::optional<size_t> caller;  // index (in KernelLog::frames) of the frame that called this one
  size_t trace = 0;              // which stack
};

struct KernelLog {
  std::vector<std::string_view> lines;  // the text's lines (into the caller's buffer; no '\n')
  std::vector<LogFrame> frames;         // in line order
  size_t traces = 0;
  std::string release;  // the kernel release the log names ("Linux version X", "Not tainted X #1"); "" = none
  std::vector<std::string> releases;  // every distinct release named (a log of several kernels is flagged)
};

// InvalidArgument when the text is over kMaxLogBytes or holds more than kMaxLogFrames frames.
absl::StatusOr<KernelLog> ScanKernelLog(std::string_view text);

}  // namespace symdex::ingest
