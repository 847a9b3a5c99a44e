// Probe arguments by name, compiled into kprobe_events fetch args from the DWARF of exactly one
// function copy at exactly one address — what `perf probe` does for the first copy of a name it
// finds, done here for the copy symdex resolved.
//
//   vfs_read  file->f_path.dentry->d_name.name:string  count
//     -> name=+0(+40(+24(%di))):string count=%dx:x64
//
// A variable is looked up in the scopes that hold the address (the innermost lexical block out
// to the function, then the unit's globals); its location is read from its location list at
// that address (DW_OP_reg*, DW_OP_breg*, DW_OP_fbreg over DW_AT_frame_base — the CFA from the
// call frame information when the frame base is DW_OP_call_frame_cfa —, DW_OP_addr, a trailing
// DW_OP_deref, DW_OP_plus_uconst); members, indexes and string casts become nested
// dereferences; the type follows perf's rules (a signed base type sN, anything else xN, at
// most 64 bits; bitfields bW@O/C as the kernel reads them, from either DWARF encoding of
// their offset). What cannot be fetched there — a location list with no entry for the address,
// DW_OP_entry_value, a value split into pieces, a computed value, a constant — is refused by
// name with the ranges where it can be, never approximated.
//
// Over a libdw handle the caller owns (debuginfo/symbolize/symbolizer.h finds the copy and the
// unit): no file is opened here.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "server/common/kernel_arch.h"
#include "server/common/status.h"
#include "server/ingest/probe_arg.h"

namespace symdex::debuginfo {

struct FetchSite {
  Dwarf_Die cu;
  Dwarf_Die function;  // the copy: a concrete DW_TAG_subprogram, or a DW_TAG_inlined_subroutine
  // The concrete subprogram whose code and frame the probe is in: `function` itself, or the
  // one holding an inlined copy (its frame base, its name in messages).
  Dwarf_Die frame;
  Dwarf_Addr symbol = 0;     // its symbol's address (what ranges in messages are relative to)
  Dwarf_Addr entry = 0;      // its DWARF entry pc (arm64: past the patchable-entry NOPs)
  Dwarf_Addr pc = 0;         // where the probe fires; before `entry` (in the NOPs) reads as `entry`
  bool ret = false;          // a return probe: only $retval
  Dwarf_CFI* cfi = nullptr;  // call frame information, for a frame base that is the CFA (may be null)
  // How far past `entry` a parameter's location may start and still be read at the entry: the
  // instructions ftrace patches (x86-64 `call __fentry__`, after ENDBR64) change no register.
  uint64_t entry_slack = 0;
};

struct FetchContext {
  const KernelArch* arch = nullptr;
  // How a fetch arg names static storage at a DWARF address: "jiffies", "_text+1234" (the
  // caller knows which names are unique); "" when nothing names it.
  std::function<std::string(uint64_t)> static_form;
};

struct CompiledArgs {
  std::vector<std::string> fetchargs;  // NAME=FETCH[:TYPE] each, raw ones as given
  std::vector<std::string> notes;      // what the definition does not show (a value cut to 64 bits)
};

// InvalidArgument: the argument asks for something this copy does not have (an unknown variable
// or member, '.' on a pointer, a string of what is not a char pointer or array, a variable in a
// return probe). OutOfRange: it exists but cannot be fetched at this address (why, and where
// it can).
absl::StatusOr<CompiledArgs> CompileFetchArgs(const FetchSite& site, const std::vector<ingest::ProbeArg>& args,
                                              const FetchContext& ctx);

// What `symdex vars` lists: each variable in scope at the site, its C type and where it can be
// fetched (as offsets from the symbol).
struct ScopeVariable {
  std::string name, type;
  bool parameter = false;
  bool here = false;                                  // fetchable at the site's pc
  std::string fetch;                                  // its fetch arg there ("" when not)
  std::string why;                                    // when not: why
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [lo, hi) offsets from the symbol where it has a location
};
absl::StatusOr<std::vector<ScopeVariable>> ScopeVariables(const FetchSite& site, const FetchContext& ctx);

}  // namespace symdex::debuginfo
