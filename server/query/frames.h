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

#include "server/query/answers.h"
#include "server/query/resolver.h"
#include "server/store/index_store.h"

namespace symdex::query {}  // namespace symdex::query
