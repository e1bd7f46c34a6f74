// Tool-call parsing (see tool_calls.h).
#include "server/tool_calls.h"

#include <algorithm>

namespace zinc::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// One newline on each side belongs to the format, not to the value.
std::string_view strip_one_newline(std::string_view s) {
  if (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

std::optional<ToolCall> parse_json_call(std::string_view body) {
  const auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call{j["name"].get<std::string>(), "{}"};
  if (j.contains("arguments")) {
    const auto& a = j["arguments"];
    if (a.is_string()) {
      const auto parsed = nlohmann::ordered_json::parse(a.get<std::string>(), nullptr, false);
      if (!parsed.is_object()) return std::nullopt;
      call.arguments = parsed.dump();
    } else if (a.is_object()) {
      call.arguments = a.dump();
    } else {
      return std::nullopt;
    }
  }
  return call;
}

nlohmann::ordered_json parameter_value(std::string_view text, const nlohmann::ordered_json* schema) {
  const bool is_string = schema && schema->is_object() && schema->contains("type") && (*schema)["type"] == "string";
  if (!is_string) {
    auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
    if (!parsed.is_discarded()) return parsed;
  }
  return std::string(text);
}

std::optional<ToolCall> parse_xml_call(std::string_view body,
                                       const std::map<std::string, nlohmann::ordered_json>& schemas) {
  constexpr std::string_view fn_open = "<function=", fn_close = "</function>";
  constexpr std::string_view p_open = "<parameter=", p_close = "</parameter>";
  if (body.substr(0, fn_open.size()) != fn_open) return std::nullopt;
  const size_t name_end = body.find('>');
  const size_t end = body.rfind(fn_close);
  if (name_end == std::string_view::npos || end == std::string_view::npos || end < name_end) return std::nullopt;
  ToolCall call{std::string(trim(body.substr(fn_open.size(), name_end - fn_open.size()))), ""};
  if (call.name.empty() || !trim(body.substr(end + fn_close.size())).empty()) return std::nullopt;
  const nlohmann::ordered_json* properties = nullptr;
  if (auto it = schemas.find(call.name);
      it != schemas.end() && it->second.is_object() && it->second.contains("properties"))
    properties = &it->second["properties"];
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  std::string_view rest = body.substr(name_end + 1, end - name_end - 1);
  for (;;) {
    rest = trim(rest);
    if (rest.empty()) break;
    if (rest.substr(0, p_open.size()) != p_open) return std::nullopt;
    const size_t key_end = rest.find('>');
    const size_t value_end = rest.find(p_close);
    if (key_end == std::string_view::npos || value_end == std::string_view::npos || value_end < key_end)
      return std::nullopt;
    const std::string key(trim(rest.substr(p_open.size(), key_end - p_open.size())));
    const std::string_view value = strip_one_newline(rest.substr(key_end + 1, value_end - key_end - 1));
    const nlohmann::ordered_json* schema = properties && properties->contains(key) ? &(*properties)[key] : nullptr;
    args[key] = parameter_value(value, schema);
    rest.remove_prefix(value_end + p_close.size());
  }
  call.arguments = args.dump();
  return call;
}

size_t partial_tag_tail(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ToolCall> parse_tool_call(std::string_view body,
                                        const std::map<std::string, nlohmann::ordered_json>& schemas) {
  body = trim(body);
  if (body.substr(0, 1) == "{") return parse_json_call(body);
  return parse_xml_call(body, schemas);
}

ToolCallText ToolCallExtractor::push(std::string_view piece) {
  ToolCallText out;
  held_.append(piece);
  for (;;) {
    if (!in_call_) {
      const size_t open = held_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_tag_tail(held_, kOpen);
        out.content.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      out.content.append(held_, 0, open);
      held_.erase(0, open + kOpen.size());
      in_call_ = true;
    }
    const size_t close = held_.find(kClose);
    if (close == std::string::npos) return out;
    if (auto call = parse_tool_call(std::string_view(held_).substr(0, close), schemas_)) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content.append(kOpen).append(held_, 0, close + kClose.size());
    }
    held_.erase(0, close + kClose.size());
    in_call_ = false;
  }
}

ToolCallText ToolCallExtractor::flush() {
  ToolCallText out;
  if (in_call_) {
    if (auto call = parse_tool_call(held_, schemas_)) out.calls.push_back(std::move(*call));
    else out.content.append(kOpen).append(held_);
  } else {
    out.content = held_;
  }
  held_.clear();
  in_call_ = false;
  return out;
}

}  // namespace zinc::server
