// What the rendered prompt says about thinking, with the real templates: Qwen3.5
// opens the thought in the prompt when enable_thinking is on, Qwen3 lets the model
// open it, SmolLM2 has none; tool calls given with text arguments render; gpt-oss's
// harmony template gets reasoning_content as `thinking` and reasoning_effort.
#include "server/chat_prompt.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "test_util.h"

namespace zinc::server {
namespace {

std::string template_file(const std::string& name) {
  std::ifstream in(test::source_dir() + "/tests/data/templates/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ChatRequest request(const char* body, std::optional<bool> thinking = std::nullopt) {
  ServerDefaults d;
  d.model_id = "m";
  d.enable_thinking = thinking;
  return parse_chat_request(Json::parse(body), d);
}

constexpr const char* kHello = R"({"messages":[{"role":"user","content":"hello"}]})";

TEST(ChatPrompt, Qwen35OpensTheThoughtOnlyWhenAsked) {
  ChatRenderer r(template_file("qwen3.5.jinja"), "", "<|im_end|>");
  ChatPrompt on = r.render(request(kHello, true));
  EXPECT_TRUE(on.in_reasoning);
  EXPECT_FALSE(on.may_open);
  EXPECT_EQ(on.text.substr(on.text.size() - 8), "<think>\n");
  ChatPrompt off = r.render(request(kHello, false));
  EXPECT_FALSE(off.in_reasoning);
  EXPECT_FALSE(off.may_open);
  ChatPrompt dflt = r.render(request(kHello));  // this template's default: no thinking
  EXPECT_FALSE(dflt.in_reasoning);
}

TEST(ChatPrompt, Qwen3LetsTheModelOpenIt) {
  ChatRenderer r(template_file("qwen3.jinja"), "", "<|im_end|>");
  EXPECT_TRUE(r.render(request(kHello)).may_open);
  EXPECT_FALSE(r.render(request(kHello, false)).may_open);
}

TEST(ChatPrompt, SmolLM2HasNoThought) {
  ChatRenderer r(template_file("smollm2.jinja"), "", "<|im_end|>");
  const ChatPrompt p = r.render(request(kHello));
  EXPECT_FALSE(p.in_reasoning || p.may_open);
  EXPECT_NE(p.text.find("<|im_start|>user\nhello<|im_end|>"), std::string::npos);
}

TEST(ChatPrompt, ToolRoundTripRendersInBothQwenFormats) {
  const char* body = R"({"messages":[{"role":"user","content":"weather in Paris?"},
      {"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"c","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}}}}}]})";
  const std::string xml = ChatRenderer(template_file("qwen3.5.jinja"), "", "").render(request(body)).text;
  EXPECT_NE(xml.find("<function=get_weather>\n<parameter=city>\nParis\n</parameter>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos);
  EXPECT_NE(xml.find("\"name\": \"get_weather\""), std::string::npos);  // the tool list
  const std::string json = ChatRenderer(template_file("qwen3.jinja"), "", "").render(request(body)).text;
  EXPECT_NE(json.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"), std::string::npos) << json;
}

TEST(ChatPrompt, HarmonyGetsThinkingAndReasoningEffort) {
  const char* body = R"({"messages":[{"role":"user","content":"weather in Paris?"},
      {"role":"assistant","content":"","reasoning_content":"Need the weather tool.","tool_calls":[{"id":"c",
        "type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"c","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}}}}}],
    "reasoning_effort":"high"})";
  ChatRenderer r(template_file("gpt-oss.jinja"), "<|startoftext|>", "<|return|>");
  const ChatPrompt p = r.render(request(body));
  EXPECT_TRUE(p.harmony);
  EXPECT_FALSE(p.in_reasoning || p.may_open);
  EXPECT_NE(p.text.find("Reasoning: high\n"), std::string::npos) << p.text;
  // The thought before a tool call is kept (no final answer follows it yet).
  EXPECT_NE(p.text.find("<|start|>assistant<|channel|>analysis<|message|>Need the weather tool.<|end|>"
                        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                        "{\"city\": \"Paris\"}<|call|>"),
            std::string::npos)
      << p.text;
  EXPECT_EQ(p.text.substr(p.text.size() - 18), "<|start|>assistant");
  // Without the field the template's default stays.
  EXPECT_NE(r.render(request(kHello)).text.find("Reasoning: medium\n"), std::string::npos);
  // Other templates are not harmony.
  EXPECT_FALSE(ChatRenderer(template_file("qwen3.jinja"), "", "").render(request(body)).harmony);
}

TEST(ChatPrompt, TemplateRejectionIsA400) {
  ChatRenderer r(template_file("qwen3.5.jinja"), "", "");
  try {
    r.render(request(R"({"messages":[{"role":"system","content":"only a system message"}]})"));
    FAIL() << "rendered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
  }
}

}  // namespace
}  // namespace zinc::server
