// Sliding-window layers keep a ring of their window's KV rows (blocks::kv_cache_rows):
// on the CPU backend a sequence whose rings wrap many times gives the same logits,
// bit for bit, as one that keeps every position, whatever the chunks it is fed in,
// and through a prefix-cache store and restore. (The oracle test checks a ring
// against transformers too; gpu-check compares the CUDA backend's rings with these.)
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "model_test_util.h"
#include "runtime/prefix_cache.h"

namespace zinc {
namespace {

struct Case {
  std::string arch;
  uint64_t seed;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << " seed " << c.seed; }

class WindowRing : public ::testing::TestWithParam<Case> {
 protected:
  static constexpr int64_t kTokens = 90;  // the tiny presets' window is 16

  void SetUp() override {
    synth::Options opt;
    opt.arch = GetParam().arch;
    opt.preset = "tiny";
    file_ = gguf::GgufFile::open(test::synth_model(opt, GetParam().seed));
    backend_ = make_cpu_backend(2);
    model_ = load_model(*file_, *backend_);
    std::mt19937 rng(11);
    tokens_.resize(kTokens);
    for (auto& t : tokens_) t = static_cast<int32_t>(rng() % model_->n_vocab());
  }
  // Feeds tokens [from, to) in chunks of the sizes in `chunks` (cycled), every
  // position's logits appended to out.
  void feed(SequenceState& seq, int64_t from, int64_t to, const std::vector<int64_t>& chunks,
            std::vector<float>& out) {
    const int64_t V = model_->n_vocab();
    for (size_t c = 0; from < to; ++c) {
      const int64_t n = std::min(chunks[c % chunks.size()], to - from);
      const Tensor l = model_->forward(seq, std::span(tokens_).subspan(from, n), n);
      const size_t at = out.size();
      out.resize(at + n * V);
      backend_->read(l, out.data() + at, n * V * sizeof(float));
      from += n;
    }
  }
  // The rows of the smallest KV cache (a local layer's ring, or the whole context).
  static int64_t smallest_cache(const SequenceState& seq) {
    int64_t rows = seq.n_ctx;
    for (const LayerState& l : seq.layers) rows = std::min(rows, l.k_cache.ne[2]);
    return rows;
  }

  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> tokens_;
};

TEST_P(WindowRing, MatchesTheWholeCacheBitForBit) {
  const int64_t n_ctx = 128;
  for (const std::vector<int64_t>& chunks : {std::vector<int64_t>{kTokens}, {7, 1, 13, 1, 1, 30}, {1}}) {
    SequenceState whole = model_->new_sequence(n_ctx, n_ctx);
    ASSERT_EQ(smallest_cache(whole), n_ctx);
    std::vector<float> want;
    feed(whole, 0, kTokens, chunks, want);
    for (const int64_t piece : {1, 4, 9}) {
      SCOPED_TRACE("piece " + std::to_string(piece) + ", first chunk " + std::to_string(chunks[0]));
      SequenceState ring = model_->new_sequence(n_ctx, piece);
      ASSERT_EQ(smallest_cache(ring), 16 + piece - 1);  // wraps several times over 90 tokens
      std::vector<float> got;
      feed(ring, 0, kTokens, chunks, got);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(got, want);
    }
  }
}

TEST_P(WindowRing, PrefixCacheRestoresARing) {
  const int64_t n_ctx = 128, piece = 4;
  // Blocks shorter and longer than the ring's 19 rows.
  for (const int64_t block : {8, 32}) {
    SCOPED_TRACE("block " + std::to_string(block));
    PrefixCache cache(block, size_t{64} << 20);
    SequenceState first = model_->new_sequence(n_ctx, piece);
    std::vector<float> want;
    for (int64_t at = 0; at < kTokens; at += block) {
      feed(first, at, std::min(at + block, kTokens), {block}, want);
      cache.store(*backend_, std::span(tokens_).first(first.n_past), first, true);
    }
    // Up to five blocks, more than the ring holds: the earlier blocks' rows are not
    // copied (restore), which must not change what the ring reads.
    SequenceState second = model_->new_sequence(n_ctx, piece);
    const int64_t restored = cache.restore(*backend_, tokens_, 5 * block + 5, second);
    ASSERT_EQ(restored, std::min(5 * block, kTokens / block * block));
    std::vector<float> got;
    feed(second, restored, kTokens, {block}, got);
    const std::vector<float> tail(want.end() - static_cast<int64_t>(got.size()), want.end());
    EXPECT_EQ(got, tail);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, WindowRing, ::testing::Values(Case{"gemma3", 45}, Case{"gpt-oss", 46}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.arch == "gemma3" ? std::string("gemma3") : std::string("gpt_oss");
                         });

}  // namespace
}  // namespace zinc
