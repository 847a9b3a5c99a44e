// `symdex help TOPIC`: the longer texts beside --help. Each is declared once, here, from the tables
// the CLI itself prints by (the exit codes, the VERDICT column); docs/reference/TOPIC.md quotes
// the text line for line and the docs check (tests/docs/check_docs.py) compares the two.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/query/answers.h"

namespace symdex::cli {

// The topics, in the order `symdex help --help` lists them.
std::span<const std::string_view> HelpTopics();

// The topic's text, or nullopt for a topic that does not exist.
std::optional<std::string> HelpTopic(std::string_view topic);

// `symdex --help`'s last lines: every exit code with a few words each.
std::string ExitCodesFooter();

// The VERDICT column of which, dups and inlined: the kind, with "(kprobe)" where kprobe events
// accept a function ftrace does not list.
std::string VerdictText(const query::ProbeVerdict& v);

// Every value the VERDICT column can show, with what it means (`symdex help verdicts`).
struct VerdictMeaning {
  std::string_view shown;
  std::string_view meaning;
};
std::span<const VerdictMeaning> VerdictMeanings();

}  // namespace symdex::cli
