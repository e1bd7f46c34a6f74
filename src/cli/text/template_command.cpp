// `zinc template`: prints the prompt a GGUF's chat template (tokenizer.chat_template)
// makes of a conversation, exactly as transformers' apply_chat_template would.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "cli/read_file.h"
#include "gguf/gguf.h"
#include "text/chat_template.h"

namespace zinc::cli {
namespace {

using Json = nlohmann::ordered_json;

struct TemplateOptions {
  std::string model, template_file, messages, tools, kwargs = "{}";
  bool no_generation_prompt = false;
};

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(what + " is not valid JSON: " + e.what());
  }
}

// The text of special token `id_key` (e.g. tokenizer.ggml.bos_token_id), or "".
std::string special_token(const gguf::GgufFile& file, const char* id_key) {
  if (!file.has(id_key) || !file.has("tokenizer.ggml.tokens")) return "";
  int64_t id = file.get_int(id_key);
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  if (id < 0 || static_cast<size_t>(id) >= tokens->array_size()) return "";
  return std::string(tokens->array_string(static_cast<size_t>(id)));
}

void run_template(const TemplateOptions& o) {
  if (o.model.empty() == o.template_file.empty())
    throw std::runtime_error("give -m FILE.gguf or --template-file, one of them");
  std::string source, bos, eos;
  if (!o.model.empty()) {
    auto file = gguf::GgufFile::open(o.model);
    if (!file->has("tokenizer.chat_template")) throw std::runtime_error(o.model + ": no tokenizer.chat_template");
    source = file->get_string("tokenizer.chat_template");
    bos = special_token(*file, "tokenizer.ggml.bos_token_id");
    eos = special_token(*file, "tokenizer.ggml.eos_token_id");
  } else {
    source = read_file(o.template_file);
  }
  Json messages = parse_json(read_file(o.messages), o.messages);
  if (!messages.is_array()) throw std::runtime_error(o.messages + ": expected a JSON array of messages");
  Json tools = o.tools.empty() ? Json(nullptr) : parse_json(read_file(o.tools), o.tools);
  Json kwargs = parse_json(o.kwargs, "--kwargs");
  if (!kwargs.is_object()) throw std::runtime_error("--kwargs: expected a JSON object");
  std::string prompt = render_chat(source, messages, tools, !o.no_generation_prompt, kwargs, bos, eos);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
}

}  // namespace

void add_template_command(CLI::App& app) {
  auto opts = std::make_shared<TemplateOptions>();
  CLI::App* t = app.add_subcommand("template", "Print the prompt a model's chat template makes of a conversation");
  t->add_option("-m,--model", opts->model, "GGUF file with tokenizer.chat_template");
  t->add_option("--template-file", opts->template_file, "Jinja chat template file, instead of a model's");
  t->add_option("--messages", opts->messages, "JSON file: [{\"role\": ..., \"content\": ...}, ...]")->required();
  t->add_option("--tools", opts->tools, "JSON file: the tool (function) schemas");
  t->add_flag("--no-generation-prompt", opts->no_generation_prompt, "Do not open the assistant's turn at the end");
  t->add_option("--kwargs", opts->kwargs,
                "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  t->callback([opts] { run_template(*opts); });
}

}  // namespace zinc::cli
