// Chat templates: renders a model's tokenizer.chat_template (Jinja) into the
// prompt text, byte for byte as transformers' apply_chat_template does with
// jinja2 (trim_blocks, lstrip_blocks, loop controls, raise_exception,
// strftime_now and a tojson that writes json.dumps with ensure_ascii=False).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zinc {

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses the template; throws jinja::TemplateError ("line N: ...") on a syntax error.
  explicit ChatTemplate(std::string source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // context: the template's variables (messages, tools, add_generation_prompt,
  // enable_thinking, bos_token, eos_token, ...). An ordered_json keeps the key
  // order of tool schemas and arguments, which tojson reproduces; a plain
  // nlohmann::json converts implicitly (with its keys sorted).
  // Throws jinja::TemplateError on failure or when the template raises.
  std::string render(const nlohmann::ordered_json& context) const;

  // Fixes the date and time strftime_now() formats (tests, reproducible prompts);
  // by default it is the current local time. Fields beyond the calendar date and
  // clock time (weekday, day of year) are derived.
  void set_now(const std::tm& now);

 private:
  std::unique_ptr<std::vector<std::unique_ptr<jinja::Stmt>>> program_;
  std::optional<std::tm> now_;
};

// The variables transformers passes: messages, tools (None when null),
// documents (None), add_generation_prompt, bos_token, eos_token, then
// extra_kwargs (e.g. enable_thinking) on top.
std::string render_chat(const std::string& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra_kwargs, std::string bos, std::string eos);

}  // namespace zinc
