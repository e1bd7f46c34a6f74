// Perplexity over chunks (runtime/perplexity.h) on tiny random models (CPU): the
// chunking, the BOS replacement and the scored positions of llama-perplexity, against
// a log-softmax over each chunk's whole logits on the host; whatever the pieces.
#include "runtime/perplexity.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/model_test_util.h"

namespace zinc {
namespace {

class PerplexityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PerplexityTest, ScoresEachChunksSecondHalfLikeLlamaPerplexity) {
  synth::Options opt;
  opt.arch = GetParam();
  opt.preset = "tiny";
  auto file = gguf::GgufFile::open(test::synth_model(opt, 21));
  auto backend = make_cpu_backend(2);
  auto model = load_model(*file, *backend);
  const int64_t V = model->n_vocab(), n_ctx = 24;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 3 * n_ctx + 5; ++i) tokens.push_back(static_cast<int32_t>((i * 977 + 11) % V));
  constexpr int32_t kBos = 3;

  // The reference: every chunk in one pass, all its logits read, log-softmax on the host.
  double nll = 0, nll2 = 0;
  int64_t scored = 0;
  for (int64_t c = 0; c < 2; ++c) {  // max_chunks 2 of the 3 whole chunks
    std::vector<int32_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    chunk[0] = kBos;
    SequenceState seq = model->new_sequence(n_ctx);
    const Tensor logits = model->forward(seq, chunk, n_ctx);
    std::vector<float> all(static_cast<size_t>(V * n_ctx));
    backend->read(logits, all.data(), all.size() * sizeof(float));
    for (int64_t j = n_ctx / 2; j < n_ctx - 1; ++j) {
      const float* row = all.data() + j * V;
      float max = row[0];
      for (int64_t v = 1; v < V; ++v) max = std::max(max, row[v]);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      const double lp = static_cast<float>(row[tokens[c * n_ctx + j + 1]] - (max + std::log(sum)));
      nll -= lp, nll2 += lp * lp, ++scored;
    }
  }
  for (int64_t piece : {int64_t{512}, int64_t{7}, int64_t{12}, int64_t{1}}) {
    PerplexityOptions o;
    o.n_ctx = n_ctx, o.max_chunks = 2, o.bos = kBos, o.piece = piece;
    int calls = 0;
    const Perplexity p = perplexity(*model, *backend, tokens, o, [&](const Perplexity& so_far) {
      EXPECT_EQ(so_far.chunks, ++calls);
    });
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(p.scored, scored) << "piece " << piece;
    // A whole chunk a pass is the reference's arithmetic; pieces change a recurrent
    // layer's chunking (the hybrid's logits move in their last bits).
    const double tol = piece >= n_ctx ? 1e-12 : 1e-6;
    EXPECT_NEAR(p.nll, nll, tol * std::fabs(nll)) << "piece " << piece;
    EXPECT_NEAR(p.ppl(), std::exp(nll / scored), tol * std::exp(nll / scored));
    const double mean = nll / scored;
    EXPECT_NEAR(p.ppl_error(), p.ppl() * std::sqrt((nll2 / scored - mean * mean) / (scored - 1)), tol * p.ppl());
  }
  PerplexityOptions all;
  all.n_ctx = n_ctx;
  EXPECT_EQ(perplexity(*model, *backend, tokens, all).chunks, 3);  // the 5 tokens after them make no chunk
  all.n_ctx = 40;  // 77 tokens: one chunk of 40, and llama-perplexity asks for two
  EXPECT_THROW(perplexity(*model, *backend, tokens, all), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Archs, PerplexityTest, ::testing::Values("qwen35moe", "llama"));

}  // namespace
}  // namespace zinc
