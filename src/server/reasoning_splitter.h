// Splits a thinking model's output into reasoning and answer. Qwen's templates open
// the thought in the prompt (`<think>\n` ends the prompt when thinking is on) or let
// the model write `<think>` first; either way the thought ends at `</think>`. The
// tags never reach the client; the newlines the templates put around them are
// trimmed (leading ones of each part, trailing ones of the reasoning).
// Tags may straddle pieces, so a tail that could begin one is held back.
#pragma once

#include <string>
#include <string_view>

namespace zinc::server {

struct SplitText {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  // in_reasoning: the prompt already opened the thought. may_open: the output may
  // start with `<think>` (leading whitespace allowed); otherwise everything that is
  // not inside an opened thought is content.
  ReasoningSplitter(bool in_reasoning, bool may_open);

  SplitText push(std::string_view piece);
  SplitText flush();  // end of output: releases what is held back
  bool in_reasoning() const { return state_ == State::Reasoning; }

 private:
  enum class State { MaybeOpen, Reasoning, Content };
  void emit_reasoning(std::string_view text, SplitText& out);
  void emit_content(std::string_view text, SplitText& out);

  State state_;
  std::string held_;             // undecided text (a possible tag's prefix)
  std::string pending_newlines_; // reasoning's trailing newlines, dropped at </think>
  bool reasoning_started_ = false, content_started_ = false;
};

}  // namespace zinc::server
