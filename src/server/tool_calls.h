// Tool calls in a model's answer, turned into OpenAI tool_calls. Qwen models write
// each call between <tool_call> and </tool_call>, as JSON
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
// (Qwen3, Hermes) or as XML-like parameters (Qwen3.5 / Qwen3.6 templates)
//   <function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>
// Both are accepted whatever the template. XML parameter values are text; they
// become JSON values by the tool's parameter schema (a "string" stays a string,
// other types parse as JSON when they can).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinc::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text
};

// The body between the tags; nullopt when it is neither format.
// parameter_schemas: function name -> its "parameters" JSON schema (may be empty).
std::optional<ToolCall> parse_tool_call(std::string_view body,
                                        const std::map<std::string, nlohmann::ordered_json>& parameter_schemas);

struct ToolCallText {
  std::string content;          // text outside tool calls
  std::vector<ToolCall> calls;  // calls completed by this piece
};

// Streams answer text, cutting out complete tool calls. A tail that could begin
// <tool_call> is held back. A block that does not parse goes out as content.
class ToolCallExtractor {
 public:
  explicit ToolCallExtractor(std::map<std::string, nlohmann::ordered_json> parameter_schemas)
      : schemas_(std::move(parameter_schemas)) {}

  ToolCallText push(std::string_view piece);
  // End of output; an unclosed call still counts when its body parses.
  ToolCallText flush();

 private:
  std::map<std::string, nlohmann::ordered_json> schemas_;
  std::string held_;
  bool in_call_ = false;
};

}  // namespace zinc::server
