// Chat prompt rendering (see chat_prompt.h).
#include "server/chat_prompt.h"

#include "server/api_error.h"
#include "text/harmony_splitter.h"

namespace zinc::server {
namespace {

std::string_view trim_right(std::string_view s) {
  const size_t e = s.find_last_not_of(" \t\r\n");
  return e == std::string_view::npos ? std::string_view() : s.substr(0, e + 1);
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

ChatRenderer::ChatRenderer(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      harmony_(text::is_harmony_template(source_)),
      template_(source_) {}

ChatPrompt ChatRenderer::render(const ChatRequest& r) const {
  Json context = Json::object();
  context["messages"] = r.messages;
  if (harmony_) {
    for (Json& m : context["messages"])
      if (m.contains("reasoning_content")) m["thinking"] = m["reasoning_content"];
  }
  context["tools"] = r.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = true;
  context["bos_token"] = bos_;
  context["eos_token"] = eos_;
  for (const auto& [k, v] : r.template_kwargs.items()) context[k] = v;
  if (harmony_ && r.reasoning_effort) context["reasoning_effort"] = *r.reasoning_effort;
  ChatPrompt p;
  try {
    std::lock_guard lock(mu_);
    p.text = template_.render(context);
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("the chat template rejected the messages: ") + e.what(), "messages");
  }
  p.harmony = harmony_;
  const std::string_view tail = trim_right(p.text);
  p.in_reasoning = ends_with(tail, "<think>");
  p.may_open = !p.in_reasoning && !ends_with(tail, "</think>") && source_.find("<think>") != std::string::npos &&
               r.template_kwargs.value("enable_thinking", true);
  return p;
}

}  // namespace zinc::server
