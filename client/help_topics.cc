#include "client/help_topics.h"

#include <fmt/core.h>

#include <array>

#include "client/cli_common.h"

namespace symdex::cli {
namespace {

constexpr char kSpecHelp[] = R"(Function specs name one function instance. Accepted by resolve, kprobe, ftrace-index.

  SPEC     := ADDRESS | [MOD:]NAME[@WHERE][#CU][+OFFSET]
  ADDRESS  := 0xHEX                    an absolute address (live targets): the function holding it
  MOD:     := a module name, or vmlinux for the core kernel
  WHERE    := PATH[:LINE]              source file, a suffix on whole path components, matched
                                       against the line-table file at the symbol (what addr2line
                                       prints), the function's declaration, and its compilation
                                       unit; LINE matches the symbol's line or the declaration's
                                       line
            | KAS_ALIAS                kas_alias's form: drivers_pnp_card_c_186
            | 0xHEX | SECTION+0xHEX    the instance's own address (offline modules: section offset)
  #CU      := compilation unit (path suffix): tells apart copies of a header static inline and the
              two copies of an #included .c file, which share one file:line
  +OFFSET  := decimal or 0xHEX bytes into the function; _text+N is accepted too

Examples
  name_show                              only if the name is unique
  uio:name_show                          the copy in module uio
  name_show@drivers/pnp/card.c:186       by source location ...
  name_show@card.c                       ... or any unambiguous suffix of it
  name_show@drivers_pnp_card_c_186       kas_alias's alias
  paravirt_read_msr@paravirt.h:188#arch/x86/events/core.c     a header inline, by CU
  load_elf_binary#compat_binfmt_elf.c    the #included copy
  tcp_v4_rcv+0x10   _text+6817776   0xffffffff816807f0

Every instance has a canonical spec: the shortest that resolves to exactly it (resolve prints it,
and lists every candidate's when a spec is ambiguous).
)";

struct ExitMeaning {
  Exit code;
  std::string_view brief;    // symdex --help's footer
  std::string_view meaning;  // symdex help exit-codes
};

constexpr ExitMeaning kExitMeanings[] = {
    {kFound, "found/success", "found / success"},
    {kNotFound, "not found", "not found: no such symbol, no duplicates, an address no symbol holds"},
    {kAmbiguous, "ambiguous or usage error",
     "ambiguous, or a usage error: an unknown verb, flag or --target, several targets and none chosen, "
     "a malformed spec such as name_show@"},
    {kEnvError, "environment or input error (no index, unreadable or malformed input)",
     "environment or input error: no index; a missing, unreadable, malformed or truncated-looking input "
     "file; a damaged index; addresses hidden by kptr_restrict; an absolute address the daemon refuses; a "
     "daemon call past --timeout"},
    {kRefused, "refused: the kernel would refuse the probe (kprobe, ftrace-index)",
     "refused (kprobe, ftrace-index): the kernel would refuse that function, by its probe verdict (no "
     "fentry call, init text, the kprobe blacklist; --force prints it anyway), or the tracer asked for "
     "has no form that names exactly that copy (kprobe --format), or an argument by name cannot be fetched at "
     "the probe's address (kprobe)"},
};

constexpr VerdictMeaning kVerdictMeanings[] = {
    {"traceable", "kprobe events accept it and ftrace lists it"},
    {"traceable(kprobe)",
     "kprobe events accept it, ftrace does not list it (a .cold or .part clone whose base function has "
     "the fentry call)"},
    {"no-fentry", "no fentry call: kprobe events refuse it and ftrace does not list it"},
    {"no-fentry(kprobe)",
     "no fentry call, but this kernel's config lets kprobe events probe it all the same "
     "(CONFIG_KPROBE_EVENTS_ON_NOTRACE=y, or kprobes not on ftrace); ftrace does not list it"},
    {"init", "init text, freed after boot (a module's, after its load): refused"},
    {"blacklisted", "on the kprobe blacklist: refused (ftrace may still list it)"},
    {"not-code", "not a function"},
    {"unknown", "no table to judge by: no debug or module file, or an index made before verdicts (re-index)"},
};

constexpr size_t kWidth = 100;

// TEXT as lines of at most kWidth columns, the first after FIRST, the others indented to its width.
std::string Hanging(std::string_view first, std::string_view text) {
  std::string out(first);
  const std::string indent(first.size(), ' ');
  size_t col = first.size();
  while (!text.empty()) {
    size_t sp = text.find(' ');
    std::string_view word = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view() : text.substr(sp + 1);
    if (col > first.size() && col + 1 + word.size() > kWidth) {
      out += "\n" + indent;
      col = indent.size();
    } else if (col > first.size()) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
  }
  return out + "\n";
}

std::string ExitCodesHelp() {
  std::string out = "symdex's exit codes, the same for every verb (each verb's --help says what they mean for it):\n\n";
  for (const auto& e : kExitMeanings) out += Hanging(fmt::format("  {}  ", static_cast<int>(e.code)), e.meaning);
  return out;
}

std::string VerdictsHelp() {
  std::string out =
      "The VERDICT column (which, dups, inlined): what the kernel does with a kprobe event on that function\n"
      "(kprobe_events, perf probe, bpftrace kprobe:, BPF kprobe links) and whether ftrace lists it\n"
      "(available_filter_functions), judged from the kernel's own tables in its debug and module files.\n\n";
  for (const auto& v : kVerdictMeanings) out += Hanging(fmt::format("  {:<19}", v.shown), v.meaning);
  out +=
      "\nThe reason follows on the next line. In --json: \"verdict\": {\"kind\", \"kprobe\", \"ftrace\",\n"
      "\"ftrace_lines\", \"reason\"}, the kind being the name before any parenthesis; ftrace_lines\ncounts the "
      "lines of available_filter_functions under its name for it (its own site's and any __weak\nbody's after "
      "it). kprobe and ftrace-index refuse what the kernel would refuse (exit 4) and\nname probe-able places; "
      "--force overrides. dups --traceable keeps the instances kprobe events\naccept.\n";
  return out;
}

}  // namespace

std::span<const std::string_view> HelpTopics() {
  static constexpr std::array<std::string_view, 3> kTopics = {"specs", "verdicts", "exit-codes"};
  return kTopics;
}

std::optional<std::string> HelpTopic(std::string_view topic) {
  if (topic == "specs") return std::string(kSpecHelp);
  if (topic == "verdicts") return VerdictsHelp();
  if (topic == "exit-codes") return ExitCodesHelp();
  return std::nullopt;
}

std::string ExitCodesFooter() {
  std::string codes;
  for (const auto& e : kExitMeanings) {
    codes += fmt::format("{}{} {}", codes.empty() ? "" : ", ", static_cast<int>(e.code), e.brief);
  }
  std::string out = Hanging("Exit codes: ", codes + ".");
  out.pop_back();  // CLI11 ends the footer's line
  return out;
}

std::string VerdictText(const query::ProbeVerdict& v) {
  std::string s(query::ProbeabilityName(v.kind));
  if (v.kind == query::Probeability::kTraceable && !v.ftrace) s += "(kprobe)";
  if (v.kind == query::Probeability::kNoFentry && v.kprobe) s += "(kprobe)";
  return s;
}

std::span<const VerdictMeaning> VerdictMeanings() { return kVerdictMeanings; }

void AddHelpCommand(CLI::App& app, int& exit_code) {
  auto topic = std::make_shared<std::string>();
  CLI::App* help = app.add_subcommand("help", "Longer help on a topic: 'symdex help specs'");
  help->add_option("TOPIC", *topic, "The topic")
      ->required()
      ->check(CLI::IsMember(std::vector<std::string>(HelpTopics().begin(), HelpTopics().end())));
  help->callback([&exit_code, topic] {
    fmt::print("{}", HelpTopic(*topic).value_or(""));
    exit_code = kFound;
  });
}

}  // namespace symdex::cli
