// A forward pass gives each layer's scratch back when the layer ends, so what a long
// prompt's pass holds does not grow with the layer count (the flagship's 2048-token pass
// took about 28 GB of GPU scratch when every layer kept its own).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "model_test_util.h"

namespace zinc {
namespace {

// Scratch held after one pass of `tokens` tokens, its chunks folded into one of its peak.
size_t scratch_after_pass(const char* arch, int64_t layers, int64_t tokens) {
  synth::Options opt;
  opt.arch = arch;
  opt.preset = "tiny";
  opt.layers = layers;
  auto file = gguf::GgufFile::open(test::synth_model(opt, 3));
  auto be = make_cpu_backend(2);
  auto model = load_model(*file, *be);
  SequenceState seq = model->new_sequence(tokens);
  std::mt19937 rng(1);
  std::vector<int32_t> ids(tokens);
  for (auto& t : ids) t = static_cast<int32_t>(rng() % model->n_vocab());
  model->forward(seq, ids, 1);
  be->scratch_reset();
  return be->scratch_bytes();
}

TEST(LayerScratch, APassHoldsOneLayersScratchWhateverTheLayerCount) {
  struct Case {
    const char* arch;
    int64_t layers;  // one whole period of the arch's layer kinds
  };
  for (const Case c : {Case{"qwen35moe", 4}, Case{"llama", 1}, Case{"qwen3moe", 1}, Case{"gemma3", 6},
                       Case{"gpt-oss", 2}}) {
    const size_t one = scratch_after_pass(c.arch, c.layers, 192);
    const size_t three = scratch_after_pass(c.arch, 3 * c.layers, 192);
    EXPECT_GT(one, size_t{1} << 20) << c.arch << ": a pass this small would fit the first chunk whatever it kept";
    EXPECT_EQ(three, one) << c.arch;
  }
}

}  // namespace
}  // namespace zinc
