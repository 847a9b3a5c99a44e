#include "server/query/probe_forms.h"

#include <fmt/core.h>

#include <algorithm>
#include <vector>

#include "server/common/enum_names.h"
#include "server/common/strings.h"
#include "server/ingest/kprobe_fetch.h"
#include "server/ingest/probe_arg.h"
#include "server/query/resolver.h"
#include "server/query/tracer_fetches.h"

namespace symdex::query {
namespace {

std::string Offset(uint64_t off) { return off ? StrCat("+", off) : ""; }

// The runtime address of the probe, when the target is this boot of a live host.
std::optional<uint64_t> LiveAddress(const Match& m, const TargetInfo& t) {
  if (t.kind != "live" || !m.instance.addr) return std::nullopt;
  return *m.instance.addr + m.offset;
}

std::string NoAddressWhy(const TargetInfo& t) {
  return t.kind == "live" ? "this caller is not shown the live kernel's addresses"
                          : StrCat("target '", t.name, "' is an offline kernel, whose addresses are not this boot's");
}

const char* kInlinedNote =
    "perf probe also probes every place the function is inlined (symdex inlined NAME lists them)";

absl::StatusOr<ProbeForm> Perf(const Match& m, const TargetInfo& t, const KprobeOptions& k, size_t same_decl_file) {
  const Instance& in = m.instance;
  std::string module = in.module.empty() ? "" : StrCat("-m ", in.module, " ");
  std::string loc;
  ProbeForm out;
  if (in.same_name_total == 1 || in.same_name_in_module == 1) {
    loc = in.name + Offset(m.offset);
    out.note = kInlinedNote;
  } else if (auto addr = LiveAddress(m, t)) {
    // perf compiles arguments by name from the DWARF of a function it finds by name; at an
    // absolute address it finds none ("Failed to add events", perf 6.1 in the tracers' guest).
    if (auto named = ingest::ParseNamedProbeArgs(k.fetchargs); named.ok() && named->has_value()) {
      return absl::FailedPreconditionError(StrCat(
          "perf probe has no form for this copy of ", in.name,
          " with arguments by name: its form is the copy's address, where perf compiles no arguments (it refuses "
          "them: \"Failed to add events\"); the kprobe_events line (symdex kprobe -n SPEC ARGS) carries them "
          "compiled for this copy"));
    }
    loc = fmt::format("0x{:x}", *addr);
    module.clear();
    out.address = addr;
    out.note = "an absolute address: it holds for this boot of this host only";
  } else if (in.dwarf && !in.dwarf->decl_file.empty() && same_decl_file == 1) {
    loc = StrCat(in.dwarf->has_function ? in.dwarf->function : in.name, "@", in.dwarf->decl_file, Offset(m.offset));
    out.note = StrCat("@FILE matches DW_AT_decl_file by path suffix; ", kInlinedNote);
  } else {
    return absl::FailedPreconditionError(StrCat(
        "perf probe has no form for exactly this copy of ", in.name, ": ",
        in.dwarf && !in.dwarf->decl_file.empty() ? StrCat("its copies share the declaration file ", in.dwarf->decl_file)
                                                 : std::string("no DWARF declaration file is indexed for it"),
        ", and ", NoAddressWhy(t), " (its address would name it on the live host)"));
  }
  if (k.ret) loc += "%return";
  std::string probe = StrCat(k.group.empty() ? "" : k.group + ":", ProbeEventName(in, k), "=", loc);
  for (const auto& a : k.fetchargs) probe += " " + a;
  out.text = StrCat("perf probe ", module, "-a '", probe, "'");
  return out;
}

absl::StatusOr<ProbeForm> Bpftrace(const Match& m, const TargetInfo& t, const KprobeOptions& k) {
  const Instance& in = m.instance;
  const char* kind = k.ret ? "kretprobe:" : "kprobe:";
  ProbeForm out;
  // kprobe:MOD:NAME is bpftrace 0.20's; 0.17 (Debian 12) takes a module copy by address only, and
  // takes kprobe:0xADDR (--unsafe) at exactly that address: both seen in a booted guest.
  const bool unique_in_module = !in.module.empty() && in.same_name_in_module == 1;
  const std::string module_form = StrCat(kind, in.module, ":", in.name, Offset(m.offset));
  if (in.same_name_total == 1) {
    out.text = StrCat(kind, in.name, Offset(m.offset));
  } else if (auto addr = LiveAddress(m, t)) {
    out.text = fmt::format("{}0x{:x}", kind, *addr);
    out.address = addr;
    out.note = "an address probe: bpftrace runs it with --unsafe; it holds for this boot of this host only";
    if (unique_in_module) out.note += StrCat("; bpftrace 0.20 or later also takes ", module_form, ", for any boot");
  } else if (unique_in_module) {
    out.text = module_form;
    out.note =
        "kprobe:MODULE:FUNCTION needs bpftrace 0.20 or later (0.17, Debian 12's, refuses it: \"kprobe probe "
        "type requires 1 argument\"); there, ask the live host for kprobe:0xADDR";
  } else {
    return absl::FailedPreconditionError(
        StrCat("bpftrace has no form for exactly this copy of ", in.name, ": the name is not unique",
               in.module.empty() ? " in vmlinux" : StrCat(" inside ", in.module), ", and ", NoAddressWhy(t),
               " (kprobe:0xADDR would name it on the live host)"));
  }
  return out;
}

// cilium/ebpf as Debian 12 packages it (0.9.1): link.Kprobe(SYMBOL, prog, &link.KprobeOptions{Offset:
// N}) opens the kprobe PMU on a kernel symbol (letters, digits, _ and .) plus an offset, which the
// kernel resolves as kprobe_events resolves SYMBOL+N. A unique name is itself; a vmlinux copy is
// the anchor (_text, or _stext) plus its distance from it, KASLR-proof as kprobe_events' _text+N;
// a module's copy of a name other copies share has no symbol of its own to give.
absl::StatusOr<ProbeForm> Cilium(const Match& m, const KprobeOptions& k) {
  const Instance& in = m.instance;
  std::string symbol;
  uint64_t offset = m.offset;
  if (in.same_name_total == 1) {
    symbol = in.name;
  } else if (in.module.empty() && in.text_offset) {
    symbol = in.text_anchor;
    offset += *in.text_offset;
  } else {
    return absl::FailedPreconditionError(StrCat(
        "cilium/ebpf (0.9.1, Debian 12's) names a kprobe by a kernel symbol alone: no MOD:NAME, no address; ", in.name,
        " has ", in.same_name_total, " copies and this one is in ", in.module.empty() ? "vmlinux" : in.module,
        ": the kprobe_events line (symdex kprobe -n) and libbpf's address form (a live host) reach it"));
  }
  const char* fn = k.ret ? "Kretprobe" : "Kprobe";
  ProbeForm out;
  out.text = offset == 0 ? fmt::format("link.{}(\"{}\", prog, nil)", fn, symbol)
                         : fmt::format("link.{}(\"{}\", prog, &link.KprobeOptions{{Offset: {}}})", fn, symbol, offset);
  if (symbol != in.name) {
    out.note =
        fmt::format("{}+{} is this copy of {} (as kprobe_events' {}+{}); cilium/ebpf 0.9.1 has no address option",
                    symbol, offset, in.name, symbol, offset);
  }
  return out;
}

// A BPF kprobe_multi link (libbpf bpf_program__attach_kprobe_multi_opts): an fprobe, at function
// entries only, through ftrace (kernel/trace/bpf_trace.c). A unique name is its own pattern;
// a copy of a shared name is its address (`addrs`, which the kernel turns into the copy's ftrace
// site), on a live target. A kernel without CONFIG_FPROBE has no such link (EOPNOTSUPP).
absl::StatusOr<ProbeForm> KprobeMulti(const Match& m, const TargetInfo& t, const KprobeOptions& k) {
  const Instance& in = m.instance;
  if (!k.fetchargs.empty()) {
    return absl::FailedPreconditionError(
        "kprobe_multi: its program reads the arguments from ctx itself (bpf_get_func_ip, PT_REGS_PARMn): no fetch "
        "args");
  }
  if (t.fprobe && !*t.fprobe) {
    return absl::FailedPreconditionError(StrCat(
        "kprobe_multi: the kernel is built without CONFIG_FPROBE (", t.kernel_config,
        "): bpf_program__attach_kprobe_multi_opts fails there (EOPNOTSUPP); --format libbpf attaches a kprobe to "
        "this copy"));
  }
  if (m.offset != 0) return absl::FailedPreconditionError("kprobe_multi: at a function's entry only: no +OFFSET");
  if (in.verdict.known() && !in.verdict.ftrace) {
    return absl::FailedPreconditionError(
        StrCat("kprobe_multi: an fprobe attaches through ftrace, which does not list this copy of ", in.name,
               " (its verdict: ", ProbeabilityName(in.verdict.kind), "); --format libbpf attaches a kprobe"));
  }
  const char* ret = k.ret ? "true" : "false";
  ProbeForm out;
  const std::string config = t.fprobe ? "" : "; it needs CONFIG_FPROBE, which no indexed kernel config tells";
  if (in.same_name_total == 1) {
    out.text = fmt::format(
        "LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, .retprobe = {}); "
        "bpf_program__attach_kprobe_multi_opts(prog, \"{}\", &opts);",
        ret, in.name);
    if (!config.empty()) out.note = config.substr(2);
    return out;
  }
  if (auto addr = LiveAddress(m, t)) {
    out.address = addr;
    // The array declared on its own: a compound literal inside LIBBPF_OPTS lives only as long as
    // the macro's statement expression, so .addrs would point at a dead array when libbpf reads it
    // (the tracers' guest saw the kernel refuse such a link with EINVAL).
    out.text = fmt::format(
        "const unsigned long addrs[] = {{0x{:x}}}; LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, .addrs = addrs, "
        ".cnt = 1, .retprobe = {}); bpf_program__attach_kprobe_multi_opts(prog, NULL, &opts);",
        *addr, ret);
    out.note = StrCat("an absolute address holds for this boot of this host only", config);
    return out;
  }
  return absl::FailedPreconditionError(StrCat("kprobe_multi names one copy of ", in.name, " by its address, and ",
                                              NoAddressWhy(t), ": index the live host (symdex index) and ask there"));
}

// fentry/fexit by name: libbpf's SEC("fentry/NAME") (fexit/ with -r), when the name reaches this
// copy (query/fentry_verdict.h); a trampoline has no offset and no fetch args (its program reads
// the arguments BTF types). bpftrace's kfunc names the BTF it looks in, vmlinux or the module:
// 0.17 refuses a bare kfunc:NAME as ambiguous when a loaded module's BTF has NAME too.
absl::StatusOr<ProbeForm> Fentry(const Match& m, const KprobeOptions& k) {
  const Instance& in = m.instance;
  if (in.fentry.kind != FentryReach::kReaches) {
    return absl::FailedPreconditionError(StrCat(
        "fentry: no form for this copy (", FentryReachName(in.fentry.kind), "): ",
        in.fentry.reason.empty() ? "no verdict (index it again with its debug or module files)" : in.fentry.reason));
  }
  if (m.offset != 0) {
    return absl::FailedPreconditionError("fentry: a trampoline runs at the function's entry only: no +OFFSET");
  }
  if (!k.fetchargs.empty()) {
    return absl::FailedPreconditionError(
        "fentry: the program reads the function's arguments by position, typed by BTF: no fetch args");
  }
  const char* kind = k.ret ? "fexit" : "fentry";
  return ProbeForm{.text = StrCat(kind, "/", in.name),
                   .note = StrCat("libbpf SEC(\"", kind, "/", in.name, "\"); bpftrace ",
                                  k.ret ? "kretfunc:" : "kfunc:", in.module.empty() ? "vmlinux" : in.module, ":",
                                  in.name, "; cilium/ebpf ProgramSpec{AttachType: ebpf.",
                                  k.ret ? "AttachTraceFExit" : "AttachTraceFEntry", ", AttachTo: \"", in.name, "\"}")};
}

absl::StatusOr<ProbeForm> Libbpf(const Match& m, const TargetInfo& t, const KprobeOptions& k) {
  const Instance& in = m.instance;
  ProbeForm out;
  if (auto addr = LiveAddress(m, t)) {
    out.address = addr;
    out.text = fmt::format(
        "LIBBPF_OPTS(bpf_kprobe_opts, opts, .offset = 0x{:x}, .retprobe = {}); "
        "bpf_program__attach_kprobe_opts(prog, NULL, &opts);",
        *addr, k.ret ? "true" : "false");
    out.note = fmt::format(
        "cilium/ebpf: link.{}(\"\", prog, &link.KprobeOptions{{Address: 0x{:x}}}); an absolute address holds for "
        "this boot of this host only",
        k.ret ? "Kretprobe" : "Kprobe", *addr);
    return out;
  }
  if (in.same_name_total == 1 && m.offset == 0) {
    out.text = fmt::format("bpf_program__attach_kprobe(prog, {}, \"{}\");", k.ret ? "true" : "false", in.name);
    return out;
  }
  if (in.same_name_total == 1) {  // an offset into the function, which libbpf adds to the name's address
    out.text = fmt::format(
        "LIBBPF_OPTS(bpf_kprobe_opts, opts, .offset = {}, .retprobe = false); "
        "bpf_program__attach_kprobe_opts(prog, \"{}\", &opts);",
        m.offset, in.name);
    out.note =
        fmt::format("cilium/ebpf: link.Kprobe(\"{}\", prog, &link.KprobeOptions{{Offset: {}}})", in.name, m.offset);
    return out;
  }
  return absl::FailedPreconditionError(StrCat("libbpf attaches exactly one copy of ", in.name, " by its address, and ",
                                              NoAddressWhy(t), ": index the live host (symdex index) and ask there"));
}

}  // namespace

absl::StatusOr<std::string> KprobeLine(const Match& m, const KprobeOptions& opts) {
  const Instance& in = m.instance;
  const bool has_address_form = (in.module.empty() && in.text_offset) || in.addr;
  if (!(HasControlByte(in.name) || HasControlByte(in.module)) || !has_address_form) {
    return KprobeDefinition(m, opts);
  }
  // Not unique by name, anywhere: KprobeDefinition takes the address form.
  Match by_address = m;
  by_address.instance.same_name_total = std::max<int64_t>(2, in.same_name_total);
  by_address.instance.same_name_in_module = std::max<int64_t>(2, in.same_name_in_module);
  KprobeOptions named = opts;
  named.event = ProbeEventName(in, opts);
  return KprobeDefinition(by_address, named);
}

absl::StatusOr<bool> ProbeArgsAreNamed(const std::vector<std::string>& fetchargs) {
  ASSIGN_OR_RETURN(auto named, ingest::ParseNamedProbeArgs(fetchargs));
  return named.has_value();
}

std::vector<std::string> TracerFetchArgs(TracerSyntax syntax, const std::vector<std::string>& written,
                                         std::string_view kprobe) {
  return syntax == TracerSyntax::kPerf ? written : ingest::KprobeLineFetchArgs(kprobe);
}

namespace {
constexpr std::array<EnumName<TracerSyntax>, 7> kTracerSyntaxNames = {{
    {TracerSyntax::kKprobeEvents, "kprobe_events"},
    {TracerSyntax::kPerf, "perf"},
    {TracerSyntax::kBpftrace, "bpftrace"},
    {TracerSyntax::kLibbpf, "libbpf"},
    {TracerSyntax::kFentry, "fentry"},
    {TracerSyntax::kCilium, "cilium"},
    {TracerSyntax::kKprobeMulti, "kprobe_multi"},
}};
}  // namespace

absl::StatusOr<TracerSyntax> TracerSyntaxArg(std::string_view s) {
  if (auto t = ValueIn(kTracerSyntaxNames, s)) return *t;
  return absl::InvalidArgumentError(StrCat(
      "format '", Excerpt(s, 40), "': expected kprobe_events, perf, bpftrace, libbpf, cilium, kprobe_multi or fentry"));
}

std::string_view TracerSyntaxName(TracerSyntax s) { return NameIn(kTracerSyntaxNames, s, "?"); }

absl::StatusOr<ProbeForm> FormFor(TracerSyntax syntax, const Match& m, const TargetInfo& t, const KprobeOptions& opts,
                                  size_t same_decl_file) {
  if (syntax == TracerSyntax::kKprobeEvents) {
    ASSIGN_OR_RETURN(std::string line, KprobeLine(m, opts));
    return ProbeForm{.text = std::move(line)};
  }
  if (syntax == TracerSyntax::kFentry) return Fentry(m, opts);
  if (syntax == TracerSyntax::kKprobeMulti) return KprobeMulti(m, t, opts);
  RETURN_IF_ERROR(CheckReturnProbe(m, opts));
  if (syntax == TracerSyntax::kPerf) return Perf(m, t, opts, same_decl_file);
  ASSIGN_OR_RETURN(ProbeForm out, syntax == TracerSyntax::kBpftrace ? Bpftrace(m, t, opts)
                                  : syntax == TracerSyntax::kCilium ? Cilium(m, opts)
                                                                    : Libbpf(m, t, opts));
  if (opts.fetchargs.empty()) return out;
  ASSIGN_OR_RETURN(auto args, ParseFetchArgs(opts.fetchargs));
  const KernelArch* arch = ArchOfMachine(t.machine);
  if (arch == nullptr) {
    return absl::FailedPreconditionError(StrCat("target '", t.name, "' has no known architecture (ELF machine ",
                                                t.machine, "), whose registers ", TracerSyntaxName(syntax),
                                                " would name: index it again"));
  }
  if (syntax == TracerSyntax::kBpftrace) {
    ASSIGN_OR_RETURN(out.text, BpftraceProgram(out.text, args, *arch));
  } else {
    ASSIGN_OR_RETURN(std::string line, KprobeLine(m, opts));
    ASSIGN_OR_RETURN(out.fetch, CFetchStruct(ProbeEventName(m.instance, opts), line, args, *arch));
  }
  return out;
}

}  // namespace symdex::query
