// The thought and the answer of a thinking model's output, with tags split over
// pieces, never sent, and the template's newlines around them trimmed.
#include "server/reasoning_splitter.h"

#include <gtest/gtest.h>

namespace zinc::server {
namespace {

SplitText feed(ReasoningSplitter& s, const std::vector<std::string>& pieces) {
  SplitText all;
  for (const auto& p : pieces) {
    SplitText t = s.push(p);
    all.reasoning += t.reasoning;
    all.content += t.content;
  }
  SplitText t = s.flush();
  all.reasoning += t.reasoning;
  all.content += t.content;
  return all;
}

TEST(ReasoningSplitter, PromptOpenedTheThought) {
  ReasoningSplitter s(/*in_reasoning=*/true, /*may_open=*/false);
  const SplitText t = feed(s, {"\nLet me", " think.\n", "\n</th", "ink>\n\n", "The answer", " is 4."});
  EXPECT_EQ(t.reasoning, "Let me think.");
  EXPECT_EQ(t.content, "The answer is 4.");
}

TEST(ReasoningSplitter, ModelOpensTheThoughtItself) {
  ReasoningSplitter s(false, /*may_open=*/true);
  const SplitText t = feed(s, {"<th", "ink>\nhmm</think>", "\n\nok"});
  EXPECT_EQ(t.reasoning, "hmm");
  EXPECT_EQ(t.content, "ok");
}

TEST(ReasoningSplitter, NoThoughtWhenTheReplyStartsOtherwise) {
  ReasoningSplitter s(false, true);
  const SplitText t = feed(s, {"<b>", "bold</think>"});
  EXPECT_EQ(t.reasoning, "");
  EXPECT_EQ(t.content, "<b>bold</think>");
}

TEST(ReasoningSplitter, NewlinesInsideTheThoughtStay) {
  ReasoningSplitter s(true, false);
  const SplitText t = feed(s, {"a\n", "\n", "b\n", "</think>c"});
  EXPECT_EQ(t.reasoning, "a\n\nb");
  EXPECT_EQ(t.content, "c");
}

TEST(ReasoningSplitter, UnclosedThoughtIsAllReasoning) {
  ReasoningSplitter s(true, false);
  const SplitText t = feed(s, {"still thinking </thi"});
  EXPECT_EQ(t.reasoning, "still thinking </thi");
  EXPECT_EQ(t.content, "");
  EXPECT_TRUE(s.in_reasoning());
}

TEST(ReasoningSplitter, PlainModeIsAllContent) {
  ReasoningSplitter s(false, false);
  const SplitText t = feed(s, {"<think>x</think>y"});
  EXPECT_EQ(t.content, "<think>x</think>y");
}

}  // namespace
}  // namespace zinc::server
