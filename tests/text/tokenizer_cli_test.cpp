// `zinc vocab`, `zinc tokenize`, `zinc detokenize` end to end on the real Qwen3
// tokenizer: the binary converts tokenizer.json and prints the ids HF gives.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "test_util.h"

namespace zinc::text {
namespace {

namespace fs = std::filesystem;

// Single-quoted for the shell (built with += : GCC 12 misfires -Wrestrict on "'" + s).
std::string quoted(const std::string& s) {
  std::string q = "'";
  q += s;
  q += "'";
  return q;
}

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe), 0) << command;
  return out;
}

TEST(TokenizerCli, VocabTokenizeDetokenize) {
  fs::path src = fs::path(test::shared_dir()) / "testdata" / "tokenizers" / "qwen3";
  if (!fs::exists(src / "tokenizer.json.xz")) GTEST_SKIP() << "shared tokenizer data not found";
  fs::path dir = fs::path(test::temp_dir()) / "cli_qwen3";
  fs::create_directories(dir);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    ASSERT_EQ(std::system(("xz -dc " + quoted((src / file).string() + ".xz") + " > " +
                           quoted((dir / file).string())).c_str()),
              0);
  const std::string zinc = quoted(test::zinc_binary());
  const std::string gguf = quoted((dir / "vocab.gguf").string());
  run(zinc + " vocab --from-hf " + quoted(dir.string()) + " -o " + gguf);
  // Ids from Hugging Face tokenizers for the same text.
  EXPECT_EQ(run(zinc + " tokenize -m " + gguf + " --json '<|im_start|>user Hello 世界'"),
            "[151644,872,21927,220,99489]\n");
  EXPECT_EQ(run(zinc + " tokenize -m " + gguf + " --no-special '<|im_start|>'"), "27 91 318 4906 91 29\n");
  EXPECT_EQ(run(zinc + " detokenize -m " + gguf + " 151644 872 21927 220 99489"), "<|im_start|>user Hello 世界\n");
}

}  // namespace
}  // namespace zinc::text
