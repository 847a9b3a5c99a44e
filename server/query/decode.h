// `symdex decode`: the kernel frames of a log — an oops, a WARN, sysrq backtraces,
// /proc/PID/stack, ftrace and perf script and bpftrace stacks (ingest/kernel_log.h) — each pinned to
// the one instance it is, with file:line:column and inline chain; the frames that cannot be
// pinned, with the candidates left and why.
//
// Works over any QueryApi (the embedded index, the daemon, a fleet replica) through Frames: what
// a log's stacks tell about each frame (a return address, which frame called it) travels with the
// frames, so the same evidence is used whichever front end answers (query/frames.cc).
//
// The kernel: the target named, else the one whose vmlinux build-ID is given, else the one whose
// release the log prints ("Linux version R", "Not tainted R #1"), else the default target.
// Addresses in the log ([<ffffffff...>], perf script) are placed once the KASLR slide is known:
// given, or learnt from frames that print both an address and symbol+offset of a unique symbol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/query/answers.h"

namespace symdex::query {

class QueryApi;

struct DecodeRequest {
  std::string target;                   // "" = by build-ID, the log's release, or the default target
  std::string kernel_build_id;          // hex
  std::string text;                     // the log (ingest::kMaxLogBytes at most)
  std::optional<uint64_t> host_text;    // the host's _text, when known
  std::optional<int64_t> kaslr_offset;  // or its KASLR offset
};

struct DecodedFrame {
  size_t line = 0;            // 0-based line of the text
  size_t begin = 0, end = 0;  // where the frame is printed in it
  bool regs = false;          // RIP:/WARNING:/BUG: — the faulting instruction, not a return address
  bool unreliable = false;    // "? " — a stale return address the unwinder only guessed
  FrameAnswer answer;
};

struct DecodeResult {
  TargetInfo target;
  std::string target_reason;     // how the target was chosen ("named", "build-ID", "release R in the log", "default")
  std::string release;           // the release the log prints ("" = none)
  std::optional<int64_t> slide;  // the KASLR slide used for the log's addresses
  std::string slide_reason;      // "given", "learnt from N frames", or why none
  std::vector<DecodedFrame> frames;
  size_t lines = 0;
  size_t pinned = 0;      // frames answered with one instance
  size_t ambiguous = 0;   // frames with candidates left
  size_t unanswered = 0;  // neither (not in the target, a different module build, ...)
};

// InvalidArgument for a log too big or with too many frames, or a bad build-ID; FailedPrecondition
// when no target fits. A log without frames is an answer with none.
absl::StatusOr<DecodeResult> Decode(QueryApi& api, const DecodeRequest& req);

// The modules a log's frames name with their build-IDs ("[mod HEX]", CONFIG_STACKTRACE_BUILD_ID):
// what a fleet replica must fetch before it can answer them (and what checks that the target's
// module of that name is the same build). Decode passes them with its frames.
absl::StatusOr<std::vector<FrameModule>> DecodeModules(std::string_view text);

}  // namespace symdex::query
