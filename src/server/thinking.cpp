// Thinking budget and the after-thought gate (see thinking.h).
#include "server/thinking.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zinc::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ThoughtTracker::ThoughtTracker(const text::Tokenizer& tokenizer, bool in_reasoning, bool may_open)
    : tokenizer_(tokenizer), state_(in_reasoning ? State::Thinking : may_open ? State::MaybeOpen : State::Done) {}

void ThoughtTracker::accept(int32_t token) {
  if (state_ == State::Done) return;
  tail_ += tokenizer_.token_bytes(token);
  if (state_ == State::MaybeOpen) {
    const size_t start = tail_.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return;
    const std::string_view rest = std::string_view(tail_).substr(start);
    if (rest.substr(0, kOpen.size()) == kOpen) {
      state_ = State::Thinking;
      tail_.erase(0, start + kOpen.size());
    } else if (kOpen.substr(0, rest.size()) != rest) {
      state_ = State::Done;  // the reply starts with something else: no thought
      return;
    } else {
      return;
    }
  }
  if (tail_.find(kClose) != std::string::npos) {
    state_ = State::Done;
    tail_.clear();
    return;
  }
  if (tail_.size() > kClose.size()) tail_.erase(0, tail_.size() - kClose.size());
}

void force_token(std::span<float> logits, int32_t token) {
  const float keep = logits[static_cast<size_t>(token)];
  std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  // Whatever the model thought of it, the forced token must stay finite.
  logits[static_cast<size_t>(token)] = std::isfinite(keep) ? keep : 0.0f;
}

ThinkingBudget::ThinkingBudget(const text::Tokenizer& tokenizer, int64_t budget, bool in_reasoning, bool may_open)
    : tracker_(tokenizer, in_reasoning, may_open),
      budget_(budget),
      closing_(tokenizer.encode(kClosingSentence, /*parse_special=*/true, /*add_bos=*/false, /*add_eos=*/false)) {}

void ThinkingBudget::process(std::span<float> logits) {
  if (tracker_.thinking() && spent_ >= budget_) closing_.start();
  closing_.process(logits);
}

void ThinkingBudget::accept(int32_t token) {
  if (closing_.accept()) return;
  const bool was_thinking = tracker_.thinking();
  tracker_.accept(token);
  if (was_thinking && tracker_.thinking()) ++spent_;
}

}  // namespace zinc::server
