// The help topics (client/help_topics.h) against what the CLI prints: every value the VERDICT
// column can take is explained by `symdex help verdicts` and each explained value can be shown;
// every exit code the verbs return is in `symdex help exit-codes` and in --help's footer.
#include "client/help_topics.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "client/cli_common.h"

namespace symdex::cli {
namespace {

using query::Probeability;

constexpr Probeability kKinds[] = {Probeability::kUnknown, Probeability::kTraceable,   Probeability::kNoFentry,
                                   Probeability::kInit,    Probeability::kBlacklisted, Probeability::kNotCode};

TEST(HelpTopics, EveryVerdictTheColumnShowsIsExplainedAndEveryExplainedOneIsShown) {
  std::set<std::string> shown;
  for (Probeability kind : kKinds) {
    for (bool kprobe : {false, true}) {
      for (bool ftrace : {false, true}) {
        query::ProbeVerdict v;
        v.kind = kind;
        v.kprobe = kprobe;
        v.ftrace = ftrace;
        shown.insert(VerdictText(v));
      }
    }
  }
  std::set<std::string> explained;
  for (const auto& m : VerdictMeanings()) {
    EXPECT_TRUE(explained.insert(std::string(m.shown)).second) << "explained twice: " << m.shown;
    EXPECT_FALSE(m.meaning.empty()) << m.shown;
  }
  EXPECT_EQ(shown, explained);
  const std::string text = HelpTopic("verdicts").value_or("");
  for (const auto& m : VerdictMeanings()) {
    EXPECT_NE(text.find("  " + std::string(m.shown) + " "), std::string::npos) << m.shown;
  }
}

TEST(HelpTopics, EveryExitCodeIsExplainedInTheTopicAndTheFooter) {
  const std::string text = HelpTopic("exit-codes").value_or("");
  const std::string footer = ExitCodesFooter();
  for (int code : {kFound, kNotFound, kAmbiguous, kEnvError, kRefused}) {
    EXPECT_NE(text.find("\n  " + std::to_string(code) + "  "), std::string::npos) << code;
    EXPECT_NE(footer.find(" " + std::to_string(code) + " "), std::string::npos) << code;
  }
}

TEST(HelpTopics, EveryListedTopicHasATextAndNoOtherDoes) {
  for (std::string_view t : HelpTopics()) EXPECT_TRUE(HelpTopic(t).has_value()) << t;
  EXPECT_FALSE(HelpTopic("frobnicate").has_value());
  EXPECT_FALSE(HelpTopic("").has_value());
}

TEST(HelpTopics, LinesFitAHundredColumns) {
  for (std::string_view t : HelpTopics()) {
    const std::string text = *HelpTopic(t);
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      EXPECT_LE(end - start, 100u) << t << ": " << text.substr(start, end - start);
      start = end + 1;
    }
  }
}

}  // namespace
}  // namespace symdex::cli
