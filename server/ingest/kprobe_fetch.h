// Parser for one kprobe_events fetch arg (the kernel's Documentation/trace/kprobetrace.rst):
// where its value starts, the memory reads that follow, and how the last one is typed. What
// symdex translates into the tracers that read arguments in a program of their own (bpftrace,
// a libbpf or cilium/ebpf C program), from the definition it compiled or the one given raw.
//
//   ARG    := [NAME '='] FETCH [':' TYPE]
//   FETCH  := '%' REG                        a register's value
//           | '@' SYMBOL [('+'|'-') OFFS]    the memory at a symbol (plus an offset)
//           | '@' ADDR                       the memory at an address
//           | '$stack' | '$stack' N          the stack pointer | the Nth word on the stack
//           | '$arg' N                       the Nth argument (N >= 1, at a function's entry)
//           | '$retval' | '$comm'            the return value | the task's name (a string)
//           | '\' IMM                        an immediate number
//           | ('+'|'-') ['u'] OFFS '(' FETCH ')'   the memory at FETCH's value + OFFS ('u': user memory)
//   TYPE   := u8..u64 | s8..s64 | x8..x64 | string | ustring | symbol | symstr | bWIDTH@OFFSET/CONTAINER
//
// The default type is x64 (the kernel's xLONG); an argument without NAME= is named argN by its
// place (1-based), as the kernel names it. A string is read at the address the last read would
// have read from (`+0(%di):string` is the string at %di), or at the value itself when nothing is
// read (`$comm`). Pure: text in, a record out. InvalidArgument for what is malformed;
// FailedPrecondition for kprobe_events' own forms this record does not describe (arrays
// `TYPE[N]`, string immediates `\"…"`, `$current` and the like), named.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

inline constexpr size_t kMaxKprobeFetchReads = 32;

struct KprobeFetch {
  enum class Source { kRegister, kSymbol, kAddress, kStackEntry, kStack, kArg, kRetval, kComm, kImmediate };
  enum class Kind { kInteger, kString, kUserString, kSymbol, kBitfield };

  std::string text;  // the whole argument as given
  std::string name;  // NAME=, else "argN"

  Source source = Source::kRegister;
  std::string reg;      // kRegister: without '%'
  std::string symbol;   // kSymbol
  int64_t offset = 0;   // kSymbol: +|-OFFS
  uint64_t number = 0;  // kAddress: ADDR; kStackEntry, kArg: N; kImmediate: IMM

  // The memory reads from the source's value outward, each at the value so far + offset. An
  // '@' source is a read at the symbol's or address's value (its first read, offset 0).
  struct Read {
    int64_t offset = 0;
    bool user = false;
    bool operator==(const Read&) const = default;
  };
  std::vector<Read> reads;

  Kind kind = Kind::kInteger;
  unsigned bits = 64;  // kInteger, kSymbol: the width read; kBitfield: the container's
  bool is_signed = false;
  bool hex = true;                         // xN (and the default)
  unsigned bit_width = 0, bit_offset = 0;  // kBitfield
  bool symstr = false;                     // kSymbol: "symstr" (the name as a string) rather than "symbol"
};

// `position` is the argument's place in its definition (1-based), for its default name.
absl::StatusOr<KprobeFetch> ParseKprobeFetch(std::string_view text, size_t position);

// The fetch args of a kprobe_events definition line ("p:GRP/EVENT PLACE ARG..."): the words
// after the place, split at spaces outside double quotes.
std::vector<std::string> KprobeLineFetchArgs(std::string_view line);

}  // namespace symdex::ingest
