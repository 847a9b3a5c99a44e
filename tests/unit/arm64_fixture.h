// A miniature arm64 kernel compiled at test time with Debian's cross compiler, as the arm64 kernel
// is built (arch/arm64/Makefile): traced.c with -fpatchable-function-entry=2 (two NOPs at each
// function's symbol, listed in __patchable_function_entries; GCC's DWARF starts after them) or
// =4,2 (two more before the symbol, where the record then points), a
// notrace function, a NOKPROBE_SYMBOL-style _kprobe_blacklist entry, an __init function, one in
// .idmap.text (arm64's blacklist area); untraced.c without the flag, with a second copy of the
// static dup_fn. Linked as the arm64 vmlinux is (ET_DYN, -shared -Bsymbolic -z notext
// --no-apply-dynamic-relocs: the tables' words are zero in the file, their addresses the addends
// of R_AARCH64_RELATIVE relocations), _text 64 bytes before _stext; and with ld -r as a module.
#pragma once

#include <cstdint>
#include <string>

#include "tests/unit/test_util.h"

namespace symdex::testing {

struct Arm64Fixture {
  // `patchable`: -fpatchable-function-entry's argument for traced.c: "2" (6.1's layout) or "4,2"
  // (CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS: two NOPs before each symbol, two at it, functions
  // 8-aligned).
  explicit Arm64Fixture(const std::string& patchable = "2");

  TempDir dir;
  std::string vmlinux;     // ET_DYN, EM_AARCH64, with DWARF
  std::string module;      // ET_REL with DWARF, .modinfo name=arm64_mod
  std::string system_map;  // nm -n of vmlinux less what scripts/mksysmap drops
  std::string modules_dir, debug_dir;
  std::string release = "6.1.0-arm64-fixture";
  // The return address after traced_entry's call of the traced.c dup_fn, as traced_entry+OFF.
  uint64_t traced_entry_ret = 0;
};

}  // namespace symdex::testing
