#include "server/query/probe_forms.h"

#include <fmt/core.h>

#include <vector>

#include "server/common/strings.h"

namespace symdex::query {
namespace {

// The parts of a kprobe_events line KprobeDefinition wrote: "p:GRP/EVENT TARGET [ARG...]".
struct KprobeLine {
  bool ret = false;
  std::string group, event;
  std::vector<std::string> args;
};

absl::StatusOr<KprobeLine> SplitKprobeLine(const std::string& line) {
  std::vector<std::string_view> words = Split(line, ' ', /*skip_empty=*/true);
  if (words.size() < 2 || words[0].size() < 3 || (words[0][0] != 'p' && words[0][0] != 'r') || words[0][1] != ':') {
    return absl::InternalError(StrCat("not a kprobe_events line: '", line, "'"));
  }
  KprobeLine out;
  out.ret = words[0][0] == 'r';
  std::string_view ev = words[0].substr(2);
  size_t slash = ev.find('/');
  out.group = std::string(slash == std::string_view::npos ? "" : ev.substr(0, slash));
  out.event = std::string(slash == std::string_view::npos ? ev : ev.substr(slash + 1));
  for (size_t i = 2; i < words.size(); ++i) out.args.emplace_back(words[i]);
  return out;
}

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

absl::StatusOr<ProbeForm> Perf(const Match& m, const TargetInfo& t, const KprobeLine& k, size_t same_decl_file) {
  const Instance& in = m.instance;
  std::string module = in.module.empty() ? "" : StrCat("-m ", in.module, " ");
  std::string loc;
  ProbeForm out;
  if (in.same_name_total == 1 || in.same_name_in_module == 1) {
    loc = in.name + Offset(m.offset);
    out.note = kInlinedNote;
  } else if (auto addr = LiveAddress(m, t)) {
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
  std::string probe = StrCat(k.group.empty() ? "" : k.group + ":", k.event, "=", loc);
  for (const auto& a : k.args) probe += " " + a;
  out.text = StrCat("perf probe ", module, "-a '", probe, "'");
  return out;
}

absl::StatusOr<ProbeForm> Bpftrace(const Match& m, const TargetInfo& t, const KprobeLine& k) {
  const Instance& in = m.instance;
  const char* kind = k.ret ? "kretprobe:" : "kprobe:";
  ProbeForm out;
  if (in.same_name_total == 1) {
    out.text = StrCat(kind, in.name, Offset(m.offset));
  } else if (!in.module.empty() && in.same_name_in_module == 1) {
    out.text = StrCat(kind, in.module, ":", in.name, Offset(m.offset));
  } else if (auto addr = LiveAddress(m, t)) {
    out.text = fmt::format("{}0x{:x}", kind, *addr);
    out.address = addr;
    out.note = "an address probe: bpftrace runs it with --unsafe; it holds for this boot of this host only";
  } else {
    return absl::FailedPreconditionError(
        StrCat("bpftrace has no form for exactly this copy of ", in.name, ": the name is not unique",
               in.module.empty() ? " in vmlinux" : StrCat(" inside ", in.module), ", and ", NoAddressWhy(t),
               " (kprobe:0xADDR would name it on the live host)"));
  }
  return out;
}

absl::StatusOr<ProbeForm> Libbpf(const Match& m, const TargetInfo& t, const KprobeLine& k) {
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
  return absl::FailedPreconditionError(StrCat("libbpf attaches exactly one copy of ", in.name, " by its address, and ",
                                              NoAddressWhy(t), ": index the live host (symdex index) and ask there"));
}

}  // namespace

absl::StatusOr<TracerSyntax> TracerSyntaxArg(std::string_view s) {
  for (TracerSyntax t :
       {TracerSyntax::kKprobeEvents, TracerSyntax::kPerf, TracerSyntax::kBpftrace, TracerSyntax::kLibbpf}) {
    if (s == TracerSyntaxName(t)) return t;
  }
  return absl::InvalidArgumentError(
      StrCat("format '", Excerpt(s, 40), "': expected kprobe_events, perf, bpftrace or libbpf"));
}

std::string_view TracerSyntaxName(TracerSyntax s) {
  switch (s) {
    case TracerSyntax::kKprobeEvents:
      return "kprobe_events";
    case TracerSyntax::kPerf:
      return "perf";
    case TracerSyntax::kBpftrace:
      return "bpftrace";
    case TracerSyntax::kLibbpf:
      return "libbpf";
  }
  return "?";
}

absl::StatusOr<ProbeForm> FormFor(TracerSyntax syntax, const Match& m, const TargetInfo& t,
                                  const std::string& kprobe_line, size_t same_decl_file) {
  if (syntax == TracerSyntax::kKprobeEvents) return ProbeForm{.text = kprobe_line};
  ASSIGN_OR_RETURN(KprobeLine k, SplitKprobeLine(kprobe_line));
  if (syntax == TracerSyntax::kPerf) return Perf(m, t, k, same_decl_file);
  if (!k.args.empty()) {
    return absl::InvalidArgumentError(StrCat(TracerSyntaxName(syntax),
                                             " takes no fetch args in the probe: read the arguments in the "
                                             "program (bpftrace: arg0.., libbpf: PT_REGS_PARM1(ctx)..)"));
  }
  if (syntax == TracerSyntax::kBpftrace) return Bpftrace(m, t, k);
  return Libbpf(m, t, k);
}

}  // namespace symdex::query
