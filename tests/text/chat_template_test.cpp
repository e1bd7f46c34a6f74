// Chat templates against jinja2: every real template in tests/data/templates
// rendered for every golden conversation must match Python's output byte for
// byte, and each interpreter feature (features.json) likewise. Goldens come from
// tools/gen_template_goldens.py.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"
#include "text/chat_template.h"
#include "text/jinja/value.h"

namespace zinc {
namespace {

using Json = nlohmann::ordered_json;

std::string data_dir() { return test::source_dir() + "/tests/data/templates/"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Json load_goldens(const std::string& file) { return Json::parse(read_file(data_dir() + file)); }

std::tm golden_now(const Json& goldens) {
  const Json& n = goldens.at("now");
  std::tm tm{};
  tm.tm_year = n[0].get<int>() - 1900;
  tm.tm_mon = n[1].get<int>() - 1;
  tm.tm_mday = n[2].get<int>();
  tm.tm_hour = n[3].get<int>();
  tm.tm_min = n[4].get<int>();
  tm.tm_sec = n[5].get<int>();
  return tm;
}

// Where two strings first differ, with some context, for readable failures.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i < 40 ? 0 : i - 40;
  return "first difference at byte " + std::to_string(i) + "\n  want: " + Json(want.substr(from, 80)).dump() +
         "\n  got:  " + Json(got.substr(from, 80)).dump();
}

// Renders one golden case; returns a failure description or "" when it matches.
std::string check_case(const ChatTemplate& tmpl, const Json& c) {
  if (c.contains("expected")) {
    std::string want = c["expected"].get<std::string>();
    try {
      std::string got = tmpl.render(c["context"]);
      return got == want ? "" : first_difference(want, got);
    } catch (const jinja::TemplateError& e) {
      return std::string("unexpected error: ") + e.what();
    }
  }
  // jinja2 failed: so must we, and with the same message where the message is the
  // template's own (raise_exception), names the undefined value or a type error.
  std::string error = c["error"].get<std::string>();
  try {
    std::string got = tmpl.render(c["context"]);
    return "rendered although jinja2 failed with " + error + "; got " + Json(got).dump();
  } catch (const jinja::TemplateError& e) {
    std::string what = e.what();
    for (const char* kind : {"TemplateError: ", "UndefinedError: ", "TypeError: "}) {
      if (error.rfind(kind, 0) == 0 && what.find(error.substr(std::string(kind).size())) == std::string::npos) {
        return "error message '" + what + "' lacks '" + error + "'";
      }
    }
    return "";
  }
}

void check_template_goldens(const std::string& template_file) {
  Json goldens = load_goldens("goldens.json");
  ChatTemplate tmpl(read_file(data_dir() + template_file));
  tmpl.set_now(golden_now(goldens));
  int checked = 0;
  for (const Json& c : goldens["cases"]) {
    if (c["template"] != template_file) continue;
    ++checked;
    std::string failure = check_case(tmpl, c);
    EXPECT_EQ(failure, "") << c["name"].get<std::string>();
  }
  EXPECT_GT(checked, 20) << "too few golden cases for " << template_file;
}

TEST(ChatTemplateGoldens, Qwen3) { check_template_goldens("qwen3.jinja"); }
TEST(ChatTemplateGoldens, Qwen3_5) { check_template_goldens("qwen3.5.jinja"); }
TEST(ChatTemplateGoldens, Qwen3_6) { check_template_goldens("qwen3.6.jinja"); }
TEST(ChatTemplateGoldens, Qwen3_6Unsloth) { check_template_goldens("qwen3.6-unsloth.jinja"); }
TEST(ChatTemplateGoldens, Gemma3) { check_template_goldens("gemma3.jinja"); }
TEST(ChatTemplateGoldens, SmolLM2) { check_template_goldens("smollm2.jinja"); }
TEST(ChatTemplateGoldens, Llama3_1) { check_template_goldens("llama3.1.jinja"); }
TEST(ChatTemplateGoldens, Llama3_2) { check_template_goldens("llama3.2.jinja"); }
TEST(ChatTemplateGoldens, GptOss) { check_template_goldens("gpt-oss.jinja"); }

TEST(ChatTemplateFeatures, MatchJinja2) {
  Json goldens = load_goldens("features.json");
  ASSERT_GT(goldens["cases"].size(), 40u);
  for (const Json& c : goldens["cases"]) {
    std::string name = c["name"].get<std::string>();
    try {
      ChatTemplate tmpl(c["template"].get<std::string>());
      tmpl.set_now(golden_now(goldens));
      EXPECT_EQ(check_case(tmpl, c), "") << name;
    } catch (const jinja::TemplateError& e) {
      // A syntax error surfaces while parsing: fine only where jinja2 failed too.
      EXPECT_TRUE(c.contains("error")) << name << ": " << e.what();
    }
  }
}

TEST(ChatTemplate, ErrorsNameTheTemplateLine) {
  ChatTemplate tmpl("line one\n{% if true %}\n{{ raise_exception('boom') }}\n{% endif %}");
  try {
    tmpl.render(Json::object());
    FAIL() << "expected an error";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(std::string(e.what()), "line 3: boom");
  }
  try {
    ChatTemplate broken("a\nb {{ 1 + }}");
    FAIL() << "expected a syntax error";
  } catch (const jinja::TemplateError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("line 2: ", 0), 0u) << e.what();
  }
}

TEST(ChatTemplate, AcceptsAPlainJsonContext) {
  // nlohmann::json converts to ordered_json (its keys arrive sorted).
  nlohmann::json context = {{"b", 1}, {"a", "x"}};
  EXPECT_EQ(ChatTemplate("{{ a }}{{ b }}").render(context), "x1");
}

TEST(ChatTemplate, GenerationBlockRendersItsBody) {
  // transformers' {% generation %} marks assistant text; rendering is unchanged.
  ChatTemplate tmpl("a{% generation %}b{{ 1 }}{% endgeneration %}c");
  EXPECT_EQ(tmpl.render(Json::object()), "ab1c");
}

TEST(ChatTemplate, RenderChatPassesTransformersVariables) {
  std::string tmpl =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{{ tools | tojson }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ enable_thinking }}|{{ eos_token }}";
  Json messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  Json tools = Json::parse(R"([{"name": "f", "b": 1, "a": 2}])");
  std::string out = render_chat(tmpl, messages, tools, true, Json{{"enable_thinking", false}}, "<s>", "</s>");
  EXPECT_EQ(out, R"(<s>[user:hi][{"name": "f", "b": 1, "a": 2}]|True|True|False|</s>)");
  EXPECT_EQ(render_chat("{{ tools is none }}", messages, nullptr, false, Json::object(), "", ""), "True");
}

TEST(ChatTemplate, Qwen3ThinkingSwitch) {
  // The flagship's switch, spelled out: thinking off pre-fills an empty think block.
  std::string source = read_file(data_dir() + "qwen3.jinja");
  Json messages = Json::parse(R"([{"role": "user", "content": "Hi"}])");
  std::string on = render_chat(source, messages, nullptr, true, Json::object(), "", "<|im_end|>");
  std::string off = render_chat(source, messages, nullptr, true, Json{{"enable_thinking", false}}, "", "<|im_end|>");
  EXPECT_EQ(on, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(off, on + "<think>\n\n</think>\n\n");
}

TEST(JinjaValue, PythonFloatRepr) {
  EXPECT_EQ(jinja::python_float_repr(1.0), "1.0");
  EXPECT_EQ(jinja::python_float_repr(0.1), "0.1");
  EXPECT_EQ(jinja::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(jinja::python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(jinja::python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(jinja::python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(jinja::python_float_repr(-2.5e-300), "-2.5e-300");
}

}  // namespace
}  // namespace zinc
