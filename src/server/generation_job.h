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

struct GenerationJob {
  RequestOptions request;
  ReplyOptions reply;
  ReplyMeta meta;
  bool chat = true;
  bool stream = false, include_usage = false, logprobs = false;
};

// The model facts a job needs; they must outlive the jobs made from them.
struct JobContext {
  const text::Tokenizer& tokenizer;
  const std::vector<int32_t>& eog_ids;
  int64_t n_ctx;
  std::string model_id;
};

// Throw ApiError 400 for what the tokenizer or the grammar cannot take.
GenerationJob make_chat_job(const ChatRequest& request, const ChatPrompt& prompt, const JobContext& context);
GenerationJob make_completion_job(const CompletionRequest& request, const JobContext& context);

}  // namespace zinc::server
