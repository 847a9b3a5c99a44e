// Frames that come from elsewhere: a fleet host's stack frames, symbolized against a
// target indexed here — typically the host's kernel, known by build-ID. The host says where its
// kernel and modules were loaded; each frame is an address, a module-relative offset, or a line as
// a kernel log or perf printed it (ingest/frame_text.h).
//
// Which inputs are exact (FrameAnswer::exact):
//   address, with the host's _text or KASLR offset        exact (vmlinux: address - slide)
//   address in a module, with its section bases           exact (the section holding it + offset)
//   address in a module, with only its .text base         exact inside .text; other sections
//                                                          (.text.unlikely, .init.text) are not placed
//   module + section + offset                             exact
//   symbol+off/size [module]                              exact when that name (of that size) is
//                                                          unique in its module/vmlinux; else chosen
//                                                          (not exact, `note` says how) by the offset
//                                                          fitting, and for frames of one stack
//                                                          (FrameIn::return_address, caller) by the
//                                                          code: a call before the return address,
//                                                          the caller's call landing on the callee;
//                                                          else the candidates, and no answer
//   address with neither _text nor KASLR offset           taken as the target's own address: exact
//                                                          only for a live target, or a host booted
//                                                          without KASLR (said in `note`)
// A module whose build-ID the host gives and the target's differs is never answered from: wrong
// answers are worse than none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/query/resolver.h"
#include "server/store/index_store.h"

namespace symdex::query {

inline constexpr size_t kMaxFrameModules = 8192;      // a host's loaded modules (~100-300 usually)
inline constexpr size_t kMaxSectionsPerModule = 256;  // /sys/module/M/sections (~40 usually)

// A module as the host loaded it.
struct FrameModule {
  std::string name;
  std::string build_id;  // hex; "" = not known (the target's module of that name is trusted)
  // Runtime section bases (/sys/module/M/sections/*); often just ".text".
  std::vector<std::pair<std::string, uint64_t>> sections;
  std::optional<uint64_t> size;  // /proc/modules' size: bounds the module's core
};

struct FramesContext {
  std::string kernel_build_id;          // hex; when given, must be the target's vmlinux build-ID
  std::optional<uint64_t> text;         // the host's _text (runtime; _stext for a target anchored there)
  std::optional<int64_t> kaslr_offset;  // runtime _text - link-time _text
  std::vector<FrameModule> modules;
};

// One frame: exactly one of the three forms.
struct FrameIn {
  std::optional<uint64_t> address;  // a runtime address on the host
  // A module-relative offset: `offset` bytes into `section` (default ".text") of `module`.
  std::string module, section;
  std::optional<uint64_t> offset;
  std::string text;  // a printed frame (ingest/frame_text.h)
  // What the frame's stack says about it (`symdex decode` fills these from a log), used to pick
  // among the copies a symbol+offset frame may be (query/call_evidence.h):
  bool return_address = false;     // its address follows a call (a saved return address)
  std::optional<uint32_t> caller;  // index in the request of the frame that called this one
};

// Where a batch of frames may be cut into requests with each stack whole (its frames narrow each
// other): every c in (0, frames.size()) such that no frame before c has its caller at or past c.
// Ascending.
std::vector<size_t> StackCuts(const std::vector<FrameIn>& frames);

// The empty answer every FrameAnswer starts with.
const std::shared_ptr<const AddressInfo>& NoAddressInfo();

enum class FrameBasis { kNone, kAddress, kModuleOffset, kSymbolOffset };
std::string_view FrameBasisName(FrameBasis b);  // "", address, module-offset, symbol+offset

struct FrameAnswer {
  FrameBasis basis = FrameBasis::kNone;  // what the answer was computed from
  bool exact = false;                    // see the table above
  // Symbol (+offset), inline chain (leaf first). Shared and immutable: a cached answer is handed
  // out without copying it. Never null.
  std::shared_ptr<const AddressInfo> info = NoAddressInfo();
  std::string canonical;  // the symbol's canonical spec (resolves to exactly it)
  // Where the frame is in the target's terms: vmlinux's link-time address, or SECTION+offset
  // of a module. What a kprobe or a later query can use on any host running this kernel.
  std::optional<uint64_t> target_address;
  std::string module, section;
  uint64_t section_offset = 0;
  std::vector<std::string> candidates;  // symbol+offset matching several instances: their canonical specs
  std::string error;                    // the frame could not be read (a malformed line); nothing else is set
  std::string note;                     // why it is not exact, or not answered
};

struct FramesResult {
  store::TargetInfo target;
  std::vector<FrameAnswer> frames;  // parallel to the request's
};

// The target a frames request is answered from: `target` when given, else the one whose vmlinux
// build-ID is ctx.kernel_build_id ("build-id:HEX"), else the default target ("").
std::string FramesTarget(const std::string& target, const FramesContext& ctx);

// InvalidArgument for a request no frame of which can be answered (a bad build-ID, too many
// modules/sections, both _text and a KASLR offset); per-frame problems are per-frame answers.
absl::Status CheckFramesRequest(const FramesContext& ctx, size_t frames);

}  // namespace symdex::query
