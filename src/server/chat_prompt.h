// A chat request rendered into prompt text by the model's chat template, and what
// the rendered prompt says about thinking: whether it ends inside an opened
// <think> (Qwen3.5 with enable_thinking) or lets the model open one (Qwen3), or
// whether the template speaks harmony (gpt-oss: it writes `<|channel|>`). Harmony
// templates read an assistant message's thought from `thinking` and the effort from
// `reasoning_effort`: the request's reasoning_content and reasoning_effort go there.
#pragma once

#include <mutex>
#include <string>

#include "server/api_request.h"
#include "text/chat_template.h"

namespace zinc::server {

struct ChatPrompt {
  std::string text;
  bool in_reasoning = false;  // the prompt ends with an opened <think>
  bool may_open = false;      // the model may start its reply with <think>
  bool harmony = false;       // the reply is harmony messages (HarmonySplitter)
};

class ChatRenderer {
 public:
  // Throws std::runtime_error when the template does not parse.
  ChatRenderer(std::string source, std::string bos_token, std::string eos_token);
  // Throws ApiError 400 when the template rejects the conversation.
  ChatPrompt render(const ChatRequest& request) const;

 private:
  std::string source_, bos_, eos_;
  bool harmony_;
  ChatTemplate template_;
  mutable std::mutex mu_;  // one render at a time: the interpreter is not documented as reentrant
};

}  // namespace zinc::server
