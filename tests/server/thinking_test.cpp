// The thinking budget forces Qwen's closing sentence token by token once the thought
// has used its budget, leaves a thought that closes itself alone, and the gate holds
// a grammar back until the thought is over. Uses SmolLM2's tokenizer (any tokenizer
// spells the sentence; a real Qwen one is exercised by tests/server/test_openai.py).
#include "server/thinking.h"

#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "test_util.h"

namespace zinc::server {
namespace {

class Thinking : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = test::source_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (scripts/fetch_smollm2.sh)";
    file_ = gguf::GgufFile::open(path);
    tok_ = text::Tokenizer::from_gguf(*file_);
  }
  int32_t token(const char* text) const {
    auto ids = tok_->encode(text, false, false, false);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids[0];
  }
  // The one finite logit's id, or -1 when none or several are finite.
  int32_t forced(LogitsProcessor& p) const {
    std::vector<float> logits(static_cast<size_t>(tok_->n_vocab()), 0.5f);
    p.process(logits);
    int32_t id = -1, finite = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::isfinite(logits[i])) {
        ++finite;
        id = static_cast<int32_t>(i);
      }
    return finite == 1 ? id : -1;
  }
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<text::Tokenizer> tok_;
};

TEST_F(Thinking, BudgetSpentForcesTheClosingSentence) {
  ThinkingBudget budget(*tok_, 3, /*in_reasoning=*/true, /*may_open=*/false);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(forced(budget), -1) << "token " << i << " is free";
    budget.accept(token(" word"));
  }
  std::string text;
  for (int i = 0; i < 200; ++i) {
    const int32_t id = forced(budget);
    if (id < 0) break;
    text += tok_->token_bytes(id);
    budget.accept(id);
  }
  EXPECT_EQ(text, kClosingSentence);
  EXPECT_EQ(forced(budget), -1) << "the answer is free again";
}

TEST_F(Thinking, ZeroBudgetForcesFromTheFirstToken) {
  ThinkingBudget budget(*tok_, 0, true, false);
  EXPECT_EQ(forced(budget), tok_->encode(kClosingSentence, true, false, false)[0]);
}

TEST_F(Thinking, AThoughtThatClosesItselfIsLeftAlone) {
  ThinkingBudget budget(*tok_, 4, true, false);
  for (int32_t id : tok_->encode("ok</think>", false, false, false)) budget.accept(id);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(forced(budget), -1);
    budget.accept(token(" word"));
  }
}

TEST_F(Thinking, ModelOpenedThoughtCountsFromTheTag) {
  ThinkingBudget budget(*tok_, 1, /*in_reasoning=*/false, /*may_open=*/true);
  for (int32_t id : tok_->encode("<think>", false, false, false)) {
    EXPECT_EQ(forced(budget), -1);
    budget.accept(id);
  }
  EXPECT_EQ(forced(budget), -1);
  budget.accept(token(" word"));
  EXPECT_GE(forced(budget), 0);
  ThinkingBudget plain(*tok_, 0, false, true);  // the reply starts without a thought
  plain.accept(token("Hello"));
  EXPECT_EQ(forced(plain), -1);
}

// Masks everything but token 7 and records what it was shown.
class OnlySeven : public LogitsProcessor {
 public:
  void process(std::span<float> logits) override {
    for (size_t i = 0; i < logits.size(); ++i)
      if (i != 7) logits[i] = -std::numeric_limits<float>::infinity();
  }
  void accept(int32_t token) override { accepted.push_back(token); }
  std::vector<int32_t>& accepted;
  explicit OnlySeven(std::vector<int32_t>& a) : accepted(a) {}
};

TEST_F(Thinking, GateHoldsTheGrammarUntilTheThoughtCloses) {
  std::vector<int32_t> seen;
  AfterThought gate(*tok_, std::make_unique<OnlySeven>(seen));
  EXPECT_EQ(forced(gate), -1);
  gate.accept(token(" word"));
  for (int32_t id : tok_->encode("</think>", false, false, false)) gate.accept(id);
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(forced(gate), 7);
  gate.accept(7);
  EXPECT_EQ(seen, std::vector<int32_t>{7});
}

}  // namespace
}  // namespace zinc::server
