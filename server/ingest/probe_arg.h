// Parser for one probe argument as `perf probe` writes it (tools/perf/util/probe-event.c
// parse_perf_probe_arg), the form `symdex kprobe SPEC ARG...` takes:
//
//   ARG     := [NAME '='] EXPR [':' TYPE]
//   NAME    := [A-Za-z_][A-Za-z0-9_]*            the field's name in the trace (else one is made)
//   EXPR    := VAR FIELD*                        a C variable in scope at the probe, and members
//            | '$params' | '$vars' | '$retval'   every parameter / every variable in scope / the
//                                                return value (a return probe only)
//            | RAW                               anything else: a kprobe_events fetch arg, kept as
//                                                written ('%di', '+8(%si)', '@sym', '$comm', '\5')
//   VAR     := [A-Za-z_][A-Za-z0-9_]*
//   FIELD   := '->' MEMBER | '.' MEMBER | '[' DIGITS ']'
//   TYPE    := u8..u64 | s8..s64 | x8..x64 | u | s | x   (the last three: that signedness, DWARF's
//              width) | string | ustring | symbol | bWIDTH@OFFSET/CONTAINER
//
// As perf: the first '=' ends the name and the first ':' after it starts the type, and an
// EXPR is a variable only when it starts as a C name; a raw one is never checked here (the
// kernel's parser decides). Pure: text in, a record out; errors say what is wrong and where.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

inline constexpr size_t kMaxProbeArgLength = 1024;
inline constexpr size_t kMaxProbeArgFields = 32;

struct ProbeArgField {
  std::string member;             // "" for an index
  bool arrow = false;             // '->' (else '.')
  std::optional<uint64_t> index;  // '[N]'
  bool operator==(const ProbeArgField&) const = default;
};

struct ProbeArg {
  enum class Kind { kVariable, kParams, kVars, kRetval, kRaw };
  Kind kind = Kind::kRaw;
  std::string text;  // the whole argument as given
  std::string name;  // NAME= ("" = none given)
  std::string var;   // kVariable: the C variable; kRaw: the fetch arg after NAME= (type included)
  std::vector<ProbeArgField> fields;
  std::string type;  // after ':' ("" = from DWARF)
  bool operator==(const ProbeArg&) const = default;
};

// InvalidArgument for a malformed argument: an empty one, a NAME that is not a C name, a member
// that is not one, an unclosed or non-numeric index, an empty or unknown type after a variable.
absl::StatusOr<ProbeArg> ParseProbeArg(std::string_view text);

// Each of `texts` parsed, when one of them names a variable (nullopt: every one is kprobe_events'
// own, passed as written); the first malformed one's error.
absl::StatusOr<std::optional<std::vector<ProbeArg>>> ParseNamedProbeArgs(const std::vector<std::string>& texts);

// A type kprobe_events reads (TYPE above, less the bare u/s/x): what a compiled argument may carry.
bool IsFetchType(std::string_view type);

// True when `name` is a C identifier.
bool IsCName(std::string_view name);

}  // namespace symdex::ingest
