// The Gemma 3 12B benchmark preset: its tensors' shapes and types written out here from
// the released model's config and llama.cpp's Q4_K_M rule, and the size of the real
// Q4_K_M file (7.30 GB).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/synth.h"

namespace zinc {
namespace {

TEST(SynthGemma3, TwelveBMatchesTheReleasedModelInQ4KM) {
  synth::Options opt;
  opt.arch = "gemma3";
  opt.preset = "12b";
  const synth::ModelSpec spec = synth::make_spec(opt);
  EXPECT_TRUE(spec.random_blocks);
  const int64_t embd = 3840, q_width = 16 * 256, kv_width = 8 * 256, ff = 15360;
  // Layers whose attn_v and ffn_down are Q6_K: the first and last six, every third between.
  const std::vector<int> more = {0,  1,  2,  3,  4,  5,  8,  11, 14, 17, 20, 23,
                                 26, 29, 32, 35, 38, 41, 42, 43, 44, 45, 46, 47};
  struct Want {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
  };
  std::vector<Want> want = {{"token_embd.weight", DType::Q6_K, {embd, 262208}},
                            {"output_norm.weight", DType::F32, {embd}}};
  for (int i = 0; i < 48; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const DType wide = std::find(more.begin(), more.end(), i) != more.end() ? DType::Q6_K : DType::Q4_K;
    want.push_back({b + "attn_norm.weight", DType::F32, {embd}});
    want.push_back({b + "attn_q.weight", DType::Q4_K, {embd, q_width}});
    want.push_back({b + "attn_k.weight", DType::Q4_K, {embd, kv_width}});
    want.push_back({b + "attn_v.weight", wide, {embd, kv_width}});
    want.push_back({b + "attn_output.weight", DType::Q4_K, {q_width, embd}});
    want.push_back({b + "attn_q_norm.weight", DType::F32, {256}});
    want.push_back({b + "attn_k_norm.weight", DType::F32, {256}});
    want.push_back({b + "post_attention_norm.weight", DType::F32, {embd}});
    want.push_back({b + "ffn_norm.weight", DType::F32, {embd}});
    want.push_back({b + "ffn_gate.weight", DType::Q4_K, {embd, ff}});
    want.push_back({b + "ffn_up.weight", DType::Q4_K, {embd, ff}});
    want.push_back({b + "ffn_down.weight", wide, {ff, embd}});
    want.push_back({b + "post_ffw_norm.weight", DType::F32, {embd}});
  }
  ASSERT_EQ(spec.tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(spec.tensors[i].name, want[i].name);
    EXPECT_EQ(spec.tensors[i].type, want[i].type) << want[i].name;
    EXPECT_EQ(spec.tensors[i].dims, want[i].dims) << want[i].name;
  }
  EXPECT_NEAR(static_cast<double>(synth::total_bytes(spec)) / 1e9, 7.29, 0.01);
}

}  // namespace
}  // namespace zinc
