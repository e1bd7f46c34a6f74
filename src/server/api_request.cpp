// OpenAI request parsing and checks (see api_request.h).
#include "server/api_request.h"

#include "server/api_error.h"

namespace zinc::server {
namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// A present, non-null field, or nullptr.
const Json* find(const Json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const Json& body, const char* key, double lo, double hi) {
  const Json* v = find(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

std::optional<int64_t> integer(const Json& body, const char* key, int64_t lo, int64_t hi) {
  const Json* v = find(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(key, std::string("'") + key + "' must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(key, std::string("'") + key + "' is too large");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

std::optional<bool> boolean(const Json& body, const char* key) {
  const Json* v = find(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, std::string("'") + key + "' must be a boolean");
  return v->get<bool>();
}

std::optional<std::string> string(const Json& body, const char* key) {
  const Json* v = find(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(key, std::string("'") + key + "' must be a string");
  return v->get<std::string>();
}

std::vector<std::string> string_list(const Json& body, const char* key, size_t max) {
  const Json* v = find(body, key);
  if (!v) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const Json& s : *v) {
      if (!s.is_string()) bad(key, std::string("'") + key + "' must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad(key, std::string("'") + key + "' must be a string or an array of strings");
  }
  if (out.size() > max) bad(key, std::string("'") + key + "' has more than " + std::to_string(max) + " entries");
  return out;
}

GenerationParams parse_generation(const Json& body, const ServerDefaults& d) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  if (auto model = string(body, "model"); model && *model != d.model_id)
    throw ApiError(404, "The model '" + *model + "' does not exist; this server serves '" + d.model_id + "'", "model",
                   "model_not_found");
  GenerationParams g;
  g.n = integer(body, "n", 1, kMaxChoices).value_or(1);
  SamplerParams& s = g.sampling;
  s = d.sampling;
  // max_completion_tokens is the newer name; either caps the reply. Beyond the
  // context it is capped there (finish_reason "length").
  if (auto n = integer(body, "max_tokens", 0, INT64_MAX)) g.max_tokens = n;
  if (auto n = integer(body, "max_completion_tokens", 0, INT64_MAX)) g.max_tokens = n;
  g.stop = string_list(body, "stop", 16);
  if (auto t = number(body, "temperature", 0, 2)) s.temperature = static_cast<float>(*t);
  if (auto p = number(body, "top_p", 0, 1)) s.top_p = static_cast<float>(*p);
  if (auto k = integer(body, "top_k", -1, INT32_MAX)) s.top_k = static_cast<int>(*k);
  if (auto m = number(body, "min_p", 0, 1)) s.min_p = static_cast<float>(*m);
  if (auto p = number(body, "presence_penalty", -2, 2)) s.presence_penalty = static_cast<float>(*p);
  if (auto p = number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = static_cast<float>(*p);
  if (auto p = number(body, "repetition_penalty", 1e-3, 100)) s.repeat_penalty = static_cast<float>(*p);
  if (auto n = integer(body, "repeat_last_n", 0, 1 << 20)) s.penalty_last_n = static_cast<int>(*n);
  if (const Json* seed = find(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
    g.seed_given = true;
  }
  if (auto m = number(body, "dry_multiplier", 0, 100)) s.dry_multiplier = static_cast<float>(*m);
  if (auto b = number(body, "dry_base", 1, 100)) s.dry_base = static_cast<float>(*b);
  if (auto n = integer(body, "dry_allowed_length", 0, 1 << 20)) s.dry_allowed_length = static_cast<int>(*n);
  if (auto n = integer(body, "dry_penalty_last_n", -1, 1 << 20)) s.dry_penalty_last_n = static_cast<int>(*n);
  if (find(body, "dry_sequence_breakers")) {
    g.dry_breakers = string_list(body, "dry_sequence_breakers", 64);
    g.dry_breakers_given = true;
  }
  g.stream = boolean(body, "stream").value_or(false);
  if (const Json* so = find(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    g.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  return g;
}

// Message content as the templates expect it: a string. Text parts are joined.
std::string content_text(const Json& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "content must be a string or an array of content parts");
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(param, "only text content parts are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

Json normalise_messages(const Json& body) {
  const Json* messages = find(body, "messages");
  if (!messages) bad("messages", "'messages' is required");
  if (!messages->is_array()) bad("messages", "'messages' must be an array");
  if (messages->empty()) bad("messages", "'messages' must not be empty");
  Json out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(param, "each message must be an object");
    const auto role = string(m, "role");
    if (!role) bad(param + ".role", "each message needs a role");
    Json msg = Json::object();
    if (*role == "system" || *role == "developer") {
      msg["role"] = "system";
    } else if (*role == "user" || *role == "assistant" || *role == "tool") {
      msg["role"] = *role;
    } else {
      bad(param + ".role", "unknown role '" + *role + "' (system, developer, user, assistant or tool)");
    }
    if (*role != "assistant" && !find(m, "content")) bad(param + ".content", "a " + *role + " message needs content");
    msg["content"] = content_text(m.contains("content") ? m["content"] : Json(), param + ".content");
    if (*role == "assistant") {
      if (auto r = string(m, "reasoning_content")) msg["reasoning_content"] = *r;
      if (const Json* calls = find(m, "tool_calls")) {
        if (!calls->is_array()) bad(param + ".tool_calls", "'tool_calls' must be an array");
        Json rendered = Json::array();
        for (const Json& c : *calls) {
          const Json* fn = c.is_object() ? find(c, "function") : nullptr;
          if (!fn || !fn->is_object() || !string(*fn, "name"))
            bad(param + ".tool_calls", "each tool call needs function.name");
          // Templates iterate the arguments as a mapping: parse the JSON text.
          Json args = Json::object();
          if (const Json* a = find(*fn, "arguments")) {
            args = a->is_string() ? Json::parse(a->get<std::string>(), nullptr, false) : *a;
            if (!args.is_object()) bad(param + ".tool_calls", "function.arguments must be a JSON object (as text)");
          }
          Json call = {{"type", "function"}, {"function", {{"name", (*fn)["name"]}, {"arguments", args}}}};
          if (auto id = string(c, "id")) call["id"] = *id;
          rendered.push_back(call);
        }
        msg["tool_calls"] = rendered;
      }
    }
    if (*role == "tool") {
      if (auto id = string(m, "tool_call_id")) msg["tool_call_id"] = *id;
    }
    if (auto name = string(m, "name")) msg["name"] = *name;
    out.push_back(msg);
  }
  return out;
}

void parse_tools(const Json& body, ChatRequest& r) {
  const Json* tools = find(body, "tools");
  if (tools) {
    if (!tools->is_array()) bad("tools", "'tools' must be an array");
    for (const Json& t : *tools) {
      const Json* fn = t.is_object() ? find(t, "function") : nullptr;
      if (!fn || !fn->is_object() || t.value("type", "function") != "function" || !string(*fn, "name"))
        bad("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      const Json* params = find(*fn, "parameters");
      if (params && !params->is_object()) bad("tools", "function.parameters must be a JSON schema object");
      r.tool_parameters[(*fn)["name"].get<std::string>()] = params ? *params : Json::object();
    }
    if (!tools->empty()) r.tools = *tools;
  }
  r.tool_choice = r.tools.is_null() ? ToolChoice::None : ToolChoice::Auto;
  const Json* choice = find(body, "tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") r.tool_choice = ToolChoice::None;
    else if (c == "auto") r.tool_choice = r.tools.is_null() ? ToolChoice::None : ToolChoice::Auto;
    else if (c == "required") r.tool_choice = ToolChoice::Required;
    else bad("tool_choice", "'tool_choice' must be none, auto, required or a named function");
  } else if (choice->is_object()) {
    const Json* fn = find(*choice, "function");
    if (!fn || !fn->is_object() || !string(*fn, "name")) bad("tool_choice", "a named tool_choice needs function.name");
    r.tool_choice = ToolChoice::Named;
    r.tool_name = (*fn)["name"].get<std::string>();
    if (!r.tool_parameters.count(r.tool_name))
      bad("tool_choice", "tool_choice names '" + r.tool_name + "', which is not in tools");
  } else {
    bad("tool_choice", "'tool_choice' must be a string or an object");
  }
  if (r.tool_choice == ToolChoice::Required && r.tools.is_null())
    bad("tool_choice", "tool_choice 'required' needs tools");
  if (r.tool_choice == ToolChoice::None) r.tools = nullptr;
}

void parse_response_format(const Json& body, ChatRequest& r) {
  const Json* f = find(body, "response_format");
  if (!f) return;
  if (!f->is_object()) bad("response_format", "'response_format' must be an object");
  const auto type = string(*f, "type").value_or("text");
  if (type == "text") return;
  if (type == "json_object") {
    r.format = ResponseFormat::JsonObject;
    return;
  }
  if (type != "json_schema")
    bad("response_format.type", "response_format.type must be text, json_object or json_schema");
  const Json* js = find(*f, "json_schema");
  const Json* schema = js && js->is_object() ? find(*js, "schema") : nullptr;
  if (!schema || !(schema->is_object() || schema->is_boolean()))
    bad("response_format.json_schema", "json_schema needs a 'schema' object");
  r.format = ResponseFormat::JsonSchema;
  r.schema = *schema;
}

// Checks what depends on the whole request: max_tokens 0 (scoring, with echo only)
// and the number of choices.
void check_choices(const GenerationParams& g, size_t prompts, bool echo) {
  if (g.max_tokens == 0 && !echo) bad("max_tokens", "'max_tokens' must be at least 1 (0 only with 'echo')");
  if (g.n * static_cast<int64_t>(prompts) > kMaxChoices)
    bad("n", "n times the prompts must be at most " + std::to_string(kMaxChoices));
}

// A prompt of token ids.
CompletionPrompt token_prompt(const Json& ids) {
  CompletionPrompt p;
  for (const Json& t : ids) {
    if (!t.is_number_integer()) bad("prompt", "a prompt of token ids must hold only integers");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > INT32_MAX) bad("prompt", "token id out of range");
    p.tokens.push_back(static_cast<int32_t>(id));
  }
  if (p.tokens.empty()) bad("prompt", "a prompt must not be empty");
  return p;
}

// A string, an array of token ids, or an array of prompts (strings or arrays of ids).
std::vector<CompletionPrompt> parse_prompts(const Json* p) {
  if (!p) bad("prompt", "'prompt' is required");
  const auto text = [](const Json& s) {
    if (s.get_ref<const std::string&>().empty()) bad("prompt", "a prompt must not be empty");
    return CompletionPrompt{s.get<std::string>(), {}};
  };
  if (p->is_string()) return {text(*p)};
  if (!p->is_array() || p->empty())
    bad("prompt", "'prompt' must be a string, an array of token ids, or an array of such prompts");
  if ((*p)[0].is_number_integer()) return {token_prompt(*p)};
  if (p->size() > static_cast<size_t>(kMaxChoices))
    bad("prompt", "at most " + std::to_string(kMaxChoices) + " prompts");
  std::vector<CompletionPrompt> out;
  for (const Json& one : *p) {
    if (one.is_string()) out.push_back(text(one));
    else if (one.is_array()) out.push_back(token_prompt(one));
    else bad("prompt", "each prompt must be a string or an array of token ids");
  }
  return out;
}

}  // namespace

ChatRequest parse_chat_request(const Json& body, const ServerDefaults& d) {
  ChatRequest r;
  r.gen = parse_generation(body, d);
  check_choices(r.gen, 1, false);
  if (auto lp = boolean(body, "logprobs"); lp && *lp) r.gen.top_logprobs = 0;
  if (auto k = integer(body, "top_logprobs", 0, 20)) {
    if (r.gen.top_logprobs < 0) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.gen.top_logprobs = static_cast<int>(*k);
  }
  r.messages = normalise_messages(body);
  parse_tools(body, r);
  parse_response_format(body, r);
  if (const Json* kw = find(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.template_kwargs = *kw;
    if (kw->contains("enable_thinking") && !(*kw)["enable_thinking"].is_boolean())
      bad("chat_template_kwargs.enable_thinking", "enable_thinking must be a boolean");
  }
  if (!r.template_kwargs.contains("enable_thinking") && d.enable_thinking)
    r.template_kwargs["enable_thinking"] = *d.enable_thinking;
  r.thinking_budget = integer(body, "thinking_budget", -1, INT64_MAX).value_or(d.thinking_budget);
  r.reasoning_effort = string(body, "reasoning_effort");
  if (r.reasoning_effort && *r.reasoning_effort != "low" && *r.reasoning_effort != "medium" &&
      *r.reasoning_effort != "high")
    bad("reasoning_effort", "'reasoning_effort' must be low, medium or high");
  return r;
}

CompletionRequest parse_completion_request(const Json& body, const ServerDefaults& d) {
  CompletionRequest r;
  r.gen = parse_generation(body, d);
  if (auto k = integer(body, "logprobs", 0, 20)) r.gen.top_logprobs = static_cast<int>(*k);
  r.echo = boolean(body, "echo").value_or(false);
  if (find(body, "suffix")) bad("suffix", "'suffix' is not supported");
  r.prompts = parse_prompts(find(body, "prompt"));
  check_choices(r.gen, r.prompts.size(), r.echo);
  return r;
}

}  // namespace zinc::server
