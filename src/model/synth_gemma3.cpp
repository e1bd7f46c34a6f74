// Synthetic Gemma 3 (gemma3.cpp). Every preset has head_dim 256 (but 27b: 128), tied
// embeddings, norms stored +1 by the converter, no sliding_window_pattern or
// rope.freq_base_swa keys (llama.cpp's defaults: 6 and 10000). tiny and 270m mirror Gemma 3 270M's file
// (gemma-3-270m-q4_k_m.gguf): one KV head, Q8_0 embeddings, its tensor types.
//   tiny   6 layers of 256, a window of 16 positions, so the oracle's 100-token
//          sequence crosses it on the five local layers; its global layer has linear
//          RoPE scaling as the 4B and larger models do.
//   270m   the real file's shapes (18 layers of 640, vocabulary 262144, window 512)
//          with random weights: a decode benchmark beside llama.cpp.
//   4b, 12b, 27b  Gemma 3 4B's, 12B's and 27B's shapes (34 layers of 2560, 8 / 4 heads,
//          FFN 10240; 48 of 3840, 16 / 8 heads, FFN 15360; 62 of 5376, 32 / 16 heads of
//          128, FFN 21504; window 1024, linear RoPE scaling 8) with random blocks and the
//          types llama.cpp's Q4_K_M gives them: Q6_K embeddings (they are the output too),
//          Q4_K elsewhere, attn_v and ffn_down Q6_K in the layers of its more-bits rule.
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/synth.h"

namespace zinc::synth {

ModelSpec gemma3_spec(const Options& opt) {
  struct Shape {
    int64_t layers, embd, vocab, ctx, heads, kv_heads, head_dim, ff, window;
    bool rope_scaling;
  };
  Shape s;
  if (opt.preset == "tiny") s = {6, 256, 1000, 2048, 4, 1, 256, 512, 16, true};
  else if (opt.preset == "270m") s = {18, 640, 262144, 32768, 4, 1, 256, 2048, 512, false};
  else if (opt.preset == "4b") s = {34, 2560, 262208, 131072, 8, 4, 256, 10240, 1024, true};
  else if (opt.preset == "12b") s = {48, 3840, 262208, 131072, 16, 8, 256, 15360, 1024, true};
  else if (opt.preset == "27b") s = {62, 5376, 262208, 131072, 32, 16, 128, 21504, 1024, true};
  else
    throw std::invalid_argument("synth: unknown gemma3 preset '" + opt.preset + "' (known: tiny, 270m, 4b, 12b, 27b)");
  const bool big = opt.preset != "tiny" && opt.preset != "270m";  // a released size in Q4_K_M: random blocks
  if (opt.layers) s.layers = *opt.layers;
  if (opt.vocab) s.vocab = *opt.vocab;
  if (s.layers < 1) throw std::invalid_argument("synth: need layers >= 1");
  if (opt.experts) throw std::invalid_argument("synth: gemma3 has no experts");
  DType embd = DType::Q8_0, qk = DType::Q5_0, v = DType::Q8_0, out = DType::Q4_K, gate_up = DType::Q5_0,
        down = DType::Q6_K;
  if (big) embd = DType::Q6_K, qk = v = out = gate_up = down = DType::Q4_K;
  if (opt.type) embd = qk = v = out = gate_up = down = *opt.type;
  // attn_v and ffn_down Q6_K in the layers of llama.cpp's more-bits rule (Q4_K_M only).
  const bool more_bits = big && !opt.type;

  ModelSpec spec;
  spec.random_blocks = big;
  spec.metadata = [s, preset = opt.preset](gguf::GgufWriter& w) {
    const std::string a = "gemma3.";
    w.set_string("general.architecture", "gemma3");
    w.set_string("general.name", "zinc synthetic gemma3 " + preset);
    w.set_u32(a + "context_length", static_cast<uint32_t>(s.ctx));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.embd));
    w.set_u32(a + "block_count", static_cast<uint32_t>(s.layers));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.ff));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    w.set_f32(a + "rope.freq_base", 1000000.0f);
    if (s.rope_scaling) {
      w.set_string(a + "rope.scaling.type", "linear");
      w.set_f32(a + "rope.scaling.factor", 8.0f);
    }
    w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.window));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.vocab));
    w.set_string("tokenizer.ggml.model", "none");
  };

  // std 1/sqrt(fan-in) keeps activations near unit scale; norm weights near 1 (the
  // converter's +1 on a weight near 0).
  auto matrix = [&](std::string name, DType t, std::vector<int64_t> dims) {
    const float std_dev = 1.0f / std::sqrt(static_cast<float>(dims[0]));
    spec.tensors.push_back({std::move(name), t, std::move(dims), Init::Normal, std_dev, 0.0f});
  };
  auto norm = [&](std::string name, int64_t d) {
    spec.tensors.push_back({std::move(name), DType::F32, {d}, Init::NearOne, 0.1f, 0.0f});
  };
  // The embedding is scaled by sqrt(embd) on the way in, so its entries are drawn small.
  spec.tensors.push_back({"token_embd.weight", embd, {s.embd, s.vocab}, Init::Normal,
                          1.0f / std::sqrt(static_cast<float>(s.embd)), 0.0f});
  norm("output_norm.weight", s.embd);
  const int64_t q_width = s.heads * s.head_dim, kv_width = s.kv_heads * s.head_dim;
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    norm(b + "attn_norm.weight", s.embd);
    matrix(b + "attn_q.weight", qk, {s.embd, q_width});
    matrix(b + "attn_k.weight", qk, {s.embd, kv_width});
    const bool more = more_bits && more_bits_layer(i, s.layers);
    matrix(b + "attn_v.weight", more ? DType::Q6_K : v, {s.embd, kv_width});
    matrix(b + "attn_output.weight", out, {q_width, s.embd});
    norm(b + "attn_q_norm.weight", s.head_dim);
    norm(b + "attn_k_norm.weight", s.head_dim);
    norm(b + "post_attention_norm.weight", s.embd);
    norm(b + "ffn_norm.weight", s.embd);
    matrix(b + "ffn_gate.weight", gate_up, {s.embd, s.ff});
    matrix(b + "ffn_up.weight", gate_up, {s.embd, s.ff});
    matrix(b + "ffn_down.weight", more ? DType::Q6_K : down, {s.ff, s.embd});
    norm(b + "post_ffw_norm.weight", s.embd);
  }
  return spec;
}

}  // namespace zinc::synth
