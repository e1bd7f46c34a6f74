// Harmony reply tracking, the analysis budget (see harmony_channels.h).
#include "server/harmony_channels.h"

#include "text/harmony_splitter.h"

namespace zinc::server {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kStart = "<|start|>";
constexpr size_t kLongestBodyEnd = std::string_view("<|return|>").size();  // of harmony_body_end's tags

std::vector<int32_t> encode(const text::Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.encode(text, /*parse_special=*/true, /*add_bos=*/false, /*add_eos=*/false);
}

}  // namespace

void HarmonyTracker::accept(int32_t token) {
  at_start_ = false;
  text_ += tokenizer_.token_bytes(token);
  for (;;) {
    if (!in_body_) {
      const size_t at = text_.find(kMessage);
      if (at == std::string::npos) return;
      channel_ = text::harmony_header_field(std::string_view(text_).substr(0, at), "<|channel|>");
      in_body_ = true;
      text_.erase(0, at + kMessage.size());
      continue;
    }
    const auto [end, tag] = text::harmony_body_end(text_);
    if (end == std::string::npos) {
      if (text_.size() > kLongestBodyEnd) text_.erase(0, text_.size() - kLongestBodyEnd);
      return;
    }
    in_body_ = false;
    channel_.clear();
    text_.erase(0, end + (tag == kStart ? 0 : tag.size()));
  }
}

HarmonyBudget::HarmonyBudget(const text::Tokenizer& tokenizer, int64_t budget, std::string_view answer_header)
    : tracker_(tokenizer),
      budget_(budget),
      closing_(encode(tokenizer, (budget == 0 ? "" : "<|end|><|start|>assistant") + std::string(answer_header))) {}

void HarmonyBudget::process(std::span<float> logits) {
  if (budget_ == 0 ? tracker_.at_start() : tracker_.in_body("analysis") && spent_ >= budget_) closing_.start();
  closing_.process(logits);
}

void HarmonyBudget::accept(int32_t token) {
  if (closing_.accept()) return;
  const bool was_analysing = tracker_.in_body("analysis");
  tracker_.accept(token);
  if (was_analysing && tracker_.in_body("analysis")) ++spent_;
}

}  // namespace zinc::server
