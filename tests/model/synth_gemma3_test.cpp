// The Gemma 3 benchmark presets: their tensors' shapes and types written out here from
// the released models' configs and llama.cpp's Q4_K_M rule, and the sizes of the real
// Q4_K_M files (2.49, 7.30 and 16.5 GB).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/synth.h"

namespace zinc {
namespace {

struct Gemma3Size {
  std::string preset;
  int64_t layers, embd, heads, kv_heads, head_dim, ff;
  std::vector<int> more_bits;  // layers whose attn_v and ffn_down are Q6_K
  double gb;
};

class SynthGemma3 : public ::testing::TestWithParam<Gemma3Size> {};

TEST_P(SynthGemma3, MatchesTheReleasedModelInQ4KM) {
  const Gemma3Size& f = GetParam();
  synth::Options opt;
  opt.arch = "gemma3";
  opt.preset = f.preset;
  const synth::ModelSpec spec = synth::make_spec(opt);
  EXPECT_TRUE(spec.random_blocks);
  const int64_t q_width = f.heads * f.head_dim, kv_width = f.kv_heads * f.head_dim;
  struct Want {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
  };
  std::vector<Want> want = {{"token_embd.weight", DType::Q6_K, {f.embd, 262208}},
                            {"output_norm.weight", DType::F32, {f.embd}}};
  for (int i = 0; i < f.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const bool more = std::find(f.more_bits.begin(), f.more_bits.end(), i) != f.more_bits.end();
    const DType wide = more ? DType::Q6_K : DType::Q4_K;
    want.push_back({b + "attn_norm.weight", DType::F32, {f.embd}});
    want.push_back({b + "attn_q.weight", DType::Q4_K, {f.embd, q_width}});
    want.push_back({b + "attn_k.weight", DType::Q4_K, {f.embd, kv_width}});
    want.push_back({b + "attn_v.weight", wide, {f.embd, kv_width}});
    want.push_back({b + "attn_output.weight", DType::Q4_K, {q_width, f.embd}});
    want.push_back({b + "attn_q_norm.weight", DType::F32, {f.head_dim}});
    want.push_back({b + "attn_k_norm.weight", DType::F32, {f.head_dim}});
    want.push_back({b + "post_attention_norm.weight", DType::F32, {f.embd}});
    want.push_back({b + "ffn_norm.weight", DType::F32, {f.embd}});
    want.push_back({b + "ffn_gate.weight", DType::Q4_K, {f.embd, f.ff}});
    want.push_back({b + "ffn_up.weight", DType::Q4_K, {f.embd, f.ff}});
    want.push_back({b + "ffn_down.weight", wide, {f.ff, f.embd}});
    want.push_back({b + "post_ffw_norm.weight", DType::F32, {f.embd}});
  }
  ASSERT_EQ(spec.tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(spec.tensors[i].name, want[i].name);
    EXPECT_EQ(spec.tensors[i].type, want[i].type) << want[i].name;
    EXPECT_EQ(spec.tensors[i].dims, want[i].dims) << want[i].name;
  }
  EXPECT_NEAR(static_cast<double>(synth::total_bytes(spec)) / 1e9, f.gb, 0.01);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, SynthGemma3,
    ::testing::Values(Gemma3Size{"4b", 34, 2560, 8, 4, 256, 10240,
                                 {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29, 30, 31, 32, 33}, 2.48},
                      Gemma3Size{"12b", 48, 3840, 16, 8, 256, 15360,
                                 {0,  1,  2,  3,  4,  5,  8,  11, 14, 17, 20, 23,
                                  26, 29, 32, 35, 38, 41, 42, 43, 44, 45, 46, 47},
                                 7.29},
                      Gemma3Size{"27b", 62, 5376, 32, 16, 128, 21504,
                                 {0,  1,  2,  3,  4,  5,  6,  9,  12, 15, 18, 21, 24, 27, 30, 33,
                                  36, 39, 42, 45, 48, 51, 54, 55, 56, 57, 58, 59, 60, 61},
                                 16.54}),
    [](const ::testing::TestParamInfo<Gemma3Size>& info) { return "gemma3_" + info.param.preset; });

}  // namespace
}  // namespace zinc
