// Qwen3 and Gemma3 tokenizers against Hugging Face `tokenizers`: the vocab GGUF is
// built here from the shared tokenizer.json by zinc's own converter, and the ids
// of a 254-string multilingual corpus must equal the committed goldens
// (tools/gen_tokenizer_goldens.py). Also decode round trips, streaming decode of
// real multi-byte token streams, and a 1 MB throughput benchmark (printed, not timed).
// o200k_tiny stands in for gpt-oss's tokenizer: a small BPE with its pre-tokenizer
// and harmony special tokens, trained by the same script and kept in tests/data/text.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "test_util.h"
#include "text/hf_vocab.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace zinc::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RealVocab {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  double load_seconds = 0;
};

fs::path shared_tokenizer_dir(const std::string& name) {
  if (name == "o200k_tiny") return fs::path(test::source_dir()) / "tests" / "data" / "text" / "o200k-tiny";
  return fs::path(test::shared_dir()) / "testdata" / "tokenizers" / name;
}

// Decompresses the shared tokenizer files, converts them, loads the GGUF. Once per name.
const RealVocab* real_vocab(const std::string& name) {
  static std::map<std::string, RealVocab> cache;
  if (auto it = cache.find(name); it != cache.end()) return &it->second;
  fs::path src = shared_tokenizer_dir(name);
  if (!fs::exists(src / "tokenizer.json.xz")) return nullptr;
  fs::path dir = fs::path(test::temp_dir()) / ("hf_" + name);
  fs::create_directories(dir);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    std::string cmd = "xz -dc '" + (src / (std::string(file) + ".xz")).string() + "' > '" + (dir / file).string() + "'";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  std::string gguf_path = (dir / "vocab.gguf").string();
  write_hf_vocab_gguf(dir.string(), gguf_path);
  RealVocab v;
  auto start = std::chrono::steady_clock::now();
  v.file = gguf::GgufFile::open(gguf_path);
  v.tokenizer = Tokenizer::from_gguf(*v.file);
  v.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ info ] %s: %d tokens loaded from GGUF in %.3f s\n", name.c_str(), v.tokenizer->n_vocab(),
              v.load_seconds);
  return &cache.emplace(name, std::move(v)).first->second;
}

const json& goldens() {
  static const json g = [] {
    std::ifstream in(test::source_dir() + "/tests/data/text/tokenizer_goldens.json");
    std::stringstream s;
    s << in.rdbuf();
    return json::parse(s.str());
  }();
  return g;
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class RealTokenizer : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    vocab_ = real_vocab(GetParam());
    if (!vocab_) GTEST_SKIP() << "shared tokenizer data not found at " << shared_tokenizer_dir(GetParam());
  }
  const Tokenizer& tok() const { return *vocab_->tokenizer; }
  const json& model_goldens() const { return goldens().at(GetParam() == "o200k_tiny" ? "o200k-tiny" : GetParam()); }
  const RealVocab* vocab_ = nullptr;
};

TEST_P(RealTokenizer, IdsEqualHuggingFaceOnCorpus) {
  const json& corpus = goldens().at("corpus");
  ASSERT_GE(corpus.size(), 200u);
  const json& expected = model_goldens().at("ids");
  int mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::string text = corpus[i].get<std::string>();
    std::vector<int32_t> ids = tok().encode(text, /*parse_special=*/true, /*add_bos=*/false, /*add_eos=*/false);
    std::vector<int32_t> want = expected[i].get<std::vector<int32_t>>();
    if (ids != want && ++mismatches <= 5)
      ADD_FAILURE() << "corpus[" << i << "] " << json(text).dump() << "\n  zinc: " << ids_string(ids)
                    << "\n  hf:   " << ids_string(want);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(RealTokenizer, SpecialTextAsPlainTextEqualsHuggingFace) {
  const json& corpus = goldens().at("corpus");
  const json& expected = model_goldens().at("ids_no_special");
  ASSERT_GE(expected.size(), 10u);
  for (const auto& [index, want] : expected.items()) {
    std::string text = corpus[std::stoul(index)].get<std::string>();
    EXPECT_EQ(tok().encode(text, /*parse_special=*/false, false, false), want.get<std::vector<int32_t>>())
        << json(text).dump();
  }
}

TEST_P(RealTokenizer, DecodeRoundTrips) {
  const json& corpus = goldens().at("corpus");
  const json& normalized = model_goldens().at("decoded");
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::string text = corpus[i].get<std::string>();
    // Qwen NFC-normalizes, so there decode gives the normalized text back.
    std::string want = normalized.contains(std::to_string(i)) ? normalized[std::to_string(i)].get<std::string>() : text;
    EXPECT_EQ(tok().decode(tok().encode(text, true, false, false)), want) << "corpus[" << i << "]";
  }
}

TEST_P(RealTokenizer, StreamingDecodeEqualsDecodeOnRandomMultiByteText) {
  // Characters from scripts whose tokens often split a character: emoji, CJK extension B, Hangul, Devanagari.
  const std::vector<std::string> alphabet = {"😀", "👩‍💻", "🇯🇵", "𠀀", "𠮷", "한", "글", "न",
                                             "म", "\xcc\x81", "é", "中", "€", "a", " ", "\n", "ß", "Ж", "ꙮ",
                                             "🀄"};
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string text;
    int n = std::uniform_int_distribution<int>(1, 30)(rng);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> ids = tok().encode(text, true, false, false);
    StreamDecoder stream(tok());
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = stream.push(id);
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD emitted for " << json(text).dump();
      streamed += piece;
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, tok().decode(ids)) << json(text).dump();
  }
}

TEST_P(RealTokenizer, StreamingDecodeOfArbitraryIdsIsChunkingInvariant) {
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::vector<int32_t> ids(std::uniform_int_distribution<int>(1, 12)(rng));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % tok().n_vocab());
    StreamDecoder stream(tok());
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    // The same bytes made valid in one go.
    size_t held = 0;
    std::string whole = utf8_complete_prefix(tok().decode(ids), held);
    for (size_t i = 0; i < held; ++i) whole += "\xEF\xBF\xBD";
    EXPECT_EQ(streamed, whole);
  }
}

TEST_P(RealTokenizer, Throughput1MB) {
  std::string text;
  const json& corpus = goldens().at("corpus");
  const json& normalized = model_goldens().at("decoded");
  for (size_t i = 0; text.size() < (1u << 20); i = (i + 1) % corpus.size())
    if (!normalized.contains(std::to_string(i))) text += corpus[i].get<std::string>() + "\n";
  auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok().encode(text, true, false, false);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ bench ] %s: %.2f MB -> %zu tokens in %.3f s (%.1f MB/s)\n", GetParam().c_str(), text.size() / 1e6,
              ids.size(), seconds, text.size() / 1e6 / seconds);
  EXPECT_EQ(tok().decode(ids), text);
}

INSTANTIATE_TEST_SUITE_P(Models, RealTokenizer, testing::Values("qwen3", "gemma3", "o200k_tiny"),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(RealTokenizerMetadata, Qwen3SpecialsAndTemplate) {
  const RealVocab* v = real_vocab("qwen3");
  if (!v) GTEST_SKIP() << "shared tokenizer data not found";
  const Tokenizer& t = *v->tokenizer;
  EXPECT_EQ(t.model_name(), "gpt2");
  EXPECT_EQ(t.pre_name(), "qwen2");
  EXPECT_EQ(t.bos(), -1);
  EXPECT_EQ(t.eos(), 151645);  // <|im_end|>
  EXPECT_TRUE(t.is_eog(151645));
  EXPECT_TRUE(t.is_eog(151643));  // <|endoftext|>
  EXPECT_FALSE(t.is_eog(151644));
  EXPECT_EQ(t.find_token("<think>"), 151667);
  EXPECT_EQ(t.token_bytes(151644), "<|im_start|>");
  EXPECT_EQ(t.encode("hi"), t.encode("hi", true, false));  // no BOS by default
  EXPECT_NE(t.chat_template().find("<|im_start|>"), std::string::npos);
}

TEST(RealTokenizerMetadata, Gemma3SpecialsAndTemplate) {
  const RealVocab* v = real_vocab("gemma3");
  if (!v) GTEST_SKIP() << "shared tokenizer data not found";
  const Tokenizer& t = *v->tokenizer;
  EXPECT_EQ(t.model_name(), "llama");
  EXPECT_FALSE(t.add_space_prefix());
  EXPECT_EQ(t.bos(), 2);
  EXPECT_EQ(t.eos(), 106);  // tokenizer_config's eos_token is <end_of_turn>
  EXPECT_TRUE(t.is_eog(106));
  EXPECT_TRUE(t.is_eog(1));  // <eos>
  std::vector<int32_t> ids = t.encode("hi");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 2);  // add_bos_token
  EXPECT_EQ(t.token_bytes(t.find_token("<0x0A>").value()), "\n");
  EXPECT_NE(t.chat_template().find("<start_of_turn>"), std::string::npos);
}

TEST(RealTokenizerMetadata, O200kTinyIsGptOssShaped) {
  const RealVocab* v = real_vocab("o200k_tiny");
  ASSERT_NE(v, nullptr);
  const Tokenizer& t = *v->tokenizer;
  EXPECT_EQ(t.model_name(), "gpt2");
  EXPECT_EQ(t.pre_name(), "gpt-4o");  // the converter recognised the o200k Split regex
  const int32_t ret = t.find_token("<|return|>").value(), call = t.find_token("<|call|>").value();
  const int32_t end = t.find_token("<|end|>").value(), start = t.find_token("<|start|>").value();
  EXPECT_EQ(t.eos(), ret);
  EXPECT_TRUE(t.is_eog(ret));
  EXPECT_TRUE(t.is_eog(call));
  EXPECT_TRUE(t.is_eog(t.find_token("<|endoftext|>").value()));
  EXPECT_FALSE(t.is_eog(end));  // harmony: the final message follows the analysis one
  EXPECT_FALSE(t.is_eog(start));
  EXPECT_EQ(t.bos(), t.find_token("<|startoftext|>").value());
  EXPECT_FALSE(t.add_bos());  // tokenizer_config has no add_bos_token
  EXPECT_EQ(t.encode("<|start|>assistant").front(), start);
}

}  // namespace
}  // namespace zinc::text
