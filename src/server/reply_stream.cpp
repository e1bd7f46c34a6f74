// Token events to client text (see reply_stream.h).
#include "server/reply_stream.h"

namespace zinc::server {

ReplyStream::ReplyStream(const text::Tokenizer& tokenizer, ReplyOptions options)
    : tokenizer_(tokenizer), options_(std::move(options)), decoder_(tokenizer), stop_(options_.stop) {
  if (options_.split_reasoning) splitter_.emplace(options_.in_reasoning, options_.may_open);
  if (options_.tools) tools_.emplace(options_.tool_parameters);
}

void ReplyStream::route_split(const SplitText& split, ReplyDelta& out) {
  out.reasoning += split.reasoning;
  if (split.content.empty()) return;
  if (!tools_) {
    out.content += split.content;
    return;
  }
  ToolCallText t = tools_->push(split.content);
  out.content += t.content;
  for (auto& c : t.calls) out.calls.push_back(std::move(c));
}

void ReplyStream::route(std::string text, ReplyDelta& out) {
  if (text.empty()) return;
  if (splitter_) route_split(splitter_->push(text), out);
  else route_split(SplitText{"", std::move(text)}, out);
}

ReplyDelta ReplyStream::push(const TokenEvent& ev) {
  ReplyDelta out;
  if (options_.logprobs) {
    TokenLogprobs lp{{tokenizer_.token_bytes(ev.token), ev.logprob}, {}};
    for (const TokenLogprob& t : ev.top) lp.top.push_back({tokenizer_.token_bytes(t.id), t.logprob});
    out.logprobs.push_back(std::move(lp));
  }
  if (stop_.stopped()) return out;
  route(stop_.push(decoder_.push(ev.token)), out);
  return out;
}

ReplyDelta ReplyStream::finish() {
  ReplyDelta out;
  if (!stop_.stopped()) route(stop_.push(decoder_.flush()), out);
  route(stop_.flush(), out);
  if (splitter_) route_split(splitter_->flush(), out);
  if (tools_) {
    ToolCallText t = tools_->flush();
    out.content += t.content;
    for (auto& c : t.calls) out.calls.push_back(std::move(c));
  }
  return out;
}

}  // namespace zinc::server
