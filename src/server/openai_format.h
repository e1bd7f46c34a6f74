// OpenAI response bodies: chat.completion, chat.completion.chunk, text_completion
// (whole and streamed), usage, logprobs, and the SSE framing of stream events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/api_request.h"
#include "server/reply_stream.h"

namespace zinc::server {

struct ReplyMeta {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
};

// "stop", "length" or "tool_calls"; Stopped (a stop string) is "stop".
std::string finish_reason_name(FinishReason reason, bool made_tool_calls);
Json usage_json(const RequestStats& stats);
// Text that may hold invalid UTF-8 (token pieces) is written with U+FFFD.
std::string dump(const Json& j);
std::string sse_event(const Json& j);  // "data: {...}\n\n"

// A whole reply built from its deltas (non-streaming responses).
struct Reply {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  std::vector<TokenLogprobs> logprobs;
  void add(ReplyDelta delta);
};

// One choice of a whole response (n, or several prompts), numbered by its place.
struct Choice {
  Reply reply;
  std::string finish_reason;
};

// ---- chat ------------------------------------------------------------------------
// `usage`: the choices' prompts counted once each, their replies all.
Json chat_completion(const ReplyMeta& meta, const std::vector<Choice>& choices, const RequestStats& usage,
                     bool logprobs);
// One stream chunk of choice `index`; `delta` is the choice's delta object.
// finish_reason empty: null.
Json chat_chunk(const ReplyMeta& meta, size_t index, Json delta, const std::string& finish_reason,
                const std::vector<TokenLogprobs>* logprobs);
// The delta for a piece of the reply; first_call_index numbers its tool calls.
Json chat_delta(const ReplyDelta& d, const std::string& id_prefix, size_t first_call_index);
// The last chunk when stream_options.include_usage: no choices, the usage.
Json chat_usage_chunk(const ReplyMeta& meta, const RequestStats& stats);

// ---- completions -----------------------------------------------------------------
Json text_completion(const ReplyMeta& meta, const std::vector<Choice>& choices, const RequestStats& usage,
                     bool logprobs);
// One stream chunk of choice `index`; text_offset: where `text` starts in the choice's text.
Json text_chunk(const ReplyMeta& meta, size_t index, const std::string& text, const std::string& finish_reason,
                const std::vector<TokenLogprobs>* logprobs, size_t text_offset);
Json text_usage_chunk(const ReplyMeta& meta, const RequestStats& stats);

}  // namespace zinc::server
