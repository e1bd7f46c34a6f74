// API requests to engine requests (see generation_job.h).
#include "server/generation_job.h"

#include <atomic>
#include <cstdio>
#include <ctime>
#include <random>

#include "server/api_error.h"
#include "server/harmony_channels.h"
#include "server/thinking.h"
#include "text/grammar.h"

namespace zinc::server {
namespace {

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string random_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = random_seed();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(salt ^ (++counter * 0x9E3779B97F4A7C15ull)));
  return buf;
}

// The schema of a tool's arguments: its parameters, or any object when it gives none.
nlohmann::ordered_json arguments_schema(const nlohmann::ordered_json& parameters) {
  return parameters.empty() ? nlohmann::ordered_json{{"type", "object"}} : parameters;
}

// The schema of one tool call in the JSON format the parser reads.
nlohmann::ordered_json call_schema(const std::string& name, const nlohmann::ordered_json& parameters) {
  return {{"type", "object"},
          {"properties", {{"name", {{"const", name}}}, {"arguments", arguments_schema(parameters)}}},
          {"required", {"name", "arguments"}}};
}

std::vector<int32_t> breaker_tokens(const GenerationParams& g, const text::Tokenizer& tokenizer) {
  static const std::vector<std::string> defaults = {"\n", ":", "\"", "*"};
  std::vector<int32_t> ids;
  // A breaker is the token spelled exactly so (a longer token that contains it does not break).
  for (const std::string& b : g.dry_breakers_given ? g.dry_breakers : defaults) {
    const auto t = tokenizer.encode(b, /*parse_special=*/false, /*add_bos=*/false, /*add_eos=*/false);
    if (t.size() == 1) ids.push_back(t[0]);
  }
  return ids;
}

// Choice k of a response.
GenerationJob common_job(const GenerationParams& g, const JobContext& c, const ReplyMeta& meta, bool chat,
                         int64_t k) {
  GenerationJob job;
  job.chat = chat;
  job.meta = meta;
  job.first_of_prompt = k == 0;
  job.request.sampling = g.sampling;
  job.request.sampling.seed = g.seed_given ? g.sampling.seed + static_cast<uint64_t>(k) : random_seed();
  if (g.sampling.dry_multiplier > 0) job.request.sampling.dry_breakers = breaker_tokens(g, c.tokenizer);
  job.request.max_tokens = g.max_tokens.value_or(c.n_ctx);  // the engine caps it by the context left
  job.request.eog_ids = c.eog_ids;
  job.request.top_logprobs = g.top_logprobs;
  job.reply.stop = g.stop;
  job.reply.logprobs = g.top_logprobs >= 0;
  job.stream = g.stream;
  job.include_usage = g.include_usage;
  job.logprobs = g.top_logprobs >= 0;
  return job;
}

bool must_call(const ChatRequest& r) {
  return r.tool_choice == ToolChoice::Required || r.tool_choice == ToolChoice::Named;
}

// A harmony reply's optional analysis message: free text, which only <|end|> and the
// next message's start close.
text::FreePassage harmony_analysis() {
  using text::special_token;
  return {special_token("<|channel|>") + "analysis" + special_token("<|message|>"),
          special_token("<|end|>") + special_token("<|start|>") + "assistant"};
}

// A harmony reply that calls a function: an optional analysis message, then
// `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`
// (after kHarmonyCallHeader, which a budget may force) and the arguments. The tags
// are special tokens; <|call|> ends it.
std::shared_ptr<const text::Grammar> harmony_call_grammar(const ChatRequest& r) {
  using text::special_token;
  const std::string channel = special_token("<|channel|>"), message = special_token("<|message|>");
  std::vector<text::JsonChoice> calls;
  for (const auto& [name, params] : r.tool_parameters) {
    if (r.tool_choice == ToolChoice::Named && name != r.tool_name) continue;
    const std::string header =
        channel + "commentary to=functions." + name + " " + special_token("<|constrain|>") + "json" + message;
    calls.push_back({header, arguments_schema(params), ""});
  }
  return text::grammar_from_json_choices(calls, harmony_analysis());
}

// A harmony reply that answers in a response format, with no tool to call: an
// optional analysis message, then the final message (its header with or without
// ` <|constrain|>json`) holding the JSON; <|return|> ends it. So once the analysis ends
// the answer always comes and conforms (InFinalMessage, used when tools may be called
// instead, constrains a final message only if the model writes one).
std::shared_ptr<const text::Grammar> harmony_final_grammar(const nlohmann::ordered_json& schema) {
  using text::special_token;
  const std::string final = special_token("<|channel|>") + "final", message = special_token("<|message|>");
  return text::grammar_from_json_choices(
      {{final + message, schema, ""}, {final + " " + special_token("<|constrain|>") + "json" + message, schema, ""}},
      harmony_analysis());
}

// Whether a harmony reply is constrained as a whole: a call it must make, or an
// answer in a response format when no tool may be called.
bool harmony_whole_reply(const ChatRequest& r, const ChatPrompt& prompt) {
  return prompt.harmony && (must_call(r) || (r.format != ResponseFormat::Text && r.tool_choice == ToolChoice::None));
}

// The grammar a chat request's answer must follow, or null. When the prompt opened
// a thought, the grammar starts after it: after </think> and the blank line the
// templates put there. A harmony reply's grammar covers the whole reply
// (harmony_whole_reply), except a response format's beside tools, which starts at the
// final message (InFinalMessage).
std::shared_ptr<const text::Grammar> answer_grammar(const ChatRequest& r, const ChatPrompt& prompt) {
  const std::string after_thought = prompt.in_reasoning ? "\n\n" : "";
  try {
    if (must_call(r) && prompt.harmony) return harmony_call_grammar(r);
    if (harmony_whole_reply(r, prompt)) {
      const nlohmann::ordered_json any_object = {{"type", "object"}};
      return harmony_final_grammar(r.format == ResponseFormat::JsonSchema ? r.schema : any_object);
    }
    if (must_call(r)) {
      nlohmann::ordered_json schema;
      if (r.tool_choice == ToolChoice::Named) {
        schema = call_schema(r.tool_name, r.tool_parameters.at(r.tool_name));
      } else {
        schema = {{"anyOf", nlohmann::ordered_json::array()}};
        for (const auto& [name, params] : r.tool_parameters) schema["anyOf"].push_back(call_schema(name, params));
      }
      return text::grammar_from_json_schema(schema, after_thought + "<tool_call>\n", "\n</tool_call>");
    }
    if (r.format == ResponseFormat::JsonSchema)
      return text::grammar_from_json_schema(r.schema, after_thought);
    if (r.format == ResponseFormat::JsonObject)
      return prompt.in_reasoning ? text::grammar_from_json_schema({{"type", "object"}}, after_thought)
                                 : text::json_object_grammar();
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, std::string("unsupported schema: ") + e.what(),
                   r.format == ResponseFormat::Text ? "tools" : "response_format");
  }
  return nullptr;
}

// A whole-reply grammar's processor: harmony's tags as the special tokens they are,
// and only `end_tag` (<|call|> after a call, <|return|> after an answer) to end.
std::unique_ptr<LogitsProcessor> harmony_reply_processor(std::shared_ptr<const text::Grammar> grammar,
                                                         const JobContext& c, const char* end_tag) {
  std::vector<int32_t> tags, end = c.eog_ids;
  for (const char* tag : {"<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|start|>"})
    if (auto id = c.tokenizer.find_token(tag)) tags.push_back(*id);
  if (auto id = c.tokenizer.find_token(end_tag)) end = {*id};
  return text::make_grammar_processor(std::move(grammar), c.tokenizer, std::move(end), std::move(tags));
}

ReplyMeta new_meta(const char* id_prefix, const JobContext& c) {
  return {id_prefix + random_id(), static_cast<int64_t>(std::time(nullptr)), c.model_id};
}

// Choice k of a chat request whose rendered prompt encodes to `ids`.
GenerationJob make_chat_job(const ChatRequest& r, const ChatPrompt& prompt, const std::vector<int32_t>& ids,
                            const JobContext& c, const ReplyMeta& meta, int64_t k) {
  GenerationJob job = common_job(r.gen, c, meta, true, k);
  job.request.prompt = ids;
  const bool thinks = prompt.in_reasoning || prompt.may_open;  // never for harmony: it has no <think>
  job.reply.harmony = prompt.harmony;
  job.reply.split_reasoning = thinks;
  job.reply.in_reasoning = prompt.in_reasoning;
  job.reply.may_open = prompt.may_open;
  job.reply.tools = r.tool_choice != ToolChoice::None;
  job.reply.tool_parameters = r.tool_parameters;
  // Order matters: the budget may force a token, which the grammar must then allow.
  if (r.thinking_budget >= 0 && thinks)
    job.request.processors.push_back(
        std::make_unique<ThinkingBudget>(c.tokenizer, r.thinking_budget, prompt.in_reasoning, prompt.may_open));
  if (r.thinking_budget >= 0 && prompt.harmony)
    job.request.processors.push_back(std::make_unique<HarmonyBudget>(
        c.tokenizer, r.thinking_budget, must_call(r) ? kHarmonyCallHeader : kHarmonyFinalHeader));
  auto grammar = answer_grammar(r, prompt);
  if (!grammar) return job;
  if (harmony_whole_reply(r, prompt)) {
    job.request.processors.push_back(harmony_reply_processor(grammar, c, must_call(r) ? "<|call|>" : "<|return|>"));
    return job;
  }
  auto p = text::make_grammar_processor(grammar, c.tokenizer, c.eog_ids);
  if (prompt.in_reasoning) p = std::make_unique<AfterThought>(c.tokenizer, std::move(p));
  if (prompt.harmony) p = std::make_unique<InFinalMessage>(c.tokenizer, std::move(p));
  job.request.processors.push_back(std::move(p));
  return job;
}

}  // namespace

std::vector<GenerationJob> make_chat_jobs(const ChatRequest& r, const ChatPrompt& prompt, const JobContext& c) {
  const ReplyMeta meta = new_meta("chatcmpl-", c);
  const std::vector<int32_t> ids = c.tokenizer.encode(prompt.text, /*parse_special=*/true, /*add_bos=*/false);
  std::vector<GenerationJob> jobs;
  for (int64_t k = 0; k < r.gen.n; ++k) jobs.push_back(make_chat_job(r, prompt, ids, c, meta, k));
  return jobs;
}

std::vector<GenerationJob> make_completion_jobs(const CompletionRequest& r, const JobContext& c) {
  const ReplyMeta meta = new_meta("cmpl-", c);
  std::vector<GenerationJob> jobs;
  for (const CompletionPrompt& p : r.prompts) {
    std::vector<int32_t> ids = p.tokens;
    if (p.text) ids = c.tokenizer.encode(*p.text, /*parse_special=*/true);
    for (int32_t t : ids)
      if (t >= c.tokenizer.n_vocab()) throw ApiError(400, "token id " + std::to_string(t) + " out of range", "prompt");
    for (int64_t k = 0; k < r.gen.n; ++k) {
      GenerationJob job = common_job(r.gen, c, meta, false, k);
      job.request.prompt = ids;
      job.echo = r.echo;
      if (r.echo) job.echo_text = p.text ? *p.text : c.tokenizer.decode(ids);
      // Scoring alone (max_tokens 0) needs the engine's scoring path even without logprobs.
      job.request.prompt_logprobs = r.echo && (r.gen.top_logprobs >= 0 || job.request.max_tokens == 0);
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

}  // namespace zinc::server
