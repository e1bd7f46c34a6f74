// Checks of zinc's greedy output on real weights against llama.cpp's recorded greedy
// tokens (tests/data/<model>/promptN.ids, greedyN.ids), shared by the SmolLM2 and
// Gemma 3 tests. llama.cpp's CPU backend rounds activations to 8 bits before each
// quantized matmul and zinc's keeps them in f32, so where the top two logits are
// within a few tenths the two may pick differently; expect_greedy_matches_golden
// allows exactly that and nothing more.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/read_file.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "sample/sampler.h"

namespace zinc::test {

inline std::string read_text(const std::string& path) { return cli::read_file(path); }

inline std::vector<int32_t> read_ids(const std::string& path) {
  std::istringstream in(read_text(path));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// How many leading entries of a and b agree.
inline size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Continuation of prompt for up to n tokens through the generation loop with this
// sampler chain, stopping early only at the given end-of-generation ids.
inline std::vector<int32_t> sampled_generate(Model& model, Backend& backend, const std::vector<int32_t>& prompt,
                                             int64_t n, const SamplerParams& params,
                                             std::vector<int32_t> eog_ids = {}) {
  SequenceState seq = model.new_sequence(static_cast<int64_t>(prompt.size()) + n);
  Sampler sampler(params);
  GenerateOptions options;
  options.max_tokens = n;
  options.eog_ids = std::move(eog_ids);
  return generate(model, backend, seq, prompt, sampler, options, [](int32_t) { return true; }).tokens;
}

// The same, greedy.
inline std::vector<int32_t> greedy_generate(Model& model, Backend& backend, const std::vector<int32_t>& prompt,
                                            int64_t n, std::vector<int32_t> eog_ids = {}) {
  SamplerParams greedy;
  greedy.temperature = 0;
  return sampled_generate(model, backend, prompt, n, greedy, std::move(eog_ids));
}

// Compares zinc with llama.cpp's greedy tokens `want` after `prompt` (case `index`
// of the test `tag`), adding a failure for each finding:
// - teacher-forced (llama.cpp's tokens fed in), zinc's argmax is llama.cpp's token at
//   every position but at most two where zinc's top logit is within near_tie of the
//   logit of llama.cpp's token;
// - zinc's free-running greedy output (no end-of-generation ids: a premature end
//   shows up as a mismatch) equals llama.cpp's up to the first such position.
// Prints and records how many tokens the free-running output shares with llama.cpp's,
// and returns that count.
inline size_t expect_greedy_matches_golden(Model& model, Backend& backend, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& want, float near_tie, const char* tag,
                                           int index) {
  const int64_t V = model.n_vocab();
  const int64_t n_gen = static_cast<int64_t>(want.size());
  if (prompt.empty() || want.empty()) {
    ADD_FAILURE() << tag << " prompt " << index << ": empty golden";
    return 0;
  }

  // Teacher-forced: logits after the prompt and after each of llama.cpp's tokens.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), want.begin(), want.end() - 1);
  SequenceState forced = model.new_sequence(static_cast<int64_t>(all.size()));
  std::vector<float> logits(n_gen * V);
  backend.read(model.forward(forced, all, n_gen), logits.data(), logits.size() * sizeof(float));
  size_t first_flip = want.size(), flips = 0;
  for (int64_t j = 0; j < n_gen; ++j) {
    const float* row = logits.data() + j * V;
    const int32_t top = static_cast<int32_t>(std::max_element(row, row + V) - row);
    if (top == want[j]) continue;
    ++flips;
    first_flip = std::min(first_flip, static_cast<size_t>(j));
    EXPECT_LT(row[top] - row[want[j]], near_tie)
        << tag << " prompt " << index << " token " << j << ": zinc prefers " << top << " to llama.cpp's " << want[j]
        << " by more than 8-bit activation rounding explains";
  }
  EXPECT_LE(flips, 2u) << tag << " prompt " << index;

  // Free-running greedy through the generation loop.
  const size_t matched = common_prefix(greedy_generate(model, backend, prompt, n_gen), want);
  EXPECT_EQ(matched, first_flip) << tag << " prompt " << index
                                 << ": greedy output leaves llama.cpp's before a near-tie";
  ::testing::Test::RecordProperty("prompt" + std::to_string(index) + "_matched_tokens", static_cast<int>(matched));
  std::printf("[ %s ] prompt %d: zinc's greedy output equals llama.cpp's for %zu of %zu tokens%s\n", tag, index,
              matched, want.size(), matched < want.size() ? ", up to a near-tie" : "");
  return matched;
}

}  // namespace zinc::test
