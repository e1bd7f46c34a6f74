// Chat template rendering on top of the Jinja interpreter (see chat_template.h).
#include "text/chat_template.h"

#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"

namespace zinc {

ChatTemplate::ChatTemplate(std::string source)
    : program_(std::make_unique<jinja::Body>(jinja::parse_template(source))) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

void ChatTemplate::set_now(const std::tm& now) {
  std::tm t = now;
  std::time_t seconds = timegm(&t);
  gmtime_r(&seconds, &t);
  now_ = t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw jinja::TemplateError("the template context must be a JSON object");
  jinja::Value variables = jinja::Value::from_json(context);
  jinja::RenderOptions options;
  options.now = now_;
  return jinja::render(*program_, variables.as_dict(), options);
}

std::string render_chat(const std::string& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra_kwargs, std::string bos, std::string eos) {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = std::move(bos);
  context["eos_token"] = std::move(eos);
  if (extra_kwargs.is_object()) {
    for (const auto& [k, v] : extra_kwargs.items()) context[k] = v;
  }
  return ChatTemplate(tmpl).render(context);
}

}  // namespace zinc
