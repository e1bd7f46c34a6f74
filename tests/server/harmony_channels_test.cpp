// A harmony (gpt-oss) chat job's logits processors on o200k-tiny, gpt-oss's tokenizer
// stand-in with harmony's special tokens: replies are fed token by token as a model
// writes them, checking what each step allows or forces. The analysis is free text; a
// response format makes the reply an optional analysis then a final message holding
// the JSON (beside tools, it constrains only a final message the model writes); the
// thinking budget ends the analysis by forcing the answer's header; a required tool
// call is a harmony function call ending in <|call|>. Non-harmony jobs keep their
// processors.
#include "server/harmony_channels.h"

#include <cmath>

#include <gtest/gtest.h>

#include "server/generation_job.h"
#include "server/thinking.h"
#include "test_util.h"
#include "text/o200k_tiny.h"
#include "text/harmony_splitter.h"

namespace zinc::server {
namespace {

class HarmonyChannels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = &test::o200k_tiny();
    eog_ = new std::vector<int32_t>;
    for (int32_t id = 0; id < tok_->n_vocab(); ++id)
      if (tok_->is_eog(id)) eog_->push_back(id);
  }
  static void TearDownTestSuite() {
    delete eog_;
  }

  static std::vector<int32_t> ids(const std::string& text) { return tok_->encode(text, true, false, false); }
  static int32_t id(const std::string& tag) { return *tok_->find_token(tag); }
  static int32_t first(const std::string& text) { return ids(text).at(0); }

  // The processors one after the other, as the engine applies them.
  struct Chain {
    std::vector<std::unique_ptr<LogitsProcessor>> processors;
    std::vector<float> logits() {
      std::vector<float> l(static_cast<size_t>(tok_->n_vocab()), 0.5f);
      for (auto& p : processors) p->process(l);
      return l;
    }
    bool allows(int32_t token) { return std::isfinite(logits()[static_cast<size_t>(token)]); }
    bool free() {
      for (float x : logits())
        if (!std::isfinite(x)) return false;
      return true;
    }
    // The one finite logit's id, or -1 when none or several are finite.
    int32_t forced() {
      int32_t id = -1, finite = 0;
      const std::vector<float> l = logits();
      for (size_t i = 0; i < l.size(); ++i)
        if (std::isfinite(l[i])) {
          ++finite;
          id = static_cast<int32_t>(i);
        }
      return finite == 1 ? id : -1;
    }
    void accept(int32_t token) {
      for (auto& p : processors) p->accept(token);
      text += tok_->token_bytes(token);
    }
    // What the client gets from the reply so far (tools on).
    text::HarmonyText split() const {
      text::HarmonySplitter splitter(/*tools=*/true);
      text::HarmonyText out = splitter.push(text), rest = splitter.flush();
      out.reasoning += rest.reasoning;
      out.content += rest.content;
      out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
      return out;
    }
    std::string text;  // the reply so far
    // Writes the text's tokens, each of which must be allowed (or free, if so asked).
    void write(const std::string& text, bool expect_free = false) {
      for (int32_t t : ids(text)) {
        if (expect_free) {
          EXPECT_TRUE(free()) << "before '" << tok_->token_bytes(t) << "' in " << text;
        }
        ASSERT_TRUE(allows(t)) << "'" << tok_->token_bytes(t) << "' in " << text;
        accept(t);
      }
    }
    // Takes forced tokens while there are any; their text.
    std::string take_forced() {
      std::string text;
      for (int32_t t; (t = forced()) >= 0 && text.size() < 200; accept(t)) text += tok_->token_bytes(t);
      return text;
    }
  };

  static Chain job(const ChatRequest& r, bool harmony = true, bool in_reasoning = false) {
    ChatPrompt prompt;
    prompt.text = "<|start|>user<|message|>Hi<|end|><|start|>assistant";
    prompt.harmony = harmony;
    prompt.in_reasoning = in_reasoning;
    GenerationJob j = std::move(make_chat_jobs(r, prompt, {*tok_, *eog_, 4096, "test"}).front());
    Chain c;
    c.processors = std::move(j.request.processors);
    return c;
  }
  static Chain single(std::unique_ptr<LogitsProcessor> p) {
    Chain c;
    c.processors.push_back(std::move(p));
    return c;
  }
  static ChatRequest with_tools(ToolChoice choice, const std::string& name = "") {
    ChatRequest r;
    r.tool_choice = choice;
    r.tool_name = name;
    r.tool_parameters["get_weather"] = Json::parse(
        R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})");
    r.tool_parameters["get_time"] = Json::object();
    return r;
  }

  static const text::Tokenizer* tok_;
  static std::vector<int32_t>* eog_;
};
const text::Tokenizer* HarmonyChannels::tok_ = nullptr;
std::vector<int32_t>* HarmonyChannels::eog_ = nullptr;

TEST_F(HarmonyChannels, ReplyEndsAreEndOfGeneration) {
  EXPECT_TRUE(tok_->is_eog(id("<|return|>")));
  EXPECT_TRUE(tok_->is_eog(id("<|call|>")));
  EXPECT_FALSE(tok_->is_eog(id("<|end|>")));  // it ends the analysis message, not the reply
  EXPECT_EQ(ids("<|channel|>final<|message|>").front(), id("<|channel|>"));
}

TEST_F(HarmonyChannels, ResponseFormatMakesTheReplyAnAnalysisThenTheJson) {
  ChatRequest r;
  r.format = ResponseFormat::JsonSchema;
  r.schema =
      Json::parse(R"({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})");
  Chain c = job(r);
  ASSERT_EQ(c.processors.size(), 1u);
  EXPECT_EQ(dynamic_cast<InFinalMessage*>(c.processors[0].get()), nullptr);
  EXPECT_EQ(c.forced(), id("<|channel|>"));
  c.write("<|channel|>");
  EXPECT_TRUE(c.allows(first("analysis")));
  EXPECT_TRUE(c.allows(first("final")));
  EXPECT_FALSE(c.allows(first("commentary")));  // no tool to call
  // The analysis is any text, but it cannot end the reply: only <|end|> ends it.
  c.write("analysis<|message|>Let me think: {not json} < 3, so 42.");
  for (const char* tag : {"<|return|>", "<|call|>", "<|start|>", "<|channel|>"}) EXPECT_FALSE(c.allows(id(tag))) << tag;
  c.write("<|end|>");
  EXPECT_EQ(c.take_forced(), "<|start|>");  // the answer must follow
  c.write("assistant");
  EXPECT_EQ(c.forced(), id("<|channel|>"));
  c.write("<|channel|>");
  EXPECT_TRUE(c.allows(first("final")));
  EXPECT_FALSE(c.allows(first("analysis")));  // one analysis, then the answer
  c.write("final<|message|>");
  EXPECT_TRUE(c.allows(first("{")));
  EXPECT_FALSE(c.allows(first("The")));
  EXPECT_FALSE(c.allows(id("<|return|>")));
  c.write(R"({"answer": 42)");
  EXPECT_FALSE(c.allows(first(".")));
  EXPECT_FALSE(c.allows(id("<|return|>")));
  c.write("}");
  EXPECT_TRUE(c.allows(id("<|return|>")));  // the JSON is whole: the reply may end, and only so
  for (const char* tag : {"<|call|>", "<|end|>", "<|start|>"}) EXPECT_FALSE(c.allows(id(tag))) << tag;
  EXPECT_FALSE(c.allows(first(",")));
  EXPECT_EQ(c.split().reasoning, "Let me think: {not json} < 3, so 42.");
  EXPECT_EQ(c.split().content, R"({"answer": 42})");
}

// OpenAI's structured outputs write properties in the schema's order; a schema that
// puts its reasoning first gets it first (not sorted by name, which puts answer first).
TEST_F(HarmonyChannels, PropertiesComeInTheSchemasOrder) {
  const ChatRequest r = parse_chat_request(Json::parse(R"({"messages": [{"role": "user", "content": "q"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object",
        "properties": {"reasoning": {"type": "string"}, "answer": {"type": "integer"}},
        "required": ["reasoning", "answer"]}}}})"),
                                           {});
  Chain c = job(r);
  c.write("<|channel|>final<|message|>{\"");
  EXPECT_TRUE(c.allows(first("reasoning")));
  EXPECT_FALSE(c.allows(first("answer")));
  c.write(R"(reasoning": "x", ")");
  EXPECT_TRUE(c.allows(first("answer")));
}

TEST_F(HarmonyChannels, ResponseFormatAfterAFinalHeaderWithAConstraint) {
  ChatRequest r;
  r.format = ResponseFormat::JsonObject;
  Chain c = job(r);
  c.write("<|channel|>final <|constrain|>json<|message|>");  // no analysis at all
  EXPECT_FALSE(c.allows(first("Sure")));
  c.write(R"({"a": [1, 2]})");
  EXPECT_TRUE(c.allows(id("<|return|>")));
  EXPECT_FALSE(c.allows(id("<|call|>")));
}

// With tools the model may call one instead of answering: only a final message it
// writes is held to the format, and the rest of the reply stays free.
TEST_F(HarmonyChannels, ResponseFormatBesideToolsConstrainsOnlyTheFinalMessage) {
  ChatRequest r = with_tools(ToolChoice::Auto);
  r.format = ResponseFormat::JsonObject;
  Chain call = job(r);
  ASSERT_EQ(call.processors.size(), 1u);
  EXPECT_NE(dynamic_cast<InFinalMessage*>(call.processors[0].get()), nullptr);
  call.write("<|channel|>analysis<|message|>I need the time.<|end|><|start|>assistant", /*expect_free=*/true);
  call.write("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>", true);

  Chain answer = job(r);
  answer.write("<|channel|>final<|message|>", true);
  EXPECT_FALSE(answer.allows(first("Sure")));
  answer.write("{}");
  EXPECT_TRUE(answer.allows(id("<|return|>")));
}

TEST_F(HarmonyChannels, BudgetSpentForcesTheFinalHeader) {
  Chain c = single(std::make_unique<HarmonyBudget>(*tok_, 3, kHarmonyFinalHeader));
  c.write("<|channel|>analysis<|message|>", /*expect_free=*/true);  // the header is not counted
  ASSERT_EQ(ids(" one").size(), 1u);
  for (int i = 0; i < 3; ++i) c.write(" one", true);
  EXPECT_EQ(c.take_forced(), "<|end|><|start|>assistant<|channel|>final<|message|>");
  c.write("The answer is 42.", true);
  EXPECT_EQ(c.split().reasoning, " one one one");
  EXPECT_EQ(c.split().content, "The answer is 42.");
}

TEST_F(HarmonyChannels, ZeroBudgetMeansNoAnalysis) {
  Chain c = single(std::make_unique<HarmonyBudget>(*tok_, 0, kHarmonyFinalHeader));
  EXPECT_EQ(c.take_forced(), "<|channel|>final<|message|>");
  c.write("Hi!", true);
}

TEST_F(HarmonyChannels, AnAnalysisThatEndsInTimeIsLeftAlone) {
  Chain c = single(std::make_unique<HarmonyBudget>(*tok_, 4, kHarmonyFinalHeader));
  c.write("<|channel|>analysis<|message|> short<|end|><|start|>assistant<|channel|>final<|message|>", true);
  c.write(" a long answer that goes on well past the budget", true);
}

TEST_F(HarmonyChannels, BudgetThenResponseFormat) {
  ChatRequest r;
  r.format = ResponseFormat::JsonObject;
  r.thinking_budget = 2;
  Chain c = job(r);
  ASSERT_EQ(c.processors.size(), 2u);
  EXPECT_NE(dynamic_cast<HarmonyBudget*>(c.processors[0].get()), nullptr);
  c.write("<|channel|>analysis<|message|> one one");
  EXPECT_EQ(c.take_forced(), "<|end|><|start|>assistant<|channel|>final<|message|>");
  EXPECT_FALSE(c.allows(first("Sure")));
  c.write("{}");
  EXPECT_TRUE(c.allows(id("<|return|>")));

  r.thinking_budget = 0;
  Chain none = job(r);
  EXPECT_EQ(none.take_forced(), "<|channel|>final<|message|>");
  EXPECT_FALSE(none.allows(first("Sure")));
}

TEST_F(HarmonyChannels, NamedToolIsAHarmonyCall) {
  Chain c = job(with_tools(ToolChoice::Named, "get_weather"));
  ASSERT_EQ(c.processors.size(), 1u);
  // The reply opens with a header: <|channel|> the token, never "<" spelling it.
  EXPECT_EQ(c.forced(), id("<|channel|>"));
  c.write("<|channel|>");
  EXPECT_TRUE(c.allows(first("analysis")));
  EXPECT_TRUE(c.allows(first("commentary")));
  EXPECT_FALSE(c.allows(first("final")));
  // The analysis is free text; it cannot end the reply, only the analysis.
  c.write("analysis<|message|>");
  EXPECT_TRUE(c.allows(id("<|end|>")));
  for (const char* tag : {"<|return|>", "<|call|>", "<|start|>", "<|channel|>"}) EXPECT_FALSE(c.allows(id(tag))) << tag;
  c.write("The user wants <weather> in Zürich: {\"city\"}? I'll call get_weather.");
  c.write("<|end|>");
  EXPECT_EQ(c.forced(), id("<|start|>"));
  c.write("<|start|>assistant<|channel|>commentary to=functions.get_");
  EXPECT_TRUE(c.allows(first("weather")));
  EXPECT_FALSE(c.allows(first("time")));
  c.write("weather");
  EXPECT_EQ(c.forced(), first(" "));
  c.write(" ");
  EXPECT_EQ(c.forced(), id("<|constrain|>"));
  c.write("<|constrain|>json<|message|>");
  // The arguments follow the tool's schema; only <|call|> ends the call.
  EXPECT_FALSE(c.allows(first("Sure")));
  c.write("{");
  EXPECT_FALSE(c.allows(first("}")));  // city is required
  EXPECT_FALSE(c.allows(id("<|call|>")));
  c.write(R"("city": "Zürich"})");
  EXPECT_TRUE(c.allows(id("<|call|>")));
  EXPECT_FALSE(c.allows(id("<|return|>")));
  EXPECT_FALSE(c.allows(id("<|end|>")));
  const text::HarmonyText reply = c.split();
  ASSERT_EQ(reply.calls.size(), 1u);
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  EXPECT_EQ(reply.calls[0].arguments, R"({"city":"Zürich"})");
  EXPECT_EQ(reply.content, "");
}

TEST_F(HarmonyChannels, RequiredCallsOneOfTheTools) {
  Chain c = job(with_tools(ToolChoice::Required));
  c.write("<|channel|>commentary to=functions.get_");  // the analysis may be skipped
  EXPECT_TRUE(c.allows(first("weather")));
  EXPECT_TRUE(c.allows(first("time")));
  c.write("time <|constrain|>json<|message|>{");
  EXPECT_TRUE(c.allows(first("}")));  // get_time takes any object
  c.write("}");
  EXPECT_TRUE(c.allows(id("<|call|>")));
  EXPECT_FALSE(c.allows(id("<|return|>")));
}

TEST_F(HarmonyChannels, BudgetBeforeARequiredCallForcesTheCallHeader) {
  ChatRequest r = with_tools(ToolChoice::Required);
  r.thinking_budget = 2;
  Chain c = job(r);
  ASSERT_EQ(c.processors.size(), 2u);
  c.write("<|channel|>analysis<|message|> one one");
  EXPECT_EQ(c.take_forced(), "<|end|><|start|>assistant<|channel|>commentary to=functions.");
  c.write("get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}");
  EXPECT_TRUE(c.allows(id("<|call|>")));

  r.thinking_budget = 0;
  Chain none = job(r);
  EXPECT_EQ(none.take_forced(), "<|channel|>commentary to=functions.");
}

TEST_F(HarmonyChannels, NonHarmonyJobsKeepTheirProcessors) {
  ChatRequest r;
  r.format = ResponseFormat::JsonObject;
  r.thinking_budget = 5;
  Chain thought = job(r, /*harmony=*/false, /*in_reasoning=*/true);
  ASSERT_EQ(thought.processors.size(), 2u);
  EXPECT_NE(dynamic_cast<ThinkingBudget*>(thought.processors[0].get()), nullptr);
  EXPECT_NE(dynamic_cast<AfterThought*>(thought.processors[1].get()), nullptr);

  Chain plain = job(r, /*harmony=*/false);  // no thought: no budget, the grammar from the start
  ASSERT_EQ(plain.processors.size(), 1u);
  EXPECT_EQ(dynamic_cast<InFinalMessage*>(plain.processors[0].get()), nullptr);
  EXPECT_FALSE(plain.allows(first("Sure")));

  Chain call = job(with_tools(ToolChoice::Named, "get_time"), /*harmony=*/false);  // Qwen's <tool_call>
  ASSERT_EQ(call.processors.size(), 1u);
  EXPECT_FALSE(call.allows(id("<|channel|>")));
  call.write("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");

  EXPECT_TRUE(job(ChatRequest{}).processors.empty());  // nothing asked, nothing added
}

}  // namespace
}  // namespace zinc::server
