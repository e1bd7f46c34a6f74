// gpt-oss replies in harmony split into reasoning, content and tool calls: the same
// result whether the reply comes whole, in two pieces cut anywhere, or one byte at a
// time; tags never reach the client and cuts fall only between characters. Also the
// whole pipeline (ReplyStream) on tokens of o200k-tiny, gpt-oss's tokenizer stand-in,
// whose byte-level BPE splits multi-byte characters over tokens.
#include "server/harmony_splitter.h"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "server/reply_stream.h"
#include "test_util.h"
#include "text/hf_vocab.h"
#include "text/stream_decoder.h"

namespace zinc::server {
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
  return text::utf8_complete_prefix(s, held) == s && held == 0;
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
      "<|channel|>analysis<|message|>Zürich → 你好 🎉<|end|><|start|>assistant<|channel|>final<|message|>¡Grüß "
      "dich! 🇨🇭<|return|>";
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
  const HarmonyText t = split_every_way(" to=functions.search<|channel|>commentary json<|message|>{\"query\":\"zinc\"}");
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

// ---- the whole pipeline on real tokens ----------------------------------------------

class HarmonyReplyStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    namespace fs = std::filesystem;
    const fs::path src = fs::path(test::source_dir()) / "tests/data/text/o200k-tiny";
    const fs::path dir = fs::path(test::temp_dir()) / "harmony_o200k_tiny";
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      const std::string cmd = "xz -dc '" + (src / (std::string(f) + ".xz")).string() + "' > '" + (dir / f).string() + "'";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    text::write_hf_vocab_gguf(dir.string(), (dir / "vocab.gguf").string());
    file_ = gguf::GgufFile::open((dir / "vocab.gguf").string()).release();
    tok_ = text::Tokenizer::from_gguf(*file_).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete file_;
  }
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
  static gguf::GgufFile* file_;
  static text::Tokenizer* tok_;
};
gguf::GgufFile* HarmonyReplyStream::file_ = nullptr;
text::Tokenizer* HarmonyReplyStream::tok_ = nullptr;

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
