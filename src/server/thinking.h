// Logits processors around a Qwen model's thought.
//
// ThinkingBudget caps the thought at `budget` tokens the way Qwen's report
// describes: once spent, it forces the closing sentence (kClosingSentence, ending in
// </think> and the blank line the templates put before the answer) one token per
// step, by leaving exactly one finite logit; then the model answers freely.
//
// AfterThought holds another processor (a grammar) back until the thought is
// closed, so the constraint shapes the answer and not the reasoning.
//
// Both follow the thought by the text of the tokens chosen (ThoughtTracker).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine.h"
#include "text/tokenizer.h"

namespace zinc::server {

inline constexpr const char* kClosingSentence =
    "\n\nConsidering the limited time by the user, I have to give the solution based on the thinking directly "
    "now.\n</think>\n\n";

// Where the output stands relative to a <think> ... </think> block.
class ThoughtTracker {
 public:
  // in_reasoning: the prompt opened the thought. may_open: the output may open one.
  ThoughtTracker(const text::Tokenizer& tokenizer, bool in_reasoning, bool may_open);
  void accept(int32_t token);
  bool thinking() const { return state_ == State::Thinking; }
  bool done() const { return state_ == State::Done; }

 private:
  enum class State { MaybeOpen, Thinking, Done };
  const text::Tokenizer& tokenizer_;
  State state_;
  std::string tail_;  // recent text, enough to see a tag split over tokens
};

// Leaves `token` the only possible choice: every other logit -inf, its own kept
// (0 where it was not finite). The budgets force their closing text this way.
void force_token(std::span<float> logits, int32_t token);

// A budget's closing text, forced one token a step once started: process() forces the
// next token, accept() counts it and returns whether the closing has started (the
// budget's own tracking then stops).
class ForcedTokens {
 public:
  explicit ForcedTokens(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  void start() { started_ = true; }
  void process(std::span<float> logits) const {
    if (started_ && next_ < tokens_.size()) force_token(logits, tokens_[next_]);
  }
  bool accept() {
    if (started_ && next_ < tokens_.size()) ++next_;
    return started_;
  }

 private:
  std::vector<int32_t> tokens_;
  size_t next_ = 0;  // tokens emitted so far
  bool started_ = false;
};

class ThinkingBudget : public LogitsProcessor {
 public:
  ThinkingBudget(const text::Tokenizer& tokenizer, int64_t budget, bool in_reasoning, bool may_open);
  void process(std::span<float> logits) override;
  void accept(int32_t token) override;

 private:
  ThoughtTracker tracker_;
  int64_t budget_, spent_ = 0;
  ForcedTokens closing_;  // kClosingSentence's tokens
};

class AfterThought : public LogitsProcessor {
 public:
  AfterThought(const text::Tokenizer& tokenizer, std::unique_ptr<LogitsProcessor> inner)
      : tracker_(tokenizer, /*in_reasoning=*/true, /*may_open=*/false), inner_(std::move(inner)) {}
  void process(std::span<float> logits) override {
    if (tracker_.done()) inner_->process(logits);
  }
  void accept(int32_t token) override {
    if (tracker_.done()) inner_->accept(token);
    else tracker_.accept(token);
  }

 private:
  ThoughtTracker tracker_;
  std::unique_ptr<LogitsProcessor> inner_;
};

}  // namespace zinc::server
