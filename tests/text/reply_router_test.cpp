// What `zinc chat` and `zinc run` print of a streamed reply. A gpt-oss reply in harmony:
// the answer alone on stdout, the reasoning on stderr inside a "[thinking]" block, no
// tags anywhere, however the reply is cut into pieces. Any other reply: stdout,
// unchanged. Then the same through TextStreamer on o200k-tiny's tokens.
#include "cli/text/reply_router.h"

#include <vector>

#include <gtest/gtest.h>

#include "cli/text/text_generation.h"
#include "test_util.h"
#include "text/o200k_tiny.h"
#include "text/stream_decoder.h"

namespace zinc::cli {
namespace {

struct Printed {
  std::string out, err;
  std::string terminal;            // both, in the order they were written
  std::string content, reasoning;  // the router's record, for the chat history
};

Printed route(const std::vector<std::string>& pieces, bool harmony) {
  Printed p;
  ReplyRouter router(
      harmony,
      [&](std::string_view text) {
        p.out += text;
        p.terminal += text;
      },
      [&](std::string_view text) {
        p.err += text;
        p.terminal += text;
      });
  for (const std::string& piece : pieces) router.push(piece);
  router.finish();
  p.content = router.content();
  p.reasoning = router.reasoning();
  return p;
}

// Whole, in two pieces cut at every byte, and one byte at a time: all print the same.
Printed route_every_way(const std::string& reply, bool harmony) {
  const Printed whole = route({reply}, harmony);
  auto same = [&](const Printed& p, const std::string& how) {
    EXPECT_EQ(p.out, whole.out) << how;
    EXPECT_EQ(p.err, whole.err) << how;
    EXPECT_EQ(p.terminal, whole.terminal) << how;
    EXPECT_EQ(p.content, whole.content) << how;
    EXPECT_EQ(p.reasoning, whole.reasoning) << how;
  };
  for (size_t cut = 0; cut <= reply.size(); ++cut)
    same(route({reply.substr(0, cut), reply.substr(cut)}, harmony), "cut at " + std::to_string(cut));
  std::vector<std::string> bytes;
  for (char c : reply) bytes.emplace_back(1, c);
  same(route(bytes, harmony), "byte by byte");
  return whole;
}

TEST(ReplyRouter, HarmonyAnswerToStdoutReasoningToStderr) {
  const Printed p = route_every_way(
      "<|channel|>analysis<|message|>User greets in German. Answer: Grüß dich → 🎉<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Grüß dich! 🎉",
      /*harmony=*/true);
  EXPECT_EQ(p.out, "Grüß dich! 🎉");
  EXPECT_EQ(p.err, "[thinking]\nUser greets in German. Answer: Grüß dich → 🎉\n\n");
  EXPECT_EQ(p.terminal, "[thinking]\nUser greets in German. Answer: Grüß dich → 🎉\n\nGrüß dich! 🎉");
  EXPECT_EQ(p.content, "Grüß dich! 🎉");
  EXPECT_EQ(p.reasoning, "User greets in German. Answer: Grüß dich → 🎉");
}

TEST(ReplyRouter, HarmonyAnswerWithoutReasoningPrintsNoThinkingBlock) {
  const Printed p = route_every_way("<|channel|>final<|message|>Hi.", true);
  EXPECT_EQ(p.out, "Hi.");
  EXPECT_EQ(p.err, "");
}

TEST(ReplyRouter, HarmonyReplyCutOffWhileThinkingEndsTheLine) {
  const Printed p = route_every_way("<|channel|>analysis<|message|>Let me think about", true);
  EXPECT_EQ(p.out, "");
  EXPECT_EQ(p.err, "[thinking]\nLet me think about\n");
  EXPECT_EQ(p.reasoning, "Let me think about");
}

TEST(ReplyRouter, HarmonyReasoningAfterAPreambleStartsOnItsOwnLine) {
  const Printed p = route_every_way(
      "<|channel|>commentary<|message|>Checking.<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Fine.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Done.",
      true);
  EXPECT_EQ(p.out, "Checking.\n\nDone.");
  EXPECT_EQ(p.err, "\n[thinking]\nFine.\n\n");
  EXPECT_EQ(p.terminal, "Checking.\n[thinking]\nFine.\n\n\n\nDone.");
  EXPECT_EQ(p.content, "Checking.\n\nDone.");
}

TEST(ReplyRouter, OtherTemplatesStreamTextUnchanged) {
  const std::string reply = "<think>\nHmm.\n</think>\n\nHello <|channel|> Grüß 🎉";
  std::vector<std::string> pieces;
  for (char c : reply) pieces.emplace_back(1, c);
  const Printed p = route(pieces, /*harmony=*/false);
  EXPECT_EQ(p.out, reply);
  EXPECT_EQ(p.err, "");
  EXPECT_EQ(p.content, reply);
  EXPECT_EQ(p.reasoning, "");
}

// TextStreamer on o200k-tiny's tokens, whose byte-level BPE splits characters over
// tokens: what reaches stdout and stderr.
class HarmonyTextStreamer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = &test::o200k_tiny(); }
  static Printed stream(const std::string& reply, bool harmony) {
    TextStreamer streamer(*tok_, harmony);
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    for (int32_t id : tok_->encode(reply, /*parse_special=*/true, /*add_bos=*/false, /*add_eos=*/false))
      streamer.push(id);
    streamer.finish();
    Printed p;
    p.err = testing::internal::GetCapturedStderr();
    p.out = testing::internal::GetCapturedStdout();
    p.content = streamer.reply().content();
    p.reasoning = streamer.reply().reasoning();
    return p;
  }
  static const text::Tokenizer* tok_;
};
const text::Tokenizer* HarmonyTextStreamer::tok_ = nullptr;

TEST_F(HarmonyTextStreamer, PrintsTheAnswerAndTheReasoningApart) {
  const std::string reply =
      "<|channel|>analysis<|message|>Grüß ꙮ 你好 🎉?<|end|><|start|>assistant"
      "<|channel|>final<|message|>Grüß dich! 𝔘 🎉";
  const Printed p = stream(reply, /*harmony=*/true);
  EXPECT_EQ(p.out, "Grüß dich! 𝔘 🎉");
  EXPECT_EQ(p.err, "[thinking]\nGrüß ꙮ 你好 🎉?\n\n");
  EXPECT_EQ(p.content, "Grüß dich! 𝔘 🎉");
  EXPECT_EQ(p.reasoning, "Grüß ꙮ 你好 🎉?");
  // Without harmony (run --raw) the tags print as the model wrote them.
  EXPECT_EQ(stream(reply, /*harmony=*/false).out, reply);
}

}  // namespace
}  // namespace zinc::cli
