// Synthetic qwen35moe models. `35b-a3b` is the benchmark file of qwen35moe.md
// (Qwen3.5/3.6-35B-A3B's exact layout and per-tensor types); `tiny` and `tiny2`
// are small configurations for oracle tests (different head counts and types).
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/synth.h"

namespace zinc::synth {
namespace {

struct Shape {
  int64_t layers, embd, vocab, ctx;
  int64_t heads, kv_heads, head_dim, rope_dims;
  std::vector<int32_t> rope_sections;
  int64_t k_heads, v_heads, dk, dv, conv;
  int64_t experts, used, ff, shared_ff;
};

struct Types {
  DType embd, output, attn, gdn, shexp, gate_up_exps, down_exps;
};

}  // namespace

ModelSpec qwen35moe_spec(const Options& opt) {
  Shape s;
  Types ty;
  bool big = false;
  if (opt.preset == "35b-a3b") {
    s = {40, 2048, 248320, 262144, 16, 2, 256, 64, {11, 11, 10, 0}, 16, 32, 128, 128, 4, 256, 8, 512, 512};
    ty = {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q8_0, DType::Q8_0, DType::Q4_K, DType::Q5_K};
    big = true;
  } else if (opt.preset == "tiny") {
    s = {4, 256, 1024, 4096, 4, 2, 64, 16, {3, 3, 2, 0}, 4, 8, 32, 32, 4, 8, 2, 256, 256};
    ty = {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q8_0, DType::Q8_0, DType::Q4_K, DType::Q5_K};
  } else if (opt.preset == "tiny2") {
    s = {4, 512, 768, 4096, 8, 2, 64, 32, {6, 5, 5, 0}, 2, 8, 64, 32, 4, 16, 4, 256, 256};
    ty = {DType::F16, DType::BF16, DType::Q6_K, DType::Q8_0, DType::Q5_K, DType::Q8_0, DType::Q6_K};
  } else {
    throw std::invalid_argument("synth: unknown qwen35moe preset '" + opt.preset + "' (known: tiny, tiny2, 35b-a3b)");
  }
  if (opt.layers) s.layers = *opt.layers;
  if (opt.vocab) s.vocab = *opt.vocab;
  if (opt.experts) s.experts = *opt.experts;
  if (s.layers < 1 || s.experts < s.used)
    throw std::invalid_argument("synth: need layers >= 1 and experts >= " + std::to_string(s.used));
  if (opt.type) ty = {*opt.type, *opt.type, *opt.type, *opt.type, *opt.type, *opt.type, *opt.type};

  ModelSpec spec;
  spec.random_blocks = big;
  spec.metadata = [s, big, preset = opt.preset](gguf::GgufWriter& w) {
    const std::string a = "qwen35moe.";
    w.set_string("general.architecture", "qwen35moe");
    w.set_string("general.name", "zinc synthetic qwen35moe " + preset);
    w.set_u32(a + "block_count", static_cast<uint32_t>(s.layers));
    w.set_u32(a + "context_length", static_cast<uint32_t>(s.ctx));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.embd));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_f32(a + "rope.freq_base", 1e7f);
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.rope_dims));
    w.set_i32_array(a + "rope.dimension_sections", s.rope_sections);
    w.set_u32(a + "expert_count", static_cast<uint32_t>(s.experts));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.ff));
    w.set_u32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(s.shared_ff));
    w.set_u32(a + "ssm.conv_kernel", static_cast<uint32_t>(s.conv));
    w.set_u32(a + "ssm.state_size", static_cast<uint32_t>(s.dk));
    w.set_u32(a + "ssm.group_count", static_cast<uint32_t>(s.k_heads));
    w.set_u32(a + "ssm.time_step_rank", static_cast<uint32_t>(s.v_heads));
    w.set_u32(a + "ssm.inner_size", static_cast<uint32_t>(s.v_heads * s.dv));
    w.set_u32(a + "full_attention_interval", 4);
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.vocab));
    w.set_string("tokenizer.ggml.model", "none");
  };

  // Weight matrices: std 1/sqrt(fan-in) keeps activations near unit scale in tiny
  // models; the full-size preset uses the magnitudes of a real quantized file.
  auto matrix = [&](std::string name, DType t, std::vector<int64_t> dims) {
    const float std_dev = big ? 0.02f : 1.0f / std::sqrt(static_cast<float>(dims[0]));
    spec.tensors.push_back({std::move(name), t, std::move(dims), Init::Normal, std_dev, 0.0f});
  };
  auto f32 = [&](std::string name, std::vector<int64_t> dims, Init init, float scale, float mean = 0.0f) {
    spec.tensors.push_back({std::move(name), DType::F32, std::move(dims), init, scale, mean});
  };
  const float norm_spread = big ? 0.0f : 0.1f;
  const Init norm_init = big ? Init::Ones : Init::NearOne;

  spec.tensors.push_back({"token_embd.weight", ty.embd, {s.embd, s.vocab}, Init::Normal, big ? 0.02f : 1.0f, 0.0f});
  f32("output_norm.weight", {s.embd}, norm_init, norm_spread);
  matrix("output.weight", ty.output, {s.embd, s.vocab});
  const int64_t channels = 2 * s.k_heads * s.dk + s.v_heads * s.dv;
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    f32(b + "attn_norm.weight", {s.embd}, norm_init, norm_spread);
    f32(b + "post_attention_norm.weight", {s.embd}, norm_init, norm_spread);
    if ((i + 1) % 4 == 0) {
      matrix(b + "attn_q.weight", ty.attn, {s.embd, 2 * s.heads * s.head_dim});
      matrix(b + "attn_k.weight", ty.attn, {s.embd, s.kv_heads * s.head_dim});
      matrix(b + "attn_v.weight", ty.attn, {s.embd, s.kv_heads * s.head_dim});
      matrix(b + "attn_output.weight", ty.attn, {s.heads * s.head_dim, s.embd});
      f32(b + "attn_q_norm.weight", {s.head_dim}, norm_init, norm_spread);
      f32(b + "attn_k_norm.weight", {s.head_dim}, norm_init, norm_spread);
    } else {
      matrix(b + "attn_qkv.weight", ty.gdn, {s.embd, channels});
      matrix(b + "attn_gate.weight", ty.gdn, {s.embd, s.v_heads * s.dv});
      f32(b + "ssm_conv1d.weight", {s.conv, channels}, Init::Normal, 0.5f);
      // dt = softplus(a + dt_bias) around 0.13 and A in [0.5, 2]: decays of a few
      // percent per token, so the state carries information across many tokens.
      f32(b + "ssm_dt.bias", {s.v_heads}, Init::Normal, 0.5f, -2.0f);
      f32(b + "ssm_a", {s.v_heads}, Init::Uniform, 0.75f, -1.25f);
      f32(b + "ssm_beta.weight", {s.embd, s.v_heads}, Init::Normal, 1.0f / std::sqrt(float(s.embd)));
      f32(b + "ssm_alpha.weight", {s.embd, s.v_heads}, Init::Normal, 1.0f / std::sqrt(float(s.embd)));
      f32(b + "ssm_norm.weight", {s.dv}, norm_init, norm_spread);
      matrix(b + "ssm_out.weight", ty.gdn, {s.v_heads * s.dv, s.embd});
    }
    f32(b + "ffn_gate_inp.weight", {s.embd, s.experts}, Init::Normal, 2.0f / std::sqrt(float(s.embd)));
    matrix(b + "ffn_gate_exps.weight", ty.gate_up_exps, {s.embd, s.ff, s.experts});
    matrix(b + "ffn_up_exps.weight", ty.gate_up_exps, {s.embd, s.ff, s.experts});
    matrix(b + "ffn_down_exps.weight", ty.down_exps, {s.ff, s.embd, s.experts});
    f32(b + "ffn_gate_inp_shexp.weight", {s.embd}, Init::Normal, 1.0f / std::sqrt(float(s.embd)));
    matrix(b + "ffn_gate_shexp.weight", ty.shexp, {s.embd, s.shared_ff});
    matrix(b + "ffn_up_shexp.weight", ty.shexp, {s.embd, s.shared_ff});
    matrix(b + "ffn_down_shexp.weight", ty.shexp, {s.shared_ff, s.embd});
  }
  return spec;
}

}  // namespace zinc::synth
