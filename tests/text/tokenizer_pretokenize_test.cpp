// Every named pre-tokenizer against Hugging Face's pieces (goldens from
// tools/gen_tokenizer_goldens.py) on strings where the names disagree: digit
// grouping, contraction case, combining marks, newline runs, odd spaces, and
// gpt-4o's (o200k) case-aware words, on those strings and the whole corpus.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "test_util.h"
#include "text/byte_level.h"
#include "text/pretokenize.h"

namespace zinc::text {
namespace {

using nlohmann::json;

json tokenizer_goldens() {
  std::ifstream in(test::source_dir() + "/tests/data/text/tokenizer_goldens.json");
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

json pretokenizer_goldens() { return tokenizer_goldens().at("pretokenizers"); }

// HF reports pieces in byte-level spelling; so do we, for the comparison.
std::vector<std::string> pieces_of(const PreTokenizer& pre, const std::string& text) {
  std::vector<std::string_view> views;
  pre.split(text, views);
  std::vector<std::string> out;
  for (std::string_view v : views) out.push_back(byte_level_encode(v));
  return out;
}

TEST(PreTokenizer, EveryNameMatchesHuggingFace) {
  json g = pretokenizer_goldens();
  const auto strings = g.at("strings").get<std::vector<std::string>>();
  ASSERT_EQ(g.at("pieces").size(), 6u);
  for (const auto& [name, expected] : g.at("pieces").items()) {
    auto pre = PreTokenizer::by_name(name);
    for (size_t i = 0; i < strings.size(); ++i)
      EXPECT_EQ(pieces_of(*pre, strings[i]), expected[i].get<std::vector<std::string>>())
          << name << " on " << json(strings[i]).dump();
  }
}

TEST(PreTokenizer, NamesReallyDiffer) {
  // Guards the test above against goldens where all names happen to agree.
  json g = pretokenizer_goldens();
  std::set<std::string> distinct;
  for (const auto& [name, expected] : g.at("pieces").items()) distinct.insert(expected.dump());
  EXPECT_EQ(distinct.size(), 6u);
}

TEST(PreTokenizer, O200kMatchesHuggingFaceOnCorpus) {
  const json all = tokenizer_goldens();
  const json& corpus = all.at("corpus");
  const json& expected = all.at("pretokenizers").at("corpus_pieces").at("gpt-4o");
  ASSERT_EQ(expected.size(), corpus.size());
  auto pre = PreTokenizer::by_name("gpt-4o");
  for (size_t i = 0; i < corpus.size(); ++i)
    EXPECT_EQ(pieces_of(*pre, corpus[i].get<std::string>()), expected[i].get<std::vector<std::string>>())
        << "corpus[" << i << "] " << corpus[i].dump();
}

TEST(PreTokenizer, O200kCaseAwareWords) {
  auto split = [](const char* name, const std::string& text) {
    std::vector<std::string_view> v;
    PreTokenizer::by_name(name)->split(text, v);
    return std::vector<std::string>(v.begin(), v.end());
  };
  using V = std::vector<std::string>;
  // An upper-case letter after lower-case ones starts a new word; contractions stay on it.
  EXPECT_EQ(split("gpt-4o", "HelloWorld it's"), (V{"Hello", "World", " it's"}));
  EXPECT_EQ(split("o200k", "XMLHttpRequest DON'T"), (V{"XMLHttp", "Request", " DON'T"}));
  EXPECT_EQ(split("gpt-4o", "12345"), (V{"123", "45"}));
  // A punctuation run takes the newlines and slashes after it.
  EXPECT_EQ(split("gpt-4o", "a?/\n/b"), (V{"a", "?/\n/", "b"}));
  EXPECT_EQ(PreTokenizer::regexes_of("o200k"), PreTokenizer::regexes_of("gpt-4o"));
}

TEST(PreTokenizer, DigitGrouping) {
  auto split = [](const char* name, const std::string& text) {
    std::vector<std::string_view> v;
    PreTokenizer::by_name(name)->split(text, v);
    return std::vector<std::string>(v.begin(), v.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("llama-bpe", "12345"), (V{"123", "45"}));
  EXPECT_EQ(split("llama3", "12345"), (V{"123", "45"}));
  EXPECT_EQ(split("qwen2", "123"), (V{"1", "2", "3"}));
  EXPECT_EQ(split("gpt2", "a 12345"), (V{"a", " 12345"}));
  EXPECT_EQ(split("smollm", "a 123"), (V{"a", " ", "1", "2", "3"}));
  // Qwen3.5 keeps a combining mark inside its word; Qwen2 splits it off.
  EXPECT_EQ(split("qwen35", "e\xcc\x81t"), (V{"e\xcc\x81t"}));
  EXPECT_EQ(split("qwen2", "e\xcc\x81t"), (V{"e", "\xcc\x81t"}));
}

TEST(PreTokenizer, InvalidUtf8IsCoveredNotLost) {
  const std::string text = "ab\xff\xfe cd\xc3";
  std::vector<std::string_view> v;
  PreTokenizer::by_name("qwen2")->split(text, v);
  std::string joined;
  for (auto p : v) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizer, UnknownNameThrows) {
  EXPECT_THROW(PreTokenizer::by_name("no-such-pre"), std::runtime_error);
}

}  // namespace
}  // namespace zinc::text
