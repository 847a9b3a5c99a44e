// A miniature kernel with the tables probe verdicts come from, compiled at test time as the
// kernel is: traced.c with -pg -mfentry -mrecord-mcount (fentry calls, __mcount_loc), a notrace
// function, a NOKPROBE_SYMBOL-style _kprobe_blacklist entry, an __init function in .init.text,
// a noinstr function in .noinstr.text; untraced.c without -pg (a compilation unit built without
// ftrace, like kernel/trace/), with a second copy of the static dup_fn. Linked as a vmlinux
// (ET_EXEC, with the kernel's __start/__stop_mcount_loc, _sinittext/_einittext, ... symbols)
// and, with ld -r, as a module (ET_REL: the tables as sections with relocations).
#pragma once

#include <string>

#include "tests/unit/test_util.h"

namespace symdex::testing {

struct ProbeFixture {
  ProbeFixture();

  TempDir dir;
  std::string vmlinux;     // ET_EXEC with DWARF
  std::string module;      // ET_REL with DWARF, .modinfo name=probe_mod
  std::string system_map;  // nm -n of vmlinux, as System.map-<release>
  std::string modules_dir, debug_dir;
  std::string release = "6.1.0-probe";
};

}  // namespace symdex::testing
