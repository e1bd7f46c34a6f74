// Tool calls cut out of streamed answer text, in both Qwen formats; a block that
// does not parse stays text.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

namespace zinc::server {
namespace {

using json = nlohmann::ordered_json;  // == on objects compares their order too

const std::map<std::string, json> kSchemas = {
    {"get_weather",
     json::parse(R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}})")}};

ToolCallText feed(ToolCallExtractor& x, const std::vector<std::string>& pieces) {
  ToolCallText all;
  for (const auto& p : pieces) {
    ToolCallText t = x.push(p);
    all.content += t.content;
    for (auto& c : t.calls) all.calls.push_back(c);
  }
  ToolCallText t = x.flush();
  all.content += t.content;
  for (auto& c : t.calls) all.calls.push_back(c);
  return all;
}

TEST(ToolCalls, JsonFormatSplitOverPieces) {
  ToolCallExtractor x(kSchemas);
  const auto t = feed(x, {"Sure.\n<tool", "_call>\n{\"name\": \"get_weather\", ",
                          "\"arguments\": {\"city\": \"Paris\"}}\n</tool_", "call>"});
  EXPECT_EQ(t.content, "Sure.\n");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(t.calls[0].arguments), json::parse(R"({"city":"Paris"})"));
}

TEST(ToolCalls, XmlFormatTypesValuesBySchema) {
  ToolCallExtractor x(kSchemas);
  const auto t = feed(x, {"<tool_call>\n<function=get_weather>\n<parameter=city>\n2024\n</parameter>\n",
                          "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"});
  ASSERT_EQ(t.calls.size(), 1u);
  // city is a string in the schema, so "2024" stays text; days is an integer.
  EXPECT_EQ(json::parse(t.calls[0].arguments), json::parse(R"({"city":"2024","days":3})"));
  EXPECT_EQ(t.content, "");
}

TEST(ToolCalls, ArgumentsKeepTheModelsOrder) {
  ToolCallExtractor x(kSchemas);
  const auto t = feed(x, {"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n",
                          "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
                          R"(<tool_call>{"name": "get_weather", )",
                          R"("arguments": {"days": 2, "city": "Oslo"}}</tool_call>)"});
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].arguments, R"({"days":3,"city":"Paris"})");
  EXPECT_EQ(t.calls[1].arguments, R"({"days":2,"city":"Oslo"})");
}

TEST(ToolCalls, TwoCallsAndArgumentsAsText) {
  ToolCallExtractor x({});
  const auto t = feed(x, {"<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>\n",
                          "<tool_call>{\"name\":\"b\"}</tool_call>"});
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].name, "a");
  EXPECT_EQ(json::parse(t.calls[0].arguments), json::parse(R"({"x":1})"));
  EXPECT_EQ(t.calls[1].arguments, "{}");
  EXPECT_EQ(t.content, "\n");
}

TEST(ToolCalls, BrokenBlockStaysText) {
  ToolCallExtractor x({});
  const auto t = feed(x, {"<tool_call>not json</tool_call> after"});
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.content, "<tool_call>not json</tool_call> after");
}

TEST(ToolCalls, UnclosedCallCountsWhenItParses) {
  ToolCallExtractor x({});
  auto t = feed(x, {"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"});
  ASSERT_EQ(t.calls.size(), 1u);
  ToolCallExtractor y({});
  t = feed(y, {"<tool_call>\n{\"name\": \"f\", \"argu"});
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ToolCalls, LookalikeTextIsReleased) {
  ToolCallExtractor x({});
  EXPECT_EQ(x.push("a <tool").content, "a ");
  EXPECT_EQ(x.push("box>").content, "<toolbox>");
}

}  // namespace
}  // namespace zinc::server
