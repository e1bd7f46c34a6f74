// One request's generated tokens turned into what the client sees, token by token:
//   token -> text (StreamDecoder: never half a UTF-8 character)
//         -> stop strings (StopMatcher: held back, never sent)
//         -> reasoning / answer (ReasoningSplitter, for Qwen's <think>; or
//            HarmonySplitter, for gpt-oss, which also yields its tool calls)
//         -> tool calls cut out of the answer (ToolCallExtractor, when tools are on)
// Runs on the engine thread inside on_token, so a stop string ends the request at
// the token that completes it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "text/harmony_splitter.h"
#include "server/reasoning_splitter.h"
#include "server/stop_matcher.h"
#include "server/tool_calls.h"
#include "text/stream_decoder.h"

namespace zinc::server {

// One token's log-probability, for the response's logprobs: a generated token's, or
// an echoed prompt token's.
struct TokenLogprobs {
  struct Alt {
    std::string text;  // the token's bytes (may be part of a character)
    float logprob;
  };
  Alt chosen;
  std::vector<Alt> top;
  bool predicted = true;  // false: a prompt's first token, which nothing predicts (null logprob and top)
};

struct ReplyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<TokenLogprobs> logprobs;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty() && logprobs.empty(); }
};

struct ReplyOptions {
  std::vector<std::string> stop;
  bool split_reasoning = false;
  bool in_reasoning = false, may_open = false;  // see ReasoningSplitter
  bool harmony = false;                         // gpt-oss channels: HarmonySplitter instead
  bool tools = false;
  std::map<std::string, nlohmann::ordered_json> tool_parameters;
  bool logprobs = false;
};

class ReplyStream {
 public:
  ReplyStream(const text::Tokenizer& tokenizer, ReplyOptions options);
  ReplyDelta push(const TokenEvent& event);
  ReplyDelta finish();  // releases everything held back
  TokenLogprobs logprobs_of(const TokenEvent& event) const;
  bool stopped() const { return stop_.stopped(); }

 private:
  void route(std::string text, ReplyDelta& out);
  void route_split(const SplitText& split, ReplyDelta& out);
  void route_harmony(text::HarmonyText split, ReplyDelta& out);
  void route_content(std::string_view text, ReplyDelta& out);

  const text::Tokenizer& tokenizer_;
  ReplyOptions options_;
  text::StreamDecoder decoder_;
  StopMatcher stop_;
  std::optional<ReasoningSplitter> splitter_;
  std::optional<text::HarmonySplitter> harmony_;
  std::optional<ToolCallExtractor> tools_;
};

}  // namespace zinc::server
