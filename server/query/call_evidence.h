// Which copy of a duplicated name a stack frame is, from the machine code around it:
//   - a return address follows a call instruction: a copy whose code at NAME+OFF does not end
//     a call there is not the frame;
//   - a direct call names its callee: the caller's call before its return address lands on the
//     start of the callee's copy, and a copy of the caller is the one whose call there lands on
//     the callee.
// Read from the target's debug files (their code as linked: debuginfo/files/code_file.h). Evidence is
// used only to choose among candidates the frame's name and size already allow.
// The same code read the other way round gives a copy's callers: every direct call and jump in its
// file that lands on its first byte.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "server/debuginfo/files/code_file.h"
#include "server/query/resolver.h"
#include "server/query/symbol_query.h"

namespace symdex::query {

// A place in a target's code in its files' terms: vmlinux (module "") by link-time address in
// `at`, a module by section + offset.
struct CodePlace {
  std::string module, section;
  uint64_t at = 0;
  bool operator==(const CodePlace&) const = default;
};

// Where a direct call goes: a place, or (a module's call into another file) a symbol name.
struct Callee {
  std::optional<CodePlace> place;
  std::string symbol;
};

class CallEvidence {
 public:
  CallEvidence(const TargetInfo& t, DebugFileLookup debug_file_of, SectionLookup sections_of)
      : t_(t), debug_file_of_(std::move(debug_file_of)), sections_of_(std::move(sections_of)) {}

  // Whether a call instruction ends at in+off. nullopt: the code cannot be read.
  std::optional<bool> FollowsCall(const Instance& in, uint64_t off);
  // The callee of the direct call ending at in+off; nullopt when there is none or it is unknown.
  std::optional<Callee> CalleeBefore(const Instance& in, uint64_t off);
  // Whether `callee` is where `k` starts.
  bool Starts(const Callee& callee, const Instance& k);

  // Every direct call and jump in k's file (vmlinux, or k's module) landing on k's first byte,
  // each where it is in the target: `runtime` the address the target gives it (vmlinux, a loaded
  // module's section), else its place in the module's file. NotFound saying why when k's code
  // cannot be read.
  struct Branch {
    CodePlace place;
    std::optional<uint64_t> runtime;
    bool call = false;
  };
  absl::StatusOr<std::vector<Branch>> BranchesTo(const Instance& k);

  // Why code could not be read, the first time it could not ("" = it always could).
  const std::string& unavailable() const { return unavailable_; }

 private:
  std::optional<CodePlace> PlaceOf(const Instance& in, uint64_t off);
  debuginfo::CodeFile* FileOf(const std::string& module);
  absl::StatusOr<std::optional<debuginfo::CallSite>> CallAt(const CodePlace& p);

  const TargetInfo& t_;
  DebugFileLookup debug_file_of_;
  SectionLookup sections_of_;
  std::map<std::string, std::unique_ptr<debuginfo::CodeFile>> files_;  // null: no code for it
  uint64_t vmlinux_slide_ = 0;                                         // a live vmlinux: runtime - link-time address
  std::string unavailable_;
};

}  // namespace symdex::query
