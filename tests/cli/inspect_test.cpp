// `zinc inspect` as a user runs it: the built binary on a small model and on a
// corrupt one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "../gguf/gguf_test_files.h"
#include "test_util.h"

namespace zinc {
namespace {

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
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

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(ZincInspect, ShowsMetadataTensorsAndTotals) {
  std::string path = test::temp_dir() + "/inspect_sample.gguf";
  write_bytes(path, test::sample_gguf_bytes());
  RunResult r = run_zinc("inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* expected : {"version    3", "alignment  32", "arch       llama", "llama.block_count",
                               "tokenizer.ggml.tokens", "string[64]", "(64 items)", "blk.0.attn_q.weight",
                               "q4_K", "[256, 256]", "36864", "6 tensors", "q8_0"})
    EXPECT_NE(r.output.find(expected), std::string::npos) << "missing \"" << expected << "\" in:\n" << r.output;

  RunResult meta = run_zinc("inspect --metadata-only " + path);
  ASSERT_EQ(meta.exit_code, 0) << meta.output;
  EXPECT_NE(meta.output.find("llama.context_length"), std::string::npos);
  EXPECT_EQ(meta.output.find("blk.0.attn_q.weight"), std::string::npos) << meta.output;
}

TEST(ZincInspect, CorruptFileFailsWithOneErrorLine) {
  std::string path = test::temp_dir() + "/inspect_corrupt.gguf";
  std::vector<uint8_t> bytes = test::sample_gguf_bytes();
  bytes.resize(bytes.size() / 2);  // cuts into the tensor data
  write_bytes(path, bytes);
  RunResult r = run_zinc("inspect " + path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("zinc: error: " + path + ": truncated", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "expected exactly one line:\n" << r.output;
}

}  // namespace
}  // namespace zinc
