// `zinc template` as a user runs it: a GGUF carrying the Qwen3 chat template must
// print jinja2's golden prompt for a tool conversation, and bos/eos come from the
// file's token list.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "test_util.h"

namespace zinc {
namespace {

using Json = nlohmann::ordered_json;

struct RunResult {
  int exit_code;
  std::string output;
};

RunResult run_zinc(const std::string& args) {
  std::string command = test::zinc_binary() + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A tensor-less GGUF with a chat template and a 3-token vocabulary.
std::string write_template_gguf(const std::string& name, const std::string& chat_template) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.chat_template", chat_template);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<|begin|>", "<|end|>"});
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  std::string path = test::temp_dir() + "/" + name;
  w.write_file(path, [](size_t, uint8_t*) {});
  return path;
}

TEST(ZincTemplate, PrintsTheGoldenPromptOfAGgufTemplate) {
  std::string data = test::source_dir() + "/tests/data/templates/";
  std::string model = write_template_gguf("qwen3_template.gguf", read_file(data + "qwen3.jinja"));
  Json goldens = Json::parse(read_file(data + "goldens.json"));
  const std::string wanted = "qwen3/tool_call_and_result/tools/think_off";
  const Json* golden = nullptr;
  for (const Json& c : goldens["cases"]) {
    if (c["name"] == wanted) golden = &c;
  }
  ASSERT_NE(golden, nullptr) << "golden case " << wanted << " missing";
  const Json& context = (*golden)["context"];
  ASSERT_EQ(context["enable_thinking"], false);
  ASSERT_EQ(context["add_generation_prompt"], true);

  std::string dir = test::temp_dir();
  write_text(dir + "/messages.json", context["messages"].dump());
  write_text(dir + "/tools.json", context["tools"].dump());
  RunResult r = run_zinc("template -m " + model + " --messages " + dir + "/messages.json --tools " + dir +
                         "/tools.json --kwargs '{\"enable_thinking\": false}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, (*golden)["expected"].get<std::string>());
}

TEST(ZincTemplate, SpecialTokensAndGenerationPromptSwitch) {
  std::string model = write_template_gguf(
      "tokens_template.gguf",
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}assistant:{% endif %}");
  std::string messages = test::temp_dir() + "/one_message.json";
  write_text(messages, R"([{"role": "user", "content": "hi"}])");
  RunResult with_prompt = run_zinc("template -m " + model + " --messages " + messages);
  ASSERT_EQ(with_prompt.exit_code, 0) << with_prompt.output;
  EXPECT_EQ(with_prompt.output, "<|begin|>user:hi<|end|>assistant:");
  RunResult without = run_zinc("template -m " + model + " --messages " + messages + " --no-generation-prompt");
  EXPECT_EQ(without.output, "<|begin|>user:hi<|end|>");
}

TEST(ZincTemplate, TemplateErrorsFailWithOneLine) {
  std::string model = write_template_gguf("raising_template.gguf", "\n{{ raise_exception('no system role') }}");
  std::string messages = test::temp_dir() + "/empty_messages.json";
  write_text(messages, "[]");
  RunResult r = run_zinc("template -m " + model + " --messages " + messages);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output, "zinc: error: line 2: no system role\n");
}

}  // namespace
}  // namespace zinc
