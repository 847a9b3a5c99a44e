#include "server/query/fentry_verdict.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <set>

#include "server/common/enum_names.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/kernel/probe_bits.h"

namespace symdex::query {
namespace {

constexpr std::array<EnumName<FentryReach>, 6> kReachNames = {{
    {FentryReach::kUnknown, "unknown"},
    {FentryReach::kReaches, "reaches"},
    {FentryReach::kElsewhere, "elsewhere"},
    {FentryReach::kAttachFails, "attach-fails"},
    {FentryReach::kNoBtf, "no-btf"},
    {FentryReach::kLoadOrder, "load-order"},
}};

// Whether the release ("6.1.0-57-cloud-amd64", "6.12.118+deb12-cloud-arm64") is at least
// major.minor; a release that does not start with two numbers is taken as new.
bool ReleaseAtLeast(std::string_view release, int major, int minor) {
  int a = 0, b = 0;
  const char* p = release.data();
  const char* end = p + release.size();
  auto r1 = std::from_chars(p, end, a);
  if (r1.ec != std::errc() || r1.ptr == end || *r1.ptr != '.') return true;
  auto r2 = std::from_chars(r1.ptr + 1, end, b);
  if (r2.ec != std::errc()) return true;
  return a != major ? a > major : b >= minor;
}

std::string Owner(const Instance& in) { return in.module.empty() ? "vmlinux" : in.module; }

// A copy as a user tells it from its siblings: its source place, owner and a KASLR-free place in
// it (vmlinux's ANCHOR+N, an offline module's section+offset). No absolute address: the reason is
// shown to callers the live kernel's addresses are hidden from (query/caller_view.h).
std::string Describe(const Instance& in) {
  std::string where;
  if (in.dwarf && !in.dwarf->entry_file.empty()) {
    where = StrCat(in.dwarf->entry_file, ":", in.dwarf->entry_line, " ");
  } else if (in.dwarf && !in.dwarf->decl_file.empty()) {
    where = StrCat(in.dwarf->decl_file, ":", in.dwarf->decl_line, " ");
  }
  std::string at;
  if (in.module.empty() && in.text_offset) {
    at = StrCat(", ", in.text_anchor, "+", *in.text_offset);
  } else if (!in.section.empty()) {
    at = StrCat(", ", in.section, "+", fmt::format("0x{:x}", in.section_offset));
  }
  return StrCat("the copy at ", where, "(", Owner(in), at, ")");
}

// The lowest-addressed of `c` (absolute addresses: vmlinux's always have one).
const Instance* Lowest(const std::vector<const Instance*>& c) {
  const Instance* best = nullptr;
  for (const Instance* in : c) {
    if (in->addr && (best == nullptr || *in->addr < *best->addr)) best = in;
  }
  return best;
}

}  // namespace

std::string_view FentryReachName(FentryReach r) { return NameIn(kReachNames, r, "unknown"); }
std::optional<FentryReach> ParseFentryReach(std::string_view name) { return ValueIn(kReachNames, name); }

void FillFentryVerdicts(const TargetInfo& t, std::vector<Instance*>& copies) {
  if (copies.empty()) return;
  const std::string& name = copies.front()->name;
  auto set_all = [&](FentryReach kind, const std::string& reason) {
    for (Instance* in : copies) in->fentry = {kind, reason};
  };
  // The facts: every code copy's owner BTF read, and which owners have the name as a function.
  std::vector<const Instance*> vmlinux_all;  // vmlinux's symbols of the name, any type
  std::set<std::string> btf_owners;          // "" vmlinux, else module names
  std::set<std::string> module_owners;       // modules with a symbol of the name, any type
  for (const Instance* in : copies) {
    if (in->module.empty()) {
      vmlinux_all.push_back(in);
    } else {
      module_owners.insert(in->module);
    }
    const uint32_t bits = in->verdict.bits;
    if (!IsCodeSymbolType(in->type)) continue;
    if (!(bits & kernel::kProbeBtfJudged)) {
      set_all(FentryReach::kUnknown,
              StrCat("the BTF of ", Owner(*in), " was not read (no debug or module file indexed with it)"));
      return;
    }
    if (bits & kernel::kProbeBtfFunc) btf_owners.insert(in->module);
  }
  if (btf_owners.empty()) {
    set_all(FentryReach::kNoBtf,
            StrCat("'", name,
                   "' is not a function of the kernel's BTF (vmlinux's or a module's): libbpf and bpftrace "
                   "refuse fentry/fexit on it; a kprobe reaches it"));
    return;
  }
  const bool module_btf_own_symbols = ReleaseAtLeast(t.release, 6, 4);
  const Instance* target = nullptr;
  std::string how;
  if (btf_owners.count("") || !module_btf_own_symbols) {
    // kallsyms_lookup_name: vmlinux's lowest address, else the modules newest first.
    if (!vmlinux_all.empty()) {
      target = Lowest(vmlinux_all);
      how = "vmlinux's lowest-addressed symbol of the name (kallsyms_lookup_name)";
    } else if (module_owners.size() > 1) {
      set_all(FentryReach::kLoadOrder,
              StrCat("'", name, "' resolves in the most recently loaded of the modules that have it (",
                     StrJoin(std::vector<std::string>(module_owners.begin(), module_owners.end()), ", "),
                     "): the load order decides; a kprobe reaches each copy by address"));
      return;
    }
  }
  if (target == nullptr) {
    // One module's BTF, and its own symbols (from 6.4, or the only module with the name).
    if (btf_owners.size() > 1) {
      set_all(FentryReach::kLoadOrder,
              StrCat("'", name, "' is a function of several modules' BTF (",
                     StrJoin(std::vector<std::string>(btf_owners.begin(), btf_owners.end()), ", "),
                     "): libbpf takes the first loaded; a kprobe reaches each copy by address"));
      return;
    }
    const std::string mod = *btf_owners.begin();
    std::vector<const Instance*> in_mod;
    for (const Instance* in : copies) {
      if (in->module == mod && IsCodeSymbolType(in->type)) in_mod.push_back(in);
    }
    if (in_mod.size() != 1) {
      set_all(FentryReach::kUnknown,
              StrCat("'", name, "' repeats inside ", mod,
                     ": the kernel takes the first in the module's symbol table, which the index does not keep"));
      return;
    }
    target = in_mod.front();
    how = StrCat(mod, "'s own symbol of the name");
  }
  if (!IsCodeSymbolType(target->type)) {
    set_all(FentryReach::kAttachFails, StrCat("fentry/fexit '", name, "' resolve to a data symbol, ", Describe(*target),
                                              " (", how, "): the attach fails; a kprobe reaches a function copy"));
    return;
  }
  const bool target_site = (target->verdict.bits & kernel::kProbeFentryEntry) != 0;
  const bool target_judged = (target->verdict.bits & kernel::kProbeJudged) != 0;
  if (target_site && t.ftrace_direct && !*t.ftrace_direct) {
    set_all(FentryReach::kAttachFails,
            StrCat("fentry/fexit '", name, "' resolve to ", Describe(*target), ", ", how,
                   ", a function ftrace patches, and the kernel has no CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS (",
                   t.kernel_config, "): its trampoline is refused (ENOTSUPP); a kprobe reaches each copy"));
    return;
  }
  for (Instance* in : copies) {
    if (in == target) {
      if (target_site || !target_judged) {
        in->fentry = {FentryReach::kReaches,
                      StrCat("fentry/fexit '", name, "' attach here: ", how,
                             target_judged ? "" : " (its fentry call is not known: no ftrace records)")};
      } else {
        in->fentry = {FentryReach::kAttachFails,
                      StrCat("fentry/fexit '", name, "' resolve here (", how,
                             "), which has no fentry call at its entry: the trampoline attach fails")};
      }
      continue;
    }
    if (!target_site && target_judged) {
      in->fentry = {FentryReach::kAttachFails,
                    StrCat("fentry/fexit '", name, "' resolve to ", Describe(*target), ", ", how,
                           ", which has no fentry call at its entry: the attach fails; a kprobe reaches this copy")};
      continue;
    }
    in->fentry = {FentryReach::kElsewhere,
                  StrCat("fentry/fexit '", name, "' attach to ", Describe(*target), ", ", how,
                         "; a trampoline cannot be attached by address: a kprobe reaches this copy")};
  }
}

}  // namespace symdex::query
