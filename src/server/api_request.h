// OpenAI request bodies (chat completions, completions), checked and turned into
// what the server needs. Every type or range error throws ApiError 400 naming the
// field; unknown fields are ignored (clients send extras such as "user").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sample/sampler.h"

namespace zinc::server {

using Json = nlohmann::ordered_json;

// What `zinc serve` options set for requests that do not say.
struct ServerDefaults {
  std::string model_id;
  SamplerParams sampling;
  std::optional<bool> enable_thinking;  // unset: the template's own default
  int64_t thinking_budget = -1;         // -1: unlimited
};

// The most choices a response may ask for (n times the prompts): each is a request of
// the engine's, and the engine's queue limit applies to them together.
inline constexpr int64_t kMaxChoices = 128;

struct GenerationParams {
  SamplerParams sampling;
  bool seed_given = false;
  std::optional<int64_t> max_tokens;  // unset: until the context is full; 0 only for echo's scoring
  int64_t n = 1;                       // choices per prompt; choice k samples with seed + k
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int top_logprobs = -1;       // -1: no logprobs; 0..20
  // DRY sequence breakers as text (dry_sequence_breakers); the server maps them to
  // tokens. The other DRY fields go straight into `sampling`.
  std::vector<std::string> dry_breakers;
  bool dry_breakers_given = false;
};

enum class ToolChoice { None, Auto, Required, Named };
enum class ResponseFormat { Text, JsonObject, JsonSchema };

struct ChatRequest {
  GenerationParams gen;
  Json messages;  // normalised for the chat template (see api_request.cpp)
  Json tools;     // null when none
  ToolChoice tool_choice = ToolChoice::None;
  std::string tool_name;                         // ToolChoice::Named
  std::map<std::string, Json> tool_parameters;  // function name -> parameters schema, keys in their order
  ResponseFormat format = ResponseFormat::Text;
  Json schema;  // ResponseFormat::JsonSchema, keys in their order (properties come out in it)
  Json template_kwargs = Json::object();  // chat_template_kwargs, enable_thinking resolved
  bool thinking = false;                   // enable_thinking as rendered
  int64_t thinking_budget = -1;
  std::optional<std::string> reasoning_effort;  // low, medium or high (harmony templates)
};

// One prompt of a completion request: text, or token ids.
struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;
};

struct CompletionRequest {
  GenerationParams gen;
  std::vector<CompletionPrompt> prompts;  // at least one; choices n per prompt, in prompt order
  // The prompt's text before the reply's, and with logprobs each prompt token's logprob
  // (the first null): scoring, as lm-evaluation-harness's loglikelihood asks.
  bool echo = false;
};

ChatRequest parse_chat_request(const Json& body, const ServerDefaults& defaults);
CompletionRequest parse_completion_request(const Json& body, const ServerDefaults& defaults);

}  // namespace zinc::server
