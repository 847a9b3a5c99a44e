// The function-spec grammar, accepted everywhere a function is named (resolve, kprobe,
// ftrace-index, and the daemon):
//
//   SPEC     := ADDRESS | [MOD:]NAME[@WHERE][#CU][+OFFSET]
//   ADDRESS  := 0xHEX                       an absolute address (live targets)
//   WHERE    := PATH[:LINE]                 source file (suffix on whole path components) and line,
//                                           matched against the symbol's line-table file:line,
//                                           the function's declaration and its CU
//             | KAS_ALIAS                   kas_alias form: drivers_pnp_card_c_186
//             | 0xHEX | SECTION+0xHEX       the instance's own address / section offset (the
//                                           last-resort canonical form; always unique)
//   CU       := PATH                        compilation unit (suffix on whole path components):
//                                           tells apart header inlines and #included .c copies
//   OFFSET   := decimal | 0xHEX             bytes from the symbol's start
//   _text+N is NAME=_text, OFFSET=N.
//   NAME is letters, digits, '_', '.', '$' and control bytes but tab, CR and LF (a name the kernel
//   keeps with one: "foo\x01").
//
// Examples: name_show  uio:name_show  name_show@drivers/pnp/card.c:186  name_show@card.c
//           name_show@drivers_pnp_card_c_186  paravirt_read_msr@paravirt.h:188#events/core.c
//           tcp_v4_rcv+0x10  _text+6817776  0xffffffff816807f0
//
// Pure: text in, structure out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/common/status.h"

namespace symdex::query {

struct Spec {
  std::optional<uint64_t> address;  // ADDRESS form
  std::string module;               // MOD: ("" = any; "vmlinux" = the core kernel)
  std::string name;
  std::string path;  // WHERE path ("" = none)
  std::optional<int64_t> line;
  std::string kas_alias;            // WHERE in kas_alias form
  std::optional<uint64_t> at_addr;  // WHERE = 0xHEX
  std::string at_section;           // WHERE = SECTION+0xHEX (with at_addr as the offset)
  std::string cu;
  uint64_t offset = 0;
};

absl::StatusOr<Spec> ParseSpec(std::string_view text);

// Renders a spec back to text (the grammar above); ParseSpec(FormatSpec(s)) == s.
std::string FormatSpec(const Spec& s);

// True when `suffix` is a suffix of `path` on whole components ("card.c" and "pnp/card.c"
// match "drivers/pnp/card.c"; "rd.c" does not).
bool PathSuffixMatch(std::string_view path, std::string_view suffix);

// kas_alias's rendering of a location: "drivers/pnp/card.c", 186 -> "drivers_pnp_card_c_186".
std::string KasAlias(std::string_view file, int64_t line);

}  // namespace symdex::query
