// Reads, from a kernel image (vmlinux: ET_EXEC on x86-64, ET_DYN on arm64) or a module (.ko,
// ET_REL), the tables the kernel itself consults when it accepts or refuses a probe. Pure: bytes
// in, records out (libelf, every Elf* owned; every read bounded by the section it comes from).
// What differs by architecture (common/kernel_arch.h) is taken from the file's e_machine.
//
//  - ftrace sites ("fentry" here, after x86-64's `call __fentry__`; arm64's are the NOPs of
//    -fpatchable-function-entry): the records the build made, vmlinux: the u64 addresses between the symbols
//    __start_mcount_loc and __stop_mcount_loc (in .init.data) — in an image linked
//    with --no-apply-dynamic-relocs (arm64) the words are zero in the file and the addresses
//    are the addends of their R_*_RELATIVE relocations in .rela.dyn; a module: its
//    __mcount_loc (x86-64) or __patchable_function_entries (arm64) section, whose entries are
//    relocations against the text sections. Each record is then turned into the address ftrace
//    patches and lists (ftrace_call_adjust) by the file's entry layout (common/kernel_arch.h),
//    which the records show: the function symbols they point at, before or into (the first
//    NOPs of a CALL_OPS layout, the call after an ENDBR64). ftrace lists a function in
//    available_filter_functions when it has one at its entry; kprobe *events* refuse a function
//    without one anywhere in it (unless the kernel has CONFIG_KPROBE_EVENTS_ON_NOTRACE).
//  - the kprobe blacklist: NOKPROBE_SYMBOL entries (vmlinux: __start/__stop_kprobe_blacklist;
//    a module: its _kprobe_blacklist section) and whole areas: .kprobes.text, .noinstr.text and
//    the architecture's own (kernel/kprobes.c populate_kprobe_blacklist and the arch hook).
//  - init text, freed after boot (vmlinux: _sinittext.._einittext) or after a module's load
//    (its .init* executable sections);
//  - its BTF (.BTF), the function names a BPF trampoline attaches to by name (ingest/btf.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "server/common/kernel_arch.h"
#include "server/common/status.h"

namespace symdex::ingest {

// A place in the image: `section` "" for a linked image (addr is a link-time virtual address),
// else the section of a relocatable module that `addr` is an offset into.
struct ProbePlace {
  std::string section;
  uint64_t addr = 0;
};

struct ProbeArea {
  std::string section;
  uint64_t lo = 0, hi = 0;  // [lo, hi)
  std::string what;         // the kind of text: ".noinstr.text", ".entry.text", ".init.text", ...
};

struct ProbeTables {
  uint16_t machine = 0;  // the file's e_machine
  bool relocatable = false;
  // The image says where its fentry sites are: a vmlinux built with dynamic ftrace has the
  // __start/__stop_mcount_loc symbols, a module its __mcount_loc section. false: `fentry` is
  // empty because nothing is known here — for a module of a kernel whose vmlinux records
  // fentry sites, that means it has none.
  bool fentry_known = false;
  // The ftrace sites: each record as ftrace_call_adjust turns it into the address ftrace patches
  // (rec->ip, what available_filter_functions_addrs prints), per `layout`.
  std::vector<ProbePlace> fentry;
  // The file's entry layout (one of its architecture's rows); nullptr for an architecture
  // symdex does not know, whose records are taken as the sites.
  const EntryLayout* layout = nullptr;
  std::vector<ProbePlace> blacklist;  // function addresses named by NOKPROBE_SYMBOL
  std::vector<ProbeArea> blacklist_areas;
  std::vector<ProbeArea> init_areas;
  // The .BTF section's bytes, as they are ("" without one): read by ingest::ReadBtf, which for
  // a module needs vmlinux's strings.
  std::string btf;
  // What was skipped and why (relocations of a type this reader does not apply, ...).
  std::vector<std::string> notes;
};

// `image` must stay alive and unmodified during the call; libelf reads it in place.
absl::StatusOr<ProbeTables> ReadProbeTables(std::span<char> image);

}  // namespace symdex::ingest
