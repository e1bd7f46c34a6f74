// The server's reply pipeline (ReplyStream) on gpt-oss replies tokenized by
// o200k-tiny, gpt-oss's tokenizer stand-in, whose byte-level BPE splits multi-byte
// characters over tokens: every delta holds whole characters and no tag.

#include <gtest/gtest.h>

#include "server/reply_stream.h"
#include "test_util.h"
#include "text/o200k_tiny.h"
#include "text/stream_decoder.h"

namespace zinc::server {
namespace {

bool valid_utf8(const std::string& s) {
  size_t held = 0;
  return text::utf8_complete_prefix(s, held) == s && held == 0;
}

class HarmonyReplyStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = &test::o200k_tiny(); }
  // The reply's tokens through a harmony ReplyStream with tools on; every delta is
  // checked for whole characters and no tag.
  static ReplyDelta stream(const std::string& reply) {
    ReplyOptions o;
    o.harmony = true;
    o.tools = true;
    ReplyStream rs(*tok_, o);
    ReplyDelta all;
    auto take = [&](ReplyDelta d) {
      for (const std::string* s : {&d.reasoning, &d.content}) {
        EXPECT_TRUE(valid_utf8(*s)) << *s;
        EXPECT_EQ(s->find("<|"), std::string::npos) << *s;
      }
      all.reasoning += d.reasoning;
      all.content += d.content;
      for (auto& c : d.calls) all.calls.push_back(std::move(c));
    };
    for (int32_t id : tok_->encode(reply, /*parse_special=*/true, /*add_bos=*/false, /*add_eos=*/false)) {
      TokenEvent event;
      event.token = id;
      take(rs.push(event));
    }
    take(rs.finish());
    return all;
  }
  static const text::Tokenizer* tok_;
};
const text::Tokenizer* HarmonyReplyStream::tok_ = nullptr;

TEST_F(HarmonyReplyStream, TokensToDeltasNeverCutCharactersOrLeakTags) {
  const std::string reply =
      "<|channel|>analysis<|message|>Grüß ꙮ 𝔘 你好 🎉 weather?<|end|><|start|>assistant"
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Zürich\"}";
  bool cut_character = false;  // the test is only worth it when a token holds part of one
  for (int32_t id : tok_->encode(reply, true, false, false)) cut_character |= !valid_utf8(tok_->token_bytes(id));
  EXPECT_TRUE(cut_character);
  const ReplyDelta all = stream(reply);
  EXPECT_EQ(all.reasoning, "Grüß ꙮ 𝔘 你好 🎉 weather?");
  EXPECT_EQ(all.content, "");
  ASSERT_EQ(all.calls.size(), 1u);
  EXPECT_EQ(all.calls[0].name, "get_weather");
  EXPECT_EQ(all.calls[0].arguments, R"({"city":"Zürich"})");
}

TEST_F(HarmonyReplyStream, GrammarForcedToolCallStillParses) {
  // tool_choice required: the grammar writes Qwen's <tool_call> format, which the
  // splitter leaves as content for the tool-call extractor.
  const ReplyDelta all = stream("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  EXPECT_EQ(all.content, "");
  ASSERT_EQ(all.calls.size(), 1u);
  EXPECT_EQ(all.calls[0].name, "f");
}

}  // namespace
}  // namespace zinc::server
