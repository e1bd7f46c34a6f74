// Grammar masks on the real Qwen3 vocabulary (151k tokens, vocab GGUF built from the
// shared tokenizer.json): the trie walk equals a brute-force check of every token,
// random walks of allowed tokens always give JSON that parses and validates against
// the schema (checked by a small validator for the supported subset), eog comes only
// at completion, and the per-token mask cost is printed (not asserted).
#include <gtest/gtest.h>

#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "test_util.h"
#include "text/grammar.h"
#include "text/grammar_matcher.h"
#include "text/grammar_processor.h"
#include "text/hf_vocab.h"
#include "text/tokenizer.h"

namespace zinc::text {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// This thread's CPU time: the build machine is shared, so wall time would count
// other processes' turns.
struct Clock {
  using time_point = double;
  static double now() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
};
double seconds_since(double start) { return Clock::now() - start; }

struct Qwen3Vocab {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> eog;
};

const Qwen3Vocab* qwen3() {
  static const std::unique_ptr<Qwen3Vocab> vocab = []() -> std::unique_ptr<Qwen3Vocab> {
    const fs::path src = fs::path(test::shared_dir()) / "testdata" / "tokenizers" / "qwen3";
    if (!fs::exists(src / "tokenizer.json.xz")) return nullptr;
    const fs::path dir = fs::path(test::temp_dir()) / "grammar_qwen3";
    fs::create_directories(dir);
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      const std::string cmd =
          "xz -dc '" + (src / (std::string(file) + ".xz")).string() + "' > '" + (dir / file).string() + "'";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    }
    write_hf_vocab_gguf(dir.string(), (dir / "vocab.gguf").string());
    auto v = std::make_unique<Qwen3Vocab>();
    v->file = gguf::GgufFile::open((dir / "vocab.gguf").string());
    v->tokenizer = Tokenizer::from_gguf(*v->file);
    for (int32_t id = 0; id < v->tokenizer->n_vocab(); ++id)
      if (v->tokenizer->is_eog(id)) v->eog.push_back(id);
    return v;
  }();
  return vocab.get();
}

// ---- a validator for the supported schema subset ------------------------------------
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

bool has_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

bool valid(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) return valid(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
  if (s.contains("anyOf") &&
      std::none_of(s["anyOf"].begin(), s["anyOf"].end(), [&](const json& x) { return valid(v, x, root); }))
    return false;
  if (s.contains("oneOf") &&
      std::count_if(s["oneOf"].begin(), s["oneOf"].end(), [&](const json& x) { return valid(v, x, root); }) != 1)
    return false;
  if (s.contains("allOf") &&
      !std::all_of(s["allOf"].begin(), s["allOf"].end(), [&](const json& x) { return valid(v, x, root); }))
    return false;
  if (s.contains("type")) {
    const json& t = s["type"];
    const bool ok = t.is_string() ? has_type(v, t.get<std::string>())
                                  : std::any_of(t.begin(), t.end(),
                                                [&](const json& x) { return has_type(v, x.get<std::string>()); });
    if (!ok) return false;
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const json& name : s["required"])
        if (!v.contains(name.get<std::string>())) return false;
    for (const auto& [key, value] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(key)) {
        if (!valid(value, s["properties"][key], root)) return false;
      } else if (s.contains("additionalProperties") && !valid(value, s["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    const size_t n_prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < n_prefix) {
        if (!valid(v[i], s["prefixItems"][i], root)) return false;
      } else if (s.contains("items") && !valid(v[i], s["items"], root)) {
        return false;
      }
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
  }
  return true;
}

TEST(GrammarValidator, ChecksTheSubset) {
  const json s = json::parse(R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}},
                                 "required": ["a"], "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(valid(json::parse(R"({"a": "\u00e9\u00e9", "b": 1})"), s, s));
  EXPECT_FALSE(valid(json::parse(R"({"a": "abc"})"), s, s));
  EXPECT_FALSE(valid(json::parse(R"({"a": "x", "b": 1.5})"), s, s));
  EXPECT_FALSE(valid(json::parse(R"({"b": 1})"), s, s));
}

// ---- the tests ------------------------------------------------------------------------
class GrammarVocab : public testing::Test {
 protected:
  void SetUp() override {
    vocab_ = qwen3();
    if (!vocab_) GTEST_SKIP() << "shared Qwen3 tokenizer not found";
  }
  const Tokenizer& tok() const { return *vocab_->tokenizer; }
  const Qwen3Vocab* vocab_ = nullptr;
};

const char* kDocument =
    "{\"name\": \"Z\xc3\xbcrich \xf0\x9f\x9a\x80\", \"age\": 42, \"tags\": [\"a\", \"b c\"],\n"
    "  \"nested\": {\"x\": [1.5, -2e-3, true, null], \"quote\": \"say \\\"hi\\\"\\n\"}}";

TEST_F(GrammarVocab, TrieWalkEqualsBruteForce) {
  const auto g = json_object_grammar();
  auto trie = TokenTrie::of(tok());
  GrammarMasks masks(g, trie);
  GrammarMatcher& m = masks.matcher();
  GrammarMatcher::State state = m.initial();
  const std::vector<int32_t> ids = tok().encode(kDocument, false, false);
  ASSERT_GT(ids.size(), 20u);
  for (size_t step = 0; step <= ids.size(); ++step) {
    const GrammarMasks::Mask mask = masks.walk(state);
    size_t count = 0;
    for (int32_t id = 0; id < tok().n_vocab(); ++id) {
      const TokenType type = tok().token_type(id);
      const std::string bytes = tok().token_bytes(id);
      const bool expect = type != TokenType::Control && type != TokenType::Unused && type != TokenType::Unknown &&
                          !bytes.empty() && m.advance(state, bytes) != GrammarMatcher::kDead;
      const bool got = (mask.bits[id >> 6] >> (id & 63)) & 1;
      count += got;
      if (expect != got) {
        ADD_FAILURE() << "step " << step << " token " << id << " '" << bytes << "': expected " << expect;
        return;
      }
    }
    EXPECT_EQ(count, mask.count);
    if (step == ids.size()) break;
    state = m.advance(state, tok().token_bytes(ids[step]));
    ASSERT_NE(state, GrammarMatcher::kDead) << "the document's token " << step << " was refused";
  }
  EXPECT_TRUE(m.is_complete(state));
}

TEST_F(GrammarVocab, EogOnlyOnceCompleteAndAloneWhenNothingContinues) {
  const auto g = grammar_from_json_schema(json::parse(R"({"const": "ok"})"), "<tool_call>\n", "\n</tool_call>");
  auto processor = make_grammar_processor(g, tok(), vocab_->eog);
  const std::vector<int32_t> ids = tok().encode("<tool_call>\n\"ok\"\n</tool_call>", false, false);
  const int32_t im_start = tok().find_token("<|im_start|>").value();
  ASSERT_EQ(tok().token_type(im_start), TokenType::Control);
  std::vector<float> logits(static_cast<size_t>(tok().n_vocab()) + 100);  // a padded model vocab
  for (size_t step = 0; step <= ids.size(); ++step) {
    std::fill(logits.begin(), logits.end(), 1.0f);
    processor->process(logits);
    size_t finite = 0;
    for (float l : logits) finite += std::isfinite(l);
    for (int32_t e : vocab_->eog) EXPECT_EQ(std::isfinite(logits[e]), step == ids.size()) << "step " << step;
    EXPECT_FALSE(std::isfinite(logits[im_start]));
    EXPECT_FALSE(std::isfinite(logits.back()));
    if (step == ids.size()) {
      EXPECT_EQ(finite, vocab_->eog.size());  // nothing can follow "</tool_call>"
      break;
    }
    EXPECT_TRUE(std::isfinite(logits[ids[step]])) << "step " << step;
    EXPECT_GT(finite, 0u);
    processor->accept(ids[step]);
  }
  EXPECT_THROW(make_grammar_processor(g, tok(), vocab_->eog)->accept(tok().find_token("{").value()),
               std::invalid_argument);
}

// Picks among the allowed tokens: eog half the time it is allowed; else half the
// time a token that closes something (so strings and containers end), else any.
struct WalkResult {
  std::string text;
  int steps = 0;
  bool ended = false;
};

WalkResult random_walk(const std::shared_ptr<const Grammar>& g, const Tokenizer& tok, const std::vector<int32_t>& eog,
                       const std::vector<bool>& closes, uint64_t seed, int max_steps, double& process_seconds) {
  WalkResult r;
  auto processor = make_grammar_processor(g, tok, eog);
  GrammarMatcher check(g);  // an independent parser: where the text is complete
  GrammarMatcher::State state = check.initial();
  std::mt19937_64 rng(seed);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  std::vector<int32_t> allowed, closing;
  for (; r.steps < max_steps; ++r.steps) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const auto start = Clock::now();
    processor->process(logits);
    process_seconds += seconds_since(start);
    allowed.clear();
    closing.clear();
    bool eog_allowed = false;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (!std::isfinite(logits[id])) continue;
      if (std::find(eog.begin(), eog.end(), id) != eog.end()) {
        eog_allowed = true;
        continue;
      }
      EXPECT_NE(tok.token_type(id), TokenType::Control) << id;
      allowed.push_back(id);
      if (closes[id]) closing.push_back(id);
    }
    EXPECT_EQ(eog_allowed, check.is_complete(state)) << "after '" << r.text << "'";
    if (eog_allowed && (allowed.empty() || rng() % 2 == 0)) {
      processor->accept(eog[0]);
      r.ended = true;
      return r;
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "stuck after '" << r.text << "'";
      return r;
    }
    const std::vector<int32_t>& pool = !closing.empty() && rng() % 2 == 0 ? closing : allowed;
    const int32_t token = pool[rng() % pool.size()];
    processor->accept(token);
    const std::string bytes = tok.token_bytes(token);
    r.text += bytes;
    state = check.advance(state, bytes);
    if (state == GrammarMatcher::kDead) {
      ADD_FAILURE() << "the processor allowed '" << bytes << "' after '" << r.text << "'";
      return r;
    }
  }
  return r;
}

TEST_F(GrammarVocab, RandomWalksGiveValidJson) {
  std::vector<bool> closes(static_cast<size_t>(tok().n_vocab()));
  for (int32_t id = 0; id < tok().n_vocab(); ++id)
    closes[id] = tok().token_bytes(id).find_first_of("\"]}") != std::string::npos;
  struct Case {
    const char* name;
    const char* schema;  // nullptr: json_object_grammar()
    const char* prefix = "";
    const char* suffix = "";
  };
  const Case cases[] = {
      {"json_object", nullptr},
      {"person", R"({"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
          "age": {"type": "integer"}, "score": {"type": "number"}, "email": {"type": "string"},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
          "required": ["name", "age"]})"},
      {"enums", R"({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]},
          "size": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "ok": {"type": "boolean"},
          "kind": {"oneOf": [{"const": "a"}, {"type": "array", "items": {"type": ["integer", "boolean"]}}]}},
          "required": ["color", "size", "ok", "kind"]})"},
      {"tree", R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}},
          "$ref": "#/$defs/node"})"},
      {"tuple",
       R"({"type": "array", "prefixItems": [{"type": "string", "minLength": 2, "maxLength": 5}, {"type": "number"}],
          "items": {"type": "boolean"}, "minItems": 2, "maxItems": 5})"},
      {"map", R"({"type": "object", "additionalProperties": {"type": "integer"}})"},
      {"tool_call", R"({"type": "object", "properties": {"name": {"const": "get_weather"},
          "arguments": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
          "required": ["city"]}}, "required": ["name", "arguments"]})",
       "<tool_call>\n", "\n</tool_call>"},
  };
  const int kSeeds = 32, kMaxSteps = 600;
  for (const Case& c : cases) {
    const json schema = c.schema ? json::parse(c.schema) : json::parse(R"({"type": "object"})");
    const auto g = c.schema ? grammar_from_json_schema(schema, c.prefix, c.suffix) : json_object_grammar();
    double process_seconds = 0;
    int steps = 0;
    for (int seed = 0; seed < kSeeds; ++seed) {
      const WalkResult r = random_walk(g, tok(), vocab_->eog, closes, 1000 * seed + 7, kMaxSteps, process_seconds);
      steps += r.steps;
      ASSERT_TRUE(r.ended) << c.name << " seed " << seed << " did not end: " << r.text;
      std::string body = r.text;
      ASSERT_EQ(body.rfind(c.prefix, 0), 0u) << body;
      ASSERT_GE(body.size(), std::string(c.prefix).size() + std::string(c.suffix).size());
      ASSERT_EQ(body.compare(body.size() - std::string(c.suffix).size(), std::string::npos, c.suffix), 0) << body;
      body = body.substr(std::string(c.prefix).size(),
                         body.size() - std::string(c.prefix).size() - std::string(c.suffix).size());
      json value;
      try {
        value = json::parse(body);
      } catch (const json::exception& e) {
        ADD_FAILURE() << c.name << " seed " << seed << ": " << e.what() << "\n" << body;
        continue;
      }
      EXPECT_TRUE(valid(value, schema, schema)) << c.name << " seed " << seed << ": " << body;
      if (seed == 0) std::printf("[ walk  ] %s: %s\n", c.name, value.dump().substr(0, 160).c_str());
    }
    std::printf("[ bench ] %s: %d walks, %d tokens, process() %.1f us/token on average "
                "(masks cached per state; thread CPU time)\n",
                c.name, kSeeds, steps, 1e6 * process_seconds / std::max(steps, 1));
  }
}

// The mask cost per token along a real document: the first walk from each state
// (builds the automaton's transitions), a walk with the transitions built (a state
// new to the mask cache), and process() once masks are cached.
TEST_F(GrammarVocab, MaskCostPerToken) {
  auto start = Clock::now();
  const uint64_t fingerprint = TokenTrie::fingerprint(tok());
  std::printf("[ bench ] Qwen3 vocab fingerprint (per new processor) %.2f ms (thread CPU time)\n",
              1e3 * seconds_since(start));
  EXPECT_EQ(fingerprint, TokenTrie::fingerprint(tok()));
  start = Clock::now();
  const TokenTrie trie(tok());
  std::printf("[ bench ] Qwen3 trie: %d tokens, %zu nodes, max depth %u, built in %.1f ms (thread CPU time)\n",
              tok().n_vocab(), trie.nodes.size(), trie.max_depth, 1e3 * seconds_since(start));
  const std::vector<int32_t> ids = tok().encode(kDocument, false, false);
  const std::pair<const char*, std::shared_ptr<const Grammar>> grammars[] = {
      {"json_object", json_object_grammar()},
      {"schema", grammar_from_json_schema(json::parse(R"({"type": "object", "properties": {
          "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
          "nested": {"type": "object", "properties": {"x": {"type": "array"}, "quote": {"type": "string", "maxLength": 40}},
          "required": ["x", "quote"]}}, "required": ["name", "age", "tags", "nested"]})"))}};
  for (const auto& [name, g] : grammars) {
    GrammarMasks masks(g, TokenTrie::of(tok()));
    GrammarMatcher& m = masks.matcher();
    std::vector<GrammarMatcher::State> states{m.initial()};
    for (int32_t id : ids) states.push_back(m.advance(states.back(), tok().token_bytes(id)));
    ASSERT_TRUE(m.is_complete(states.back())) << name;
    double cold = 0, cold_max = 0, warm = 0, warm_max = 0;
    for (auto s : states) {
      start = Clock::now();
      masks.walk(s);
      const double t = seconds_since(start);
      cold += t;
      cold_max = std::max(cold_max, t);
    }
    for (auto s : states) {
      start = Clock::now();
      masks.walk(s);
      const double t = seconds_since(start);
      warm += t;
      warm_max = std::max(warm_max, t);
    }
    // process() with every mask cached: a shared GrammarMasks that has seen the document.
    auto processor = make_grammar_processor(g, tok(), vocab_->eog);
    auto warmup = make_grammar_processor(g, tok(), vocab_->eog);
    std::vector<float> logits(static_cast<size_t>(tok().n_vocab()));
    for (int32_t id : ids) {
      warmup->process(logits);
      warmup->accept(id);
    }
    double cached = 0;
    for (int32_t id : ids) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      start = Clock::now();
      processor->process(logits);
      cached += seconds_since(start);
      ASSERT_TRUE(std::isfinite(logits[id]));
      processor->accept(id);
    }
    const double n = static_cast<double>(states.size());
    std::printf("[ bench ] %s, %zu tokens: first walk %.2f ms/token (max %.2f), walk with transitions built "
                "%.2f ms/token (max %.2f), cached process() %.1f us/token; %zu parser states (thread CPU time)\n",
                name, ids.size(), 1e3 * cold / n, 1e3 * cold_max, 1e3 * warm / n, 1e3 * warm_max,
                1e6 * cached / static_cast<double>(ids.size()), m.state_count());
  }
}

}  // namespace
}  // namespace zinc::text
