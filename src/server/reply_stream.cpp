// Token events to client text (see reply_stream.h).
#include "server/reply_stream.h"

namespace zinc::server {

ReplyStream::ReplyStream(const text::Tokenizer& tokenizer, ReplyOptions options)
    : tokenizer_(tokenizer), options_(std::move(options)), decoder_(tokenizer), stop_(options_.stop) {
  if (options_.harmony) harmony_.emplace(options_.tools);
  else if (options_.split_reasoning) splitter_.emplace(options_.in_reasoning, options_.may_open);
  if (options_.tools) tools_.emplace(options_.tool_parameters);
}

void ReplyStream::route_content(std::string_view text, ReplyDelta& out) {
  if (text.empty()) return;
  if (!tools_) {
    out.content += text;
    return;
  }
  ToolCallText t = tools_->push(text);
  out.content += t.content;
  for (auto& c : t.calls) out.calls.push_back(std::move(c));
}

void ReplyStream::route_split(const SplitText& split, ReplyDelta& out) {
  out.reasoning += split.reasoning;
  route_content(split.content, out);
}

// Harmony content still passes the <tool_call> extractor: tool_choice required or
// named makes a grammar write that format, which the splitter leaves as plain content.
void ReplyStream::route_harmony(text::HarmonyText split, ReplyDelta& out) {
  out.reasoning += split.reasoning;
  route_content(split.content, out);
  for (auto& c : split.calls) out.calls.push_back({std::move(c.name), std::move(c.arguments)});
}

void ReplyStream::route(std::string text, ReplyDelta& out) {
  if (text.empty()) return;
  if (harmony_) route_harmony(harmony_->push(text), out);
  else if (splitter_) route_split(splitter_->push(text), out);
  else route_content(text, out);
}

ReplyDelta ReplyStream::push(const TokenEvent& ev) {
  ReplyDelta out;
  if (options_.logprobs) out.logprobs.push_back(logprobs_of(ev));
  if (stop_.stopped()) return out;
  route(stop_.push(decoder_.push(ev.token)), out);
  return out;
}

TokenLogprobs ReplyStream::logprobs_of(const TokenEvent& ev) const {
  TokenLogprobs lp;
  lp.chosen = {tokenizer_.token_bytes(ev.token), ev.logprob};
  for (const TokenLogprob& t : ev.top) lp.top.push_back({tokenizer_.token_bytes(t.id), t.logprob});
  return lp;
}

ReplyDelta ReplyStream::finish() {
  ReplyDelta out;
  if (!stop_.stopped()) route(stop_.push(decoder_.flush()), out);
  route(stop_.flush(), out);
  if (splitter_) route_split(splitter_->flush(), out);
  if (harmony_) route_harmony(harmony_->flush(), out);
  if (tools_) {
    ToolCallText t = tools_->flush();
    out.content += t.content;
    for (auto& c : t.calls) out.calls.push_back(std::move(c));
  }
  return out;
}

}  // namespace zinc::server
