// One API request turned into what the engine and the text pipeline need: prompt
// tokens, sampler settings, logits processors (thinking budget, grammar) and the
// options of the request's ReplyStream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/api_request.h"
#include "server/chat_prompt.h"
#include "server/openai_format.h"
#include "server/reply_stream.h"
#include "text/tokenizer.h"

namespace zinc::server {

// One choice of a response: one engine request.
struct GenerationJob {
  RequestOptions request;
  ReplyOptions reply;
  ReplyMeta meta;  // the same for every choice of a response
  bool chat = true;
  bool stream = false, include_usage = false, logprobs = false;
  bool first_of_prompt = true;  // the usage counts each prompt once, at its first choice
  // echo: the prompt's text comes first in the reply, with logprobs each prompt token's
  // (request.prompt_logprobs).
  bool echo = false;
  std::string echo_text;
};

// The model facts a job needs; they must outlive the jobs made from them.
struct JobContext {
  const text::Tokenizer& tokenizer;
  const std::vector<int32_t>& eog_ids;
  int64_t n_ctx;
  std::string model_id;
};

// A job per choice, in the response's order. Throw ApiError 400 for what the tokenizer
// or the grammar cannot take.
std::vector<GenerationJob> make_chat_jobs(const ChatRequest& request, const ChatPrompt& prompt,
                                          const JobContext& context);
std::vector<GenerationJob> make_completion_jobs(const CompletionRequest& request, const JobContext& context);

}  // namespace zinc::server
