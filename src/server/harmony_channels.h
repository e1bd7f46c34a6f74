// Logits processors around a harmony (gpt-oss) reply's channels: the analysis
// channel is the model's thought, the final channel its answer. The prompt ends with
// `<|start|>assistant`, so the reply opens with a message header.
//
// HarmonyBudget caps the analysis at `budget` tokens: once spent, it forces
// `<|end|><|start|>assistant` and the header of the answer's message one token per
// step (by leaving exactly one finite logit); a budget of 0 forces that header as the
// reply's start, so there is no analysis at all.
//
// InFinalMessage holds another processor (a response format's grammar) back until
// the reply writes its final message, so the constraint shapes the answer and not the
// analysis or a function call (AfterThought's harmony twin). A request with no tool to
// call gets a grammar over the whole reply instead (generation_job.cpp), which also
// makes the final message come.
//
// Both follow the reply by the text of the tokens chosen (HarmonyTracker).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "server/thinking.h"
#include "text/tokenizer.h"

namespace zinc::server {

// Headers that open the answer's message: the final channel, or a function call
// (functions.NAME follows).
inline constexpr std::string_view kHarmonyFinalHeader = "<|channel|>final<|message|>";
inline constexpr std::string_view kHarmonyCallHeader = "<|channel|>commentary to=functions.";

// Where a harmony reply stands: in a message's header, or in the body of a message on
// some channel.
class HarmonyTracker {
 public:
  explicit HarmonyTracker(const text::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void accept(int32_t token);
  bool at_start() const { return at_start_; }  // nothing written yet
  bool in_body(std::string_view channel) const { return in_body_ && channel_ == channel; }

 private:
  const text::Tokenizer& tokenizer_;
  bool at_start_ = true, in_body_ = false;
  std::string channel_;  // the open message's, once its header is read
  std::string text_;     // the header so far, or the body's tail (enough to see a tag split over tokens)
};

class HarmonyBudget : public LogitsProcessor {
 public:
  // answer_header: kHarmonyFinalHeader, or kHarmonyCallHeader when a call must follow.
  HarmonyBudget(const text::Tokenizer& tokenizer, int64_t budget, std::string_view answer_header);
  void process(std::span<float> logits) override;
  void accept(int32_t token) override;

 private:
  HarmonyTracker tracker_;
  int64_t budget_, spent_ = 0;
  ForcedTokens closing_;  // [`<|end|><|start|>assistant`, unless budget 0] and the answer header
};

class InFinalMessage : public LogitsProcessor {
 public:
  InFinalMessage(const text::Tokenizer& tokenizer, std::unique_ptr<LogitsProcessor> inner)
      : tracker_(tokenizer), inner_(std::move(inner)) {}
  void process(std::span<float> logits) override {
    if (engaged_) inner_->process(logits);
  }
  void accept(int32_t token) override {
    if (engaged_) return inner_->accept(token);
    tracker_.accept(token);
    engaged_ = tracker_.in_body("final");
  }

 private:
  HarmonyTracker tracker_;
  std::unique_ptr<LogitsProcessor> inner_;
  bool engaged_ = false;
};

}  // namespace zinc::server
