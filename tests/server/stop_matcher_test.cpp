// Stop strings: found across token boundaries, never sent, the earliest one wins,
// and text that only looked like a stop's beginning comes out once it diverges.
#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace zinc::server {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out;
}

TEST(StopMatcher, StopSplitOverPiecesIsHeldBackAndDropped) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(m.push("Hello <|"), "Hello ");  // "<|" could begin the stop
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("en"), "");
  EXPECT_EQ(m.push("d|> and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("later"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, DivergingPrefixIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST"), "");
  EXPECT_EQ(m.push("ART"), "START");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("S"), "");
  EXPECT_EQ(m.flush(), "S");  // end of generation: what was held is text
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(feed(m, {"hello world"}), "hel");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, StopAtTheStartGivesNothing) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(feed(m, {"\n", "\nrest"}), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, NoStopsPassesEverythingAndEmptyStopsAreIgnored) {
  StopMatcher m({"", ""});
  EXPECT_EQ(feed(m, {"a", "b", ""}), "ab");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, MultibyteStopAndOverlappingCandidates) {
  StopMatcher m({"日本語", "aab"});
  EXPECT_EQ(m.push("xa"), "x");
  EXPECT_EQ(m.push("a"), "");   // "aa" is still a prefix of "aab"
  EXPECT_EQ(m.push("a"), "a");  // "aaa": the first 'a' can no longer start it
  EXPECT_EQ(m.push("日本"), "aa");
  EXPECT_EQ(m.push("語です"), "");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace zinc::server
