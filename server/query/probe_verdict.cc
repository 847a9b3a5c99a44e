#include "server/query/probe_verdict.h"

#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/kernel/probe_bits.h"

namespace symdex::query {
namespace {

constexpr std::pair<Probeability, std::string_view> kNames[] = {
    {Probeability::kUnknown, "unknown"},         {Probeability::kTraceable, "traceable"},
    {Probeability::kNoFentry, "no-fentry"},      {Probeability::kInit, "init"},
    {Probeability::kBlacklisted, "blacklisted"}, {Probeability::kNotCode, "not-code"},
};

// Why a function has no fentry call, as far as the index can tell.
std::string NoFentryCause(const store::SymbolRecord& r) {
  using namespace kernel;
  if (r.probe & kProbeNoinstr) return "noinstr (no instrumentation of any kind)";
  if (r.dwarf && r.dwarf->inline_copy) {
    return StrCat("declared inline", r.dwarf->decl_file.empty() ? "" : " in " + r.dwarf->decl_file,
                  ": the kernel's inline implies notrace");
  }
  if (r.section.starts_with(".exit")) return "__exit code (__exit implies notrace)";
  if (r.probe & kProbeUnitWithoutFentry) {
    const std::string cu = r.dwarf && !r.dwarf->cu.empty() ? " " + r.dwarf->cu : "";
    return StrCat("no function of its compilation unit", cu,
                  " has one: the file is built without ftrace instrumentation (kernel/trace/, "
                  "CFLAGS_REMOVE_x.o = $(CC_FLAGS_FTRACE))");
  }
  if (r.dwarf && r.dwarf->decl_file.ends_with(".h")) {
    return StrCat("defined in a header (", r.dwarf->decl_file,
                  "): a header's functions are inline, and the kernel's inline implies notrace");
  }
  return "notrace, or assembly";
}

}  // namespace

bool ProbeVerdict::unit_without_fentry() const { return (bits & kernel::kProbeUnitWithoutFentry) != 0; }
unsigned ProbeVerdict::far_ftrace_sites() const { return kernel::FarFtraceSites(bits); }

std::string_view ProbeabilityName(Probeability p) {
  for (const auto& [k, n] : kNames) {
    if (k == p) return n;
  }
  return "unknown";
}

absl::StatusOr<Probeability> ParseProbeability(std::string_view name) {
  for (const auto& [k, n] : kNames) {
    if (n == name) return k;
  }
  return absl::InvalidArgumentError(StrCat("unknown probe verdict '", Excerpt(name), "'"));
}

ProbeVerdict ProbeVerdictOf(const TargetInfo& t, const store::SymbolRecord& r) {
  using namespace kernel;
  ProbeVerdict v;
  v.bits = r.probe;
  if (!IsCodeSymbolType(r.type)) {
    v.kind = Probeability::kNotCode;
    v.reason = StrCat("not code (a '", std::string(1, r.type), "' symbol)");
    return v;
  }
  const uint32_t b = r.probe;
  if (b & kProbeInit) {
    v.kind = Probeability::kInit;
    v.reason = r.module.empty() ? "init text (__init): freed after boot"
                                : "module init text (__init): freed once the module has loaded";
    return v;
  }
  const bool judged = (b & kProbeJudged) != 0;
  v.ftrace = judged && (b & kProbeFentryEntry);
  if (b & kProbeBlacklisted) {
    v.kind = Probeability::kBlacklisted;
    v.reason = (b & kProbeNoinstr) ? "on the kprobe blacklist (noinstr text)"
                                   : "on the kprobe blacklist (NOKPROBE_SYMBOL, .kprobes.text or .entry.text)";
    if (v.ftrace) v.reason += "; ftrace can still trace it";
    return v;
  }
  if (!judged) {
    v.reason = b == 0 ? "no verdict: the index predates probe verdicts, or has no table for it (run 'symdex index')"
                      : "no verdict: its fentry sites are unknown (no debug file or module file with __mcount_loc)";
    return v;
  }
  if (b & (kProbeFentryInside | kProbeBaseTraceable)) {
    v.kind = Probeability::kTraceable;
    v.kprobe = true;
    if (!(b & kProbeFentryInside)) {
      const std::string base = r.name.substr(0, r.name.find('.'));
      v.reason = StrCat("no fentry call of its own; accepted because '", base,
                        "' has one (the kernel checks a clone's base name); ftrace does not list it");
    } else if (!v.ftrace) {
      v.reason = "its fentry call is not at its entry: ftrace does not list it";
    } else if (b & kProbeEntryEndbr) {
      v.reason = "a probe at its entry lands at +0x4, past its ENDBR64 (IBT): kprobes/list shows NAME+0x4";
    }
    return v;
  }
  v.kind = Probeability::kNoFentry;
  v.kprobe = t.kprobe_events_on_notrace.value_or(false);
  v.reason = StrCat("no fentry call: ", NoFentryCause(r));
  if (v.kprobe) {
    v.reason += "; accepted anyway (CONFIG_KPROBE_EVENTS_ON_NOTRACE=y)";
  } else if (!t.kprobe_events_on_notrace) {
    v.reason += " (kernel config unknown: CONFIG_KPROBE_EVENTS_ON_NOTRACE assumed n)";
  }
  return v;
}

}  // namespace symdex::query
