// gpt-oss replies in harmony split into reasoning, content and tool calls: the same
// result whether the reply comes whole, in two pieces cut anywhere, or one byte at a
// time; tags never reach the client and cuts fall only between characters.
// (tests/server/harmony_reply_stream_test.cpp: the server's whole pipeline on tokens.)
#include "text/harmony_splitter.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/stream_decoder.h"

namespace zinc::text {
namespace {

using nlohmann::json;

struct Fed {
  HarmonyText all;
  std::vector<std::string> pieces;  // every non-empty reasoning / content piece sent
};

void add(Fed& f, HarmonyText t) {
  for (const std::string* s : {&t.reasoning, &t.content})
    if (!s->empty()) f.pieces.push_back(*s);
  f.all.reasoning += t.reasoning;
  f.all.content += t.content;
  for (auto& c : t.calls) f.all.calls.push_back(std::move(c));
}

Fed feed(const std::vector<std::string>& pieces, bool tools = true) {
  HarmonySplitter s(tools);
  Fed f;
  for (const auto& p : pieces) add(f, s.push(p));
  add(f, s.flush());
  return f;
}

// Whole, then in two pieces at every cut, then one byte at a time: all equal.
HarmonyText split_every_way(const std::string& reply, bool tools = true) {
  const HarmonyText whole = feed({reply}, tools).all;
  auto same = [&](const HarmonyText& t, const std::string& how) {
    EXPECT_EQ(t.reasoning, whole.reasoning) << how;
    EXPECT_EQ(t.content, whole.content) << how;
    ASSERT_EQ(t.calls.size(), whole.calls.size()) << how;
    for (size_t i = 0; i < t.calls.size(); ++i) {
      EXPECT_EQ(t.calls[i].name, whole.calls[i].name) << how;
      EXPECT_EQ(t.calls[i].arguments, whole.calls[i].arguments) << how;
    }
  };
  for (size_t cut = 0; cut <= reply.size(); ++cut)
    same(feed({reply.substr(0, cut), reply.substr(cut)}, tools).all, "cut at " + std::to_string(cut));
  std::vector<std::string> bytes;
  for (char c : reply) bytes.emplace_back(1, c);
  same(feed(bytes, tools).all, "byte by byte");
  return whole;
}

bool valid_utf8(const std::string& s) {
  size_t held = 0;
  return utf8_complete_prefix(s, held) == s && held == 0;
}

TEST(HarmonySplitter, AnalysisIsReasoningFinalIsContent) {
  const HarmonyText t = split_every_way(
      "<|channel|>analysis<|message|>User says hi. Reply.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?");
  EXPECT_EQ(t.reasoning, "User says hi. Reply.");
  EXPECT_EQ(t.content, "Hello! How can I help?");
  EXPECT_TRUE(t.calls.empty());
}

TEST(HarmonySplitter, RoleWrittenAgainIsPartOfTheHeader) {
  const HarmonyText t = split_every_way("<|start|>assistant<|channel|>final<|message|>Hi.");
  EXPECT_EQ(t.content, "Hi.");
}

TEST(HarmonySplitter, TagsThatEndGenerationAreDroppedToo) {
  // <|return|> and <|call|> end generation, so the server never sees them; when they
  // do come (completions-style text), they end the message like <|end|>.
  const HarmonyText t = split_every_way("<|channel|>final<|message|>Done.<|return|>");
  EXPECT_EQ(t.content, "Done.");
  EXPECT_EQ(t.reasoning, "");
}

TEST(HarmonySplitter, MissingFinalChannelLeavesContentEmpty) {
  // max_tokens cut the thought short: all of it is reasoning.
  HarmonyText t = split_every_way("<|channel|>analysis<|message|>Still thinking about <b>");
  EXPECT_EQ(t.reasoning, "Still thinking about <b>");
  EXPECT_EQ(t.content, "");
  // Cut inside the next header: the header is dropped.
  t = split_every_way("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|chan");
  EXPECT_EQ(t.reasoning, "Hmm.");
  EXPECT_EQ(t.content, "");
}

TEST(HarmonySplitter, MultiByteCharactersAreNeverCut) {
  const std::string reply =
      "<|channel|>analysis<|message|>Zürich → 你好 🎉<|end|><|start|>assistant<|channel|>final<|message|>"
      "¡Grüß dich! 🇨🇭<|return|>";
  const HarmonyText t = split_every_way(reply);
  EXPECT_EQ(t.reasoning, "Zürich → 你好 🎉");
  EXPECT_EQ(t.content, "¡Grüß dich! 🇨🇭");
  // Pieces of whole characters (as StreamDecoder sends them): every piece sent is whole too.
  std::vector<std::string> chars;
  for (size_t i = 0; i < reply.size();) {
    size_t n = 1;
    while (i + n < reply.size() && (static_cast<unsigned char>(reply[i + n]) & 0xC0) == 0x80) ++n;
    chars.push_back(reply.substr(i, n));
    i += n;
  }
  const Fed f = feed(chars);
  for (const std::string& piece : f.pieces) EXPECT_TRUE(valid_utf8(piece)) << piece;
  EXPECT_EQ(f.all.content, t.content);
}

TEST(HarmonySplitter, ToolCallWithRecipientAfterTheChannel) {
  const HarmonyText t = split_every_way(
      "<|channel|>analysis<|message|>Need the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\": \"Zürich\", \"days\": 3}<|call|>");
  EXPECT_EQ(t.reasoning, "Need the weather.");
  EXPECT_EQ(t.content, "");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "get_weather");
  EXPECT_EQ(t.calls[0].arguments, R"({"city":"Zürich","days":3})");  // as written, in order
}

TEST(HarmonySplitter, ToolCallWithRecipientAfterTheRoleAndNoCallTag) {
  // The prompt ended with `<|start|>assistant`, so the reply may begin with the
  // recipient; <|call|> is an end-of-generation token, so the output just ends.
  const HarmonyText t =
      split_every_way(" to=functions.search<|channel|>commentary json<|message|>{\"query\":\"zinc\"}");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "search");
  EXPECT_EQ(json::parse(t.calls[0].arguments), json::parse(R"({"query":"zinc"})"));
  EXPECT_EQ(t.reasoning + t.content, "");
}

TEST(HarmonySplitter, PreambleIsContentAndMessagesAreJoined) {
  const HarmonyText t = split_every_way(
      "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>commentary<|message|>Let me look."
      "<|end|><|start|>assistant<|channel|>analysis<|message|>Two.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Found it.");
  EXPECT_EQ(t.reasoning, "One.\n\nTwo.");
  EXPECT_EQ(t.content, "Let me look.\n\nFound it.");
}

TEST(HarmonySplitter, CallsNeedToolsAndJsonArguments) {
  const std::string call = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}";
  HarmonyText t = split_every_way(call, /*tools=*/false);  // tools off: not for the user
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.reasoning, "{\"a\":1}");
  t = split_every_way("<|channel|>commentary to=functions.f<|message|>not json");
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.content, "not json");
  t = split_every_way("<|channel|>analysis to=python<|message|>print(1)");  // a built-in tool
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.reasoning, "print(1)");
}

TEST(HarmonySplitter, ReplyThatIsNotHarmonyIsContent) {
  // What a grammar forces (JSON output, tool_choice required) does not start with a header.
  HarmonyText t = split_every_way("{\"ok\": true} <|end|>");
  EXPECT_EQ(t.content, "{\"ok\": true} <|end|>");
  t = split_every_way(" total");
  EXPECT_EQ(t.content, " total");
  t = split_every_way("<|chan");
  EXPECT_EQ(t.content, "<|chan");
}

}  // namespace
}  // namespace zinc::text
