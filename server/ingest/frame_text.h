// One stack frame as text from another machine: what a kernel log, `perf script` or a profiler
// printed. Pure: a line in, the parts it names out; deciding what they mean on which kernel is
// the query layer's job (query/frames.cc).
//
// Forms recognised (anything before/after them on the line — timestamps, "Call Trace:" prefixes,
// "RIP: 0010:" — is skipped):
//   name_show+0x1c/0x40 [pnp]                 dump_stack()/show_stack(): symbol+offset/size [module]
//   ? name_show+0x1c/0x40                      "?" = an unreliable frame (a stale return address)
//   name_show+0x1c/0x40 [pnp 1a2b...]          CONFIG_STACKTRACE_BUILD_ID: the module's build-ID
//   [<ffffffff8123abcd>] name_show+0x1c/0x40   old kernels: the address, then symbol+offset
//   ffffffff8123abcd name_show+0x1c ([kernel.kallsyms])   perf script (-F ip,sym,symoff,dso)
//   0xffffffff8123abcd | ffffffff8123abcd      a bare address
//   name_show+0x19/0x30 (drivers/pnp/card.c:188)   CONFIG_KALLSYMS_LINEINFO: the kernel's own
//                                              file:line for the frame, after the symbol [module]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/common/status.h"

namespace symdex::ingest {

inline constexpr size_t kMaxFrameLineLength = 4096;

// A character of a kernel symbol name as frames print it (clone suffixes: name.isra.0).
constexpr bool IsFrameSymbolChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '$';
}
inline constexpr size_t kMaxFrameSymbolLength = 1024;  // the kernel's KSYM_NAME_LEN is 512
inline constexpr size_t kMaxFrameSourceLength = 1024;  // a source path as LINEINFO prints it

struct FrameText {
  std::optional<uint64_t> address;  // a runtime address printed on the line
  std::string symbol;               // "" when the line names no symbol
  uint64_t offset = 0;              // +0xOFF after the symbol
  std::optional<uint64_t> size;     // /0xSIZE after the offset (the symbol's size as kallsyms knew it)
  std::string module;               // [mod] or (mod) after the symbol; "" = vmlinux or not said
  std::string module_build_id;      // [mod HEX] (CONFIG_STACKTRACE_BUILD_ID), lower-case hex
  bool unreliable = false;          // "? " before the symbol
  // "(FILE:LINE)" after it (CONFIG_KALLSYMS_LINEINFO): the printing kernel's source of the frame.
  std::string source_file;  // "" = none printed
  uint32_t source_line = 0;
};

// InvalidArgument (quoting at most 80 characters) when the line has neither an address nor a
// symbol+offset, or is longer than kMaxFrameLineLength.
absl::StatusOr<FrameText> ParseFrameText(std::string_view line);

}  // namespace symdex::ingest
