// Synthetic GPT-OSS (gpt_oss.cpp), with the tensor types of ggml-org's
// gpt-oss-20b-mxfp4.gguf: experts MXFP4, the embedding, the LM head and the attention
// projections Q8_0, everything else (norms, biases, sinks, the router) F32.
//   tiny   4 layers of 320 (a row of 10 blocks: Q8_0 rows are not 16-byte aligned,
//          as 2880-wide ones are not), 8 experts of 192 with 4 used, a window of 16
//          positions so the oracle's 100-token sequence crosses it on the even layers.
//   20b    gpt-oss-20b's shapes (24 layers of 2880, 32 experts, 4 used, vocabulary
//          201088, window 128) with random weights: a benchmark beside llama.cpp.
// Both carry the real RoPE settings: base 150000, YaRN factor 32 over 4096 positions.
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/synth.h"

namespace zinc::synth {

ModelSpec gpt_oss_spec(const Options& opt) {
  struct Shape {
    int64_t layers, embd, vocab, ctx, heads, kv_heads, head_dim, experts, used, ff, window;
  };
  Shape s;
  if (opt.preset == "tiny") s = {4, 320, 1000, 4096, 8, 2, 64, 8, 4, 192, 16};
  else if (opt.preset == "20b") s = {24, 2880, 201088, 131072, 64, 8, 64, 32, 4, 2880, 128};
  else throw std::invalid_argument("synth: unknown gpt-oss preset '" + opt.preset + "' (known: tiny, 20b)");
  if (opt.layers) s.layers = *opt.layers;
  if (opt.vocab) s.vocab = *opt.vocab;
  if (opt.experts) s.experts = *opt.experts;
  if (s.layers < 1 || s.experts < s.used) throw std::invalid_argument("synth: need layers >= 1 and experts >= 4");
  DType dense = DType::Q8_0, experts = DType::MXFP4;
  if (opt.type) dense = experts = *opt.type;

  ModelSpec spec;
  spec.random_blocks = opt.preset != "tiny";
  spec.metadata = [s, preset = opt.preset](gguf::GgufWriter& w) {
    const std::string a = "gpt-oss.";
    w.set_string("general.architecture", "gpt-oss");
    w.set_string("general.name", "zinc synthetic gpt-oss " + preset);
    w.set_u32(a + "context_length", static_cast<uint32_t>(s.ctx));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.embd));
    w.set_u32(a + "block_count", static_cast<uint32_t>(s.layers));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.ff));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.window));
    w.set_f32(a + "rope.freq_base", 150000.0f);
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", 32.0f);
    w.set_u32(a + "rope.scaling.original_context_length", 4096);
    w.set_u32(a + "expert_count", static_cast<uint32_t>(s.experts));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.ff));
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.vocab));
    w.set_string("tokenizer.ggml.model", "none");
  };

  // std 1/sqrt(fan-in) keeps activations near unit scale.
  auto matrix = [&](std::string name, DType t, std::vector<int64_t> dims) {
    const float std_dev = 1.0f / std::sqrt(static_cast<float>(dims[0]));
    spec.tensors.push_back({std::move(name), t, std::move(dims), Init::Normal, std_dev, 0.0f});
  };
  auto vec = [&](std::string name, std::vector<int64_t> dims, Init init, float scale) {
    spec.tensors.push_back({std::move(name), DType::F32, std::move(dims), init, scale, 0.0f});
  };
  spec.tensors.push_back({"token_embd.weight", dense, {s.embd, s.vocab}, Init::Normal, 1.0f, 0.0f});
  vec("output_norm.weight", {s.embd}, Init::NearOne, 0.1f);
  matrix("output.weight", dense, {s.embd, s.vocab});
  const int64_t q_width = s.heads * s.head_dim, kv_width = s.kv_heads * s.head_dim;
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    vec(b + "attn_norm.weight", {s.embd}, Init::NearOne, 0.1f);
    matrix(b + "attn_q.weight", dense, {s.embd, q_width});
    vec(b + "attn_q.bias", {q_width}, Init::Normal, 0.1f);
    matrix(b + "attn_k.weight", dense, {s.embd, kv_width});
    vec(b + "attn_k.bias", {kv_width}, Init::Normal, 0.1f);
    matrix(b + "attn_v.weight", dense, {s.embd, kv_width});
    vec(b + "attn_v.bias", {kv_width}, Init::Normal, 0.1f);
    matrix(b + "attn_output.weight", dense, {q_width, s.embd});
    vec(b + "attn_output.bias", {s.embd}, Init::Normal, 0.1f);
    vec(b + "attn_sinks.weight", {s.heads}, Init::Normal, 1.0f);
    vec(b + "post_attention_norm.weight", {s.embd}, Init::NearOne, 0.1f);
    // Router logits of std ~4: with std 1 (fan-in scaling) the 4th and 5th of 8 experts
    // fall within 1e-3 of each other in 0.3% of (token, layer) pairs, and rounding then
    // swaps experts between backends (gpu-check) far more often than a trained router's would.
    vec(b + "ffn_gate_inp.weight", {s.embd, s.experts}, Init::Normal, 4.0f / std::sqrt(static_cast<float>(s.embd)));
    vec(b + "ffn_gate_inp.bias", {s.experts}, Init::Normal, 0.1f);
    matrix(b + "ffn_gate_exps.weight", experts, {s.embd, s.ff, s.experts});
    vec(b + "ffn_gate_exps.bias", {s.ff, s.experts}, Init::Normal, 0.1f);
    matrix(b + "ffn_up_exps.weight", experts, {s.embd, s.ff, s.experts});
    vec(b + "ffn_up_exps.bias", {s.ff, s.experts}, Init::Normal, 0.1f);
    matrix(b + "ffn_down_exps.weight", experts, {s.ff, s.embd, s.experts});
    vec(b + "ffn_down_exps.bias", {s.embd, s.experts}, Init::Normal, 0.1f);
  }
  return spec;
}

}  // namespace zinc::synth
