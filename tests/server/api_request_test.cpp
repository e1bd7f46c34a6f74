// OpenAI request checks: each wrong field is a 400 naming it (404 for an unknown
// model), defaults come from the server, and messages are normalised for templates.
#include "server/api_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace zinc::server {
namespace {

ServerDefaults defaults() {
  ServerDefaults d;
  d.model_id = "tiny";
  d.sampling.temperature = 0.5f;
  d.thinking_budget = 7;
  return d;
}

Json chat(const char* extra) {
  Json body = Json::parse(R"({"messages":[{"role":"user","content":"hi"}]})");
  const Json fields = Json::parse(extra);
  for (const auto& [k, v] : fields.items()) body[k] = v;
  return body;
}

// The status and param of the ApiError the body raises (0 when it is accepted).
std::pair<int, std::string> error_of(const Json& body) {
  try {
    parse_chat_request(body, defaults());
  } catch (const ApiError& e) {
    return {e.status(), e.body()["error"]["param"].is_null() ? "" : e.body()["error"]["param"].get<std::string>()};
  }
  return {0, ""};
}

TEST(ApiRequest, BadFieldsAreRejectedByName) {
  EXPECT_EQ(error_of(chat(R"({"temperature":"hot"})")), std::make_pair(400, std::string("temperature")));
  EXPECT_EQ(error_of(chat(R"({"temperature":3})")), std::make_pair(400, std::string("temperature")));
  EXPECT_EQ(error_of(chat(R"({"max_tokens":1.5})")), std::make_pair(400, std::string("max_tokens")));
  EXPECT_EQ(error_of(chat(R"({"max_tokens":0})")), std::make_pair(400, std::string("max_tokens")));
  EXPECT_EQ(error_of(chat(R"({"n":0})")), std::make_pair(400, std::string("n")));
  EXPECT_EQ(error_of(chat(R"({"n":129})")), std::make_pair(400, std::string("n")));
  EXPECT_EQ(error_of(chat(R"({"n":2,"stream":true})")), std::make_pair(0, std::string()));  // choices by index
  EXPECT_EQ(error_of(chat(R"({"stop":[1]})")), std::make_pair(400, std::string("stop")));
  EXPECT_EQ(error_of(chat(R"({"stream":"yes"})")), std::make_pair(400, std::string("stream")));
  EXPECT_EQ(error_of(chat(R"({"top_logprobs":3})")), std::make_pair(400, std::string("top_logprobs")));
  EXPECT_EQ(error_of(chat(R"({"logprobs":true,"top_logprobs":21})")), std::make_pair(400, std::string("top_logprobs")));
  EXPECT_EQ(error_of(chat(R"({"messages":[]})")), std::make_pair(400, std::string("messages")));
  EXPECT_EQ(error_of(chat(R"({"messages":"hi"})")), std::make_pair(400, std::string("messages")));
  EXPECT_EQ(error_of(chat(R"({"messages":[{"role":"wizard","content":"x"}]})")).first, 400);
  EXPECT_EQ(error_of(chat(R"({"messages":[{"role":"user"}]})")).first, 400);
  EXPECT_EQ(error_of(chat(R"({"model":"gpt-9"})")), std::make_pair(404, std::string("model")));
  EXPECT_EQ(error_of(chat(R"({"tool_choice":"required"})")).first, 400);
  EXPECT_EQ(error_of(chat(R"({"tools":[{"type":"function","function":{"name":"f"}}],
                               "tool_choice":{"type":"function","function":{"name":"g"}}})")).first, 400);
  EXPECT_EQ(error_of(chat(R"({"response_format":{"type":"json_schema"}})")).first, 400);
  EXPECT_EQ(error_of(chat(R"({"chat_template_kwargs":{"enable_thinking":"yes"}})")).first, 400);
  EXPECT_EQ(error_of(chat(R"({"reasoning_effort":"extreme"})")), std::make_pair(400, std::string("reasoning_effort")));
  EXPECT_EQ(error_of(chat(R"({"reasoning_effort":1})")), std::make_pair(400, std::string("reasoning_effort")));
  EXPECT_EQ(error_of(chat(R"({"model":"tiny","n":1,"user":"someone","max_tokens":1000000000})")).first, 0);
  EXPECT_EQ(error_of(chat(R"({"n":3,"seed":7})")).first, 0);
}

TEST(ApiRequest, ReasoningEffortIsKeptForHarmonyTemplates) {
  EXPECT_FALSE(parse_chat_request(chat("{}"), defaults()).reasoning_effort);
  EXPECT_EQ(parse_chat_request(chat(R"({"reasoning_effort":"low"})"), defaults()).reasoning_effort, "low");
}

TEST(ApiRequest, DefaultsAndOverrides) {
  ChatRequest r = parse_chat_request(chat("{}"), defaults());
  EXPECT_FLOAT_EQ(r.gen.sampling.temperature, 0.5f);
  EXPECT_FALSE(r.gen.max_tokens);
  EXPECT_FALSE(r.gen.seed_given);
  EXPECT_EQ(r.thinking_budget, 7);
  EXPECT_EQ(r.tool_choice, ToolChoice::None);
  EXPECT_EQ(r.gen.top_logprobs, -1);
  r = parse_chat_request(chat(R"({"temperature":0,"max_completion_tokens":9,"seed":-1,"stop":"##",
      "logprobs":true,"top_logprobs":2,"thinking_budget":0,"stream":true,"stream_options":{"include_usage":true},
      "dry_multiplier":0.8,"dry_sequence_breakers":["\n"]})"),
                          defaults());
  EXPECT_EQ(r.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(*r.gen.max_tokens, 9);
  EXPECT_TRUE(r.gen.seed_given);
  EXPECT_EQ(r.gen.sampling.seed, ~uint64_t{0});
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"##"});
  EXPECT_EQ(r.gen.top_logprobs, 2);
  EXPECT_EQ(r.thinking_budget, 0);
  EXPECT_TRUE(r.gen.stream && r.gen.include_usage);
  EXPECT_FLOAT_EQ(r.gen.sampling.dry_multiplier, 0.8f);
  EXPECT_EQ(r.gen.dry_breakers, std::vector<std::string>{"\n"});
}

TEST(ApiRequest, MessagesAreNormalisedForTemplates) {
  const ChatRequest r = parse_chat_request(Json::parse(R"({"messages":[
      {"role":"developer","content":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}]},
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]})"),
                                           defaults());
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], "Be brief.");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");  // an object now
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
  EXPECT_EQ(r.tool_choice, ToolChoice::Auto);
  EXPECT_TRUE(r.tool_parameters.count("get_weather"));
}

TEST(ApiRequest, ThinkingDefaultGoesToTheTemplate) {
  ServerDefaults d = defaults();
  d.enable_thinking = false;
  EXPECT_EQ(parse_chat_request(chat("{}"), d).template_kwargs["enable_thinking"], false);
  EXPECT_EQ(parse_chat_request(chat(R"({"chat_template_kwargs":{"enable_thinking":true}})"), d)
                .template_kwargs["enable_thinking"],
            true);
  EXPECT_FALSE(parse_chat_request(chat("{}"), defaults()).template_kwargs.contains("enable_thinking"));
}

// The status and param of the ApiError a completion body raises (0 when it is accepted).
std::pair<int, std::string> completion_error_of(const char* body) {
  try {
    parse_completion_request(Json::parse(body), defaults());
  } catch (const ApiError& e) {
    return {e.status(), e.body()["error"]["param"].is_null() ? "" : e.body()["error"]["param"].get<std::string>()};
  }
  return {0, ""};
}

// A string, token ids, or a batch of either (lm-evaluation-harness sends [[ids]]).
TEST(ApiRequest, CompletionPrompts) {
  const ServerDefaults d = defaults();
  const auto prompts = [&](const char* body) { return parse_completion_request(Json::parse(body), d).prompts; };
  EXPECT_EQ(*prompts(R"({"prompt":"abc"})").at(0).text, "abc");
  EXPECT_EQ(*prompts(R"({"prompt":["abc"]})").at(0).text, "abc");
  EXPECT_EQ(prompts(R"({"prompt":[1,2,3],"logprobs":2})").at(0).tokens, (std::vector<int32_t>{1, 2, 3}));
  const auto batch = prompts(R"({"prompt":[[5,6],"b",[7]]})");
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_FALSE(batch[0].text);
  EXPECT_EQ(*batch[1].text, "b");
  EXPECT_EQ(batch[2].tokens, (std::vector<int32_t>{7}));
  EXPECT_TRUE(parse_completion_request(Json::parse(R"({"prompt":"a","echo":true})"), d).echo);
  EXPECT_EQ(*parse_completion_request(Json::parse(R"({"prompt":"a","echo":true,"max_tokens":0})"), d).gen.max_tokens,
            0);
  EXPECT_EQ(completion_error_of(R"({"prompt":""})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":[]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":[[]]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":[[1,"x"]]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":[1,[2]]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":[-1]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":[{"a":1}]})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(completion_error_of(R"({"prompt":"a","max_tokens":0})"), std::make_pair(400, std::string("max_tokens")));
  EXPECT_EQ(completion_error_of(R"({"prompt":["a","b"],"stream":true})"), std::make_pair(0, std::string()));
  EXPECT_EQ(completion_error_of(R"({"prompt":["a","b"],"n":64})"), std::make_pair(0, std::string()));
  EXPECT_EQ(completion_error_of(R"({"prompt":["a","b"],"n":65})"), std::make_pair(400, std::string("n")));
  EXPECT_EQ(completion_error_of(R"({"prompt":"a","suffix":"b"})"), std::make_pair(400, std::string("suffix")));
}

}  // namespace
}  // namespace zinc::server
