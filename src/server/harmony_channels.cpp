// Harmony reply tracking, the analysis budget (see harmony_channels.h).
#include "server/harmony_channels.h"

#include <array>

#include "server/thinking.h"

namespace zinc::server {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kStart = "<|start|>";
// What ends a body; <|start|> (a missing <|end|>) also opens the next header.
constexpr std::array<std::string_view, 4> kBodyEnds = {"<|end|>", "<|return|>", "<|call|>", kStart};
constexpr size_t kLongestBodyEnd = std::string_view("<|return|>").size();

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
      // The channel is the word after <|channel|>, up to a space or the next tag.
      const size_t channel = text_.rfind(kChannel, at);
      channel_.clear();
      if (channel != std::string::npos) {
        const size_t from = channel + kChannel.size();
        const std::string_view name = std::string_view(text_).substr(from, at - from);
        channel_ = name.substr(0, name.find_first_of(" <"));
      }
      in_body_ = true;
      text_.erase(0, at + kMessage.size());
      continue;
    }
    size_t end = std::string::npos;
    std::string_view tag;
    for (std::string_view t : kBodyEnds)
      if (const size_t at = text_.find(t); at < end) {
        end = at;
        tag = t;
      }
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
  if (!forcing_)
    forcing_ = budget_ == 0 ? tracker_.at_start() : tracker_.in_body("analysis") && spent_ >= budget_;
  if (!forcing_ || forced_ >= closing_.size()) return;
  force_token(logits, closing_[forced_]);
}

void HarmonyBudget::accept(int32_t token) {
  if (forcing_) {
    if (forced_ < closing_.size()) ++forced_;
    return;
  }
  const bool was_analysing = tracker_.in_body("analysis");
  tracker_.accept(token);
  if (was_analysing && tracker_.in_body("analysis")) ++spent_;
}

}  // namespace zinc::server
