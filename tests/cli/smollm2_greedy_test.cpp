// Greedy generation on real weights (SmolLM2-135M-Instruct, Q4_1) against llama.cpp:
// from the prompt token ids llama.cpp made of three chat prompts, zinc's greedy
// continuation must equal llama.cpp's for at least 32 tokens. The goldens and the
// command that recorded them are in tests/data/smollm2/. The model comes from
// scripts/fetch_smollm2.sh; without it the tests skip.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "sample/sampler.h"
#include "test_util.h"
#ifdef ZINC_WITH_TEXT
#include "text/tokenizer.h"
#endif

namespace zinc {
namespace {

constexpr int kCases = 3;
constexpr size_t kRequiredMatch = 32;

std::string model_path() { return test::source_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }
std::string golden_path(const std::string& name) { return test::source_dir() + "/tests/data/smollm2/" + name; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::istringstream in(read_text(path));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// How many leading entries of a and b agree.
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

class SmolLM2Greedy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_path()))
      GTEST_SKIP() << model_path() << " is absent: scripts/fetch_smollm2.sh downloads it (scripts/setup.sh and "
                   << "scripts/test.sh run it)";
  }
};

TEST_F(SmolLM2Greedy, MatchesLlamaCppForAtLeast32Tokens) {
  auto file = gguf::GgufFile::open(model_path());
  auto backend = make_cpu_backend(0);
  auto model = load_model(*file, *backend);
  for (int i = 0; i < kCases; ++i) {
    const std::vector<int32_t> prompt = read_ids(golden_path("prompt" + std::to_string(i) + ".ids"));
    const std::vector<int32_t> want = read_ids(golden_path("greedy" + std::to_string(i) + ".ids"));
    ASSERT_GE(want.size(), kRequiredMatch) << "golden " << i << " is too short";

    SequenceState seq = model->new_sequence(static_cast<int64_t>(prompt.size() + want.size()));
    SamplerParams greedy;
    greedy.temperature = 0;
    Sampler sampler(greedy);
    GenerateOptions options;
    options.max_tokens = static_cast<int64_t>(want.size());
    // No end-of-generation ids: a premature <|im_end|> shows up as a mismatch.
    const GenerationResult got =
        generate(*model, *backend, seq, prompt, sampler, options, [](int32_t) { return true; });

    const size_t matched = common_prefix(got.tokens, want);
    EXPECT_GE(matched, kRequiredMatch) << "prompt " << i << ": zinc and llama.cpp agree on " << matched
                                       << " greedy tokens; first difference at " << matched;
    RecordProperty("prompt" + std::to_string(i) + "_matched_tokens", static_cast<int>(matched));
  }
}

#ifdef ZINC_WITH_TEXT
TEST_F(SmolLM2Greedy, TokenizerAgreesWithLlamaCpp) {
  auto file = gguf::GgufFile::open(model_path());
  auto tokenizer = text::Tokenizer::from_gguf(*file);
  for (int i = 0; i < kCases; ++i) {
    const std::string prompt = read_text(golden_path("prompt" + std::to_string(i) + ".txt"));
    EXPECT_EQ(tokenizer->encode(prompt, /*parse_special=*/true, /*add_bos=*/false),
              read_ids(golden_path("prompt" + std::to_string(i) + ".ids")))
        << "prompt " << i;
    EXPECT_EQ(tokenizer->decode(read_ids(golden_path("greedy" + std::to_string(i) + ".ids"))),
              read_text(golden_path("greedy" + std::to_string(i) + ".txt")))
        << "prompt " << i;
  }
}

// `zinc run` end to end: chat template, tokenizer, greedy generation and streamed
// text. Its reply must begin with llama.cpp's first 32 tokens of text.
TEST_F(SmolLM2Greedy, RunCommandStreamsLlamaCppsReply) {
  auto file = gguf::GgufFile::open(model_path());
  auto tokenizer = text::Tokenizer::from_gguf(*file);
  const std::vector<int32_t> want = read_ids(golden_path("greedy0.ids"));
  const std::string want_text =
      tokenizer->decode(std::vector<int32_t>(want.begin(), want.begin() + kRequiredMatch));
  const std::string user = read_text(golden_path("user0.txt"));

  const std::string command = test::zinc_binary() + " run -m " + model_path() + " --temp 0 -n 40 -p '" + user +
                              "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
  EXPECT_EQ(out.substr(0, want_text.size()), want_text) << "zinc run printed:\n" << out;
}
#endif

}  // namespace
}  // namespace zinc
