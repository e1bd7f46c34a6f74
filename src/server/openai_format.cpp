// OpenAI response shapes (see openai_format.h).
#include "server/openai_format.h"

namespace zinc::server {
namespace {

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

Json chat_logprobs(const std::vector<TokenLogprobs>& lps) {
  Json content = Json::array();
  for (const TokenLogprobs& lp : lps) {
    Json top = Json::array();
    for (const auto& alt : lp.top)
      top.push_back({{"token", alt.text}, {"logprob", alt.logprob}, {"bytes", bytes_of(alt.text)}});
    content.push_back({{"token", lp.chosen.text},
                       {"logprob", lp.chosen.logprob},
                       {"bytes", bytes_of(lp.chosen.text)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

Json text_logprobs(const std::vector<TokenLogprobs>& lps, size_t offset) {
  Json tokens = Json::array(), logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  for (const TokenLogprobs& lp : lps) {
    tokens.push_back(lp.chosen.text);
    logprobs.push_back(lp.predicted ? Json(lp.chosen.logprob) : Json(nullptr));
    Json alts = Json::object();
    for (const auto& alt : lp.top) alts[alt.text] = alt.logprob;
    top.push_back(lp.predicted ? alts : Json(nullptr));
    offsets.push_back(offset);
    offset += lp.chosen.text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json finish_json(const std::string& reason) { return reason.empty() ? Json(nullptr) : Json(reason); }

Json tool_call_json(const ToolCall& c, const std::string& id) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

std::string call_id(const std::string& prefix, size_t index) { return "call_" + prefix + "_" + std::to_string(index); }

}  // namespace

std::string finish_reason_name(FinishReason reason, bool made_tool_calls) {
  if (reason == FinishReason::Length) return "length";
  return made_tool_calls ? "tool_calls" : "stop";
}

Json usage_json(const RequestStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.generated_tokens},
          {"total_tokens", s.prompt_tokens + s.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump(j) + "\n\n"; }

void Reply::add(ReplyDelta d) {
  reasoning += d.reasoning;
  content += d.content;
  for (auto& c : d.calls) calls.push_back(std::move(c));
  for (auto& lp : d.logprobs) logprobs.push_back(std::move(lp));
}

namespace {

Json chat_choice(const ReplyMeta& meta, const Choice& c, size_t index, bool logprobs) {
  const Reply& reply = c.reply;
  // Tool call ids stay unique across the choices.
  const std::string call_prefix = index == 0 ? meta.id : meta.id + "-" + std::to_string(index);
  Json message = {{"role", "assistant"}};
  // With tool calls, whitespace between them is not an answer.
  const bool blank = reply.content.find_first_not_of(" \t\r\n") == std::string::npos;
  message["content"] = reply.calls.empty() || !blank ? Json(reply.content) : Json(nullptr);
  if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
  if (!reply.calls.empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < reply.calls.size(); ++i)
      calls.push_back(tool_call_json(reply.calls[i], call_id(call_prefix, i)));
    message["tool_calls"] = calls;
  }
  return {{"index", index},
          {"message", message},
          {"logprobs", logprobs ? chat_logprobs(reply.logprobs) : Json(nullptr)},
          {"finish_reason", c.finish_reason}};
}

}  // namespace

Json chat_completion(const ReplyMeta& meta, const std::vector<Choice>& choices, const RequestStats& usage,
                     bool logprobs) {
  Json out = Json::array();
  for (size_t k = 0; k < choices.size(); ++k) out.push_back(chat_choice(meta, choices[k], k, logprobs));
  return {{"id", meta.id}, {"object", "chat.completion"}, {"created", meta.created}, {"model", meta.model},
          {"choices", out}, {"usage", usage_json(usage)}};
}

Json chat_delta(const ReplyDelta& d, const std::string& id_prefix, size_t first_call_index) {
  Json delta = Json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.calls.empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < d.calls.size(); ++i) {
      Json c = tool_call_json(d.calls[i], call_id(id_prefix, first_call_index + i));
      c["index"] = first_call_index + i;
      calls.push_back(c);
    }
    delta["tool_calls"] = calls;
  }
  return delta;
}

Json chat_chunk(const ReplyMeta& meta, size_t index, Json delta, const std::string& finish_reason,
                const std::vector<TokenLogprobs>* logprobs) {
  Json choice = {{"index", index}, {"delta", std::move(delta)},
                 {"logprobs", logprobs ? chat_logprobs(*logprobs) : Json(nullptr)},
                 {"finish_reason", finish_json(finish_reason)}};
  return {{"id", meta.id}, {"object", "chat.completion.chunk"}, {"created", meta.created}, {"model", meta.model},
          {"choices", Json::array({choice})}};
}

Json chat_usage_chunk(const ReplyMeta& meta, const RequestStats& stats) {
  return {{"id", meta.id}, {"object", "chat.completion.chunk"}, {"created", meta.created}, {"model", meta.model},
          {"choices", Json::array()}, {"usage", usage_json(stats)}};
}

Json text_completion(const ReplyMeta& meta, const std::vector<Choice>& choices, const RequestStats& usage,
                     bool logprobs) {
  Json out = Json::array();
  for (size_t k = 0; k < choices.size(); ++k)
    out.push_back({{"index", k}, {"text", choices[k].reply.content},
                   {"logprobs", logprobs ? text_logprobs(choices[k].reply.logprobs, 0) : Json(nullptr)},
                   {"finish_reason", choices[k].finish_reason}});
  return {{"id", meta.id}, {"object", "text_completion"}, {"created", meta.created}, {"model", meta.model},
          {"choices", out}, {"usage", usage_json(usage)}};
}

Json text_chunk(const ReplyMeta& meta, size_t index, const std::string& text, const std::string& finish_reason,
                const std::vector<TokenLogprobs>* logprobs, size_t text_offset) {
  Json choice = {{"index", index}, {"text", text},
                 {"logprobs", logprobs ? text_logprobs(*logprobs, text_offset) : Json(nullptr)},
                 {"finish_reason", finish_json(finish_reason)}};
  return {{"id", meta.id}, {"object", "text_completion"}, {"created", meta.created}, {"model", meta.model},
          {"choices", Json::array({choice})}};
}

Json text_usage_chunk(const ReplyMeta& meta, const RequestStats& stats) {
  return {{"id", meta.id}, {"object", "text_completion"}, {"created", meta.created}, {"model", meta.model},
          {"choices", Json::array()}, {"usage", usage_json(stats)}};
}

}  // namespace zinc::server
