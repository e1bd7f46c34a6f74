// Synthetic models of the plain pre-norm transformers (transformer.cpp): `llama`,
// `qwen3` and `qwen3moe`, tiny configurations for the oracle tests. Each preset
// mirrors a real family's quirks and mix of block types:
//   llama tiny          SmolLM2-like: tied embeddings, mostly Q4_1 (SmolLM2's file)
//   llama smollm2-135m  SmolLM2-135M-Instruct.Q4_1.gguf's shapes and types, random weights:
//                       a decode benchmark of README's chat model beside llama.cpp
//   llama tiny-llama3   Llama-3-like: wide GQA, rope_freqs.weight, untied output
//   llama 8b            Llama-3.1-8B's shapes, random weights, Q4_K_M's types (below)
//   llama wide          two layers wide enough that decoding one token takes the CUDA
//                       backend's one-token matmul_few forms (groups of 2048 rows or more)
//                       in Q4_K, Q5_K, Q6_K and Q8_0: rows of 10 chunks (two a warp), of
//                       9 (a ragged team), of 21 (three splits, ragged), Q6_K rows that are
//                       not 16-byte multiples; for gpu-check's whole-model checks, whose
//                       tiny models never reach them
//   qwen3 tiny          Qwen3-0.6B-like: head_dim 128 != embd / heads, tied embeddings
//   qwen3 8b            Qwen3-8B's shapes, random weights, Q4_K_M's types (below)
//   qwen3moe tiny       Qwen3-30B-A3B-like: 8 experts, 2 used, no shared expert
//   qwen3moe 30b-a3b    Qwen3-30B-A3B's shapes, random weights, Q4_K_M's types
// The full-size presets are benchmark files: the same file for zinc and llama.cpp.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "model/synth.h"

namespace zinc::synth {
namespace {

struct Shape {
  int64_t layers, embd, vocab, ctx;
  int64_t heads, kv_heads, head_dim, ff;
  int64_t experts, used;  // 0 for dense models
  float rope_base, norm_eps;
  bool tied, rope_freqs;
};

struct Types {
  DType embd, output, attn_qk, attn_v, attn_out, ffn_gate_up, ffn_down;
  // attn_v and ffn_down of the layers that llama.cpp's Q4_K_M gives more bits
  // (more_bits_layer); none: every layer as above.
  std::optional<DType> more_bits;
};

// Q4_K_M as llama.cpp's quantizer assigns it to these models' tensors.
constexpr Types kQ4KM = {DType::Q4_K, DType::Q6_K, DType::Q4_K, DType::Q4_K,
                         DType::Q4_K, DType::Q4_K, DType::Q4_K, DType::Q6_K};

// big: a full-size file, written from random blocks with a real quantized file's
// magnitudes (as synth_qwen35moe's benchmark file); else std 1/sqrt(fan-in).
ModelSpec transformer_spec(const std::string& arch, const std::string& preset, Shape s, Types ty,
                           const Options& opt, bool big = false) {
  if (opt.layers) s.layers = *opt.layers;
  if (opt.vocab) s.vocab = *opt.vocab;
  if (opt.experts) s.experts = *opt.experts;
  if (s.layers < 1 || s.experts < s.used)
    throw std::invalid_argument("synth: need layers >= 1 and experts >= " + std::to_string(s.used));
  if (opt.type) ty = {*opt.type, *opt.type, *opt.type, *opt.type, *opt.type, *opt.type, *opt.type, std::nullopt};
  const bool moe = s.experts > 0, qk_norm = arch != "llama";

  ModelSpec spec;
  spec.random_blocks = big;
  spec.metadata = [arch, preset, s, moe](gguf::GgufWriter& w) {
    const std::string a = arch + ".";
    w.set_string("general.architecture", arch);
    w.set_string("general.name", "zinc synthetic " + arch + " " + preset);
    w.set_u32(a + "block_count", static_cast<uint32_t>(s.layers));
    w.set_u32(a + "context_length", static_cast<uint32_t>(s.ctx));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.embd));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", s.norm_eps);
    w.set_f32(a + "rope.freq_base", s.rope_base);
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim));
    if (moe) {
      w.set_u32(a + "expert_count", static_cast<uint32_t>(s.experts));
      w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.used));
      w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.ff));
    } else {
      w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.ff));
    }
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.vocab));
    w.set_string("tokenizer.ggml.model", "none");
  };

  // std 1/sqrt(fan-in) keeps activations near unit scale; norm weights near 1.
  auto matrix = [&](std::string name, DType t, std::vector<int64_t> dims) {
    const float std_dev = big ? 0.02f : 1.0f / std::sqrt(static_cast<float>(dims[0]));
    spec.tensors.push_back({std::move(name), t, std::move(dims), Init::Normal, std_dev, 0.0f});
  };
  auto f32 = [&](std::string name, std::vector<int64_t> dims, Init init, float scale, float mean = 0.0f) {
    spec.tensors.push_back({std::move(name), DType::F32, std::move(dims), init, scale, mean});
  };

  spec.tensors.push_back({"token_embd.weight", ty.embd, {s.embd, s.vocab}, Init::Normal, big ? 0.02f : 1.0f, 0.0f});
  f32("output_norm.weight", {s.embd}, Init::NearOne, 0.1f);
  if (!s.tied) matrix("output.weight", ty.output, {s.embd, s.vocab});
  // Llama 3's long-context divisors run from 1 to 8 across the frequencies; random
  // ones in that range make any misuse (multiplying, wrong order) show.
  if (s.rope_freqs) f32("rope_freqs.weight", {s.head_dim / 2}, Init::Uniform, 3.5f, 4.5f);
  const int64_t q_width = s.heads * s.head_dim, kv_width = s.kv_heads * s.head_dim;
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const bool more = ty.more_bits && more_bits_layer(i, s.layers);
    const DType attn_v = more ? *ty.more_bits : ty.attn_v, ffn_down = more ? *ty.more_bits : ty.ffn_down;
    f32(b + "attn_norm.weight", {s.embd}, Init::NearOne, 0.1f);
    matrix(b + "attn_q.weight", ty.attn_qk, {s.embd, q_width});
    matrix(b + "attn_k.weight", ty.attn_qk, {s.embd, kv_width});
    matrix(b + "attn_v.weight", attn_v, {s.embd, kv_width});
    matrix(b + "attn_output.weight", ty.attn_out, {q_width, s.embd});
    if (qk_norm) {
      f32(b + "attn_q_norm.weight", {s.head_dim}, Init::NearOne, 0.1f);
      f32(b + "attn_k_norm.weight", {s.head_dim}, Init::NearOne, 0.1f);
    }
    f32(b + "ffn_norm.weight", {s.embd}, Init::NearOne, 0.1f);
    if (moe) {
      f32(b + "ffn_gate_inp.weight", {s.embd, s.experts}, Init::Normal, 2.0f / std::sqrt(float(s.embd)));
      matrix(b + "ffn_gate_exps.weight", ty.ffn_gate_up, {s.embd, s.ff, s.experts});
      matrix(b + "ffn_up_exps.weight", ty.ffn_gate_up, {s.embd, s.ff, s.experts});
      matrix(b + "ffn_down_exps.weight", ffn_down, {s.ff, s.embd, s.experts});
    } else {
      matrix(b + "ffn_gate.weight", ty.ffn_gate_up, {s.embd, s.ff});
      matrix(b + "ffn_up.weight", ty.ffn_gate_up, {s.embd, s.ff});
      matrix(b + "ffn_down.weight", ffn_down, {s.ff, s.embd});
    }
  }
  return spec;
}

[[noreturn]] void unknown_preset(const std::string& arch, const std::string& preset, const char* known) {
  throw std::invalid_argument("synth: unknown " + arch + " preset '" + preset + "' (known: " + known + ")");
}

}  // namespace

bool more_bits_layer(int64_t i, int64_t layers) {
  return i < layers / 8 || i >= 7 * layers / 8 || (i - layers / 8) % 3 == 2;
}

ModelSpec llama_spec(const Options& opt) {
  if (opt.preset == "tiny")
    return transformer_spec("llama", opt.preset,
                            {4, 256, 1000, 2048, 4, 2, 64, 512, 0, 0, 100000.0f, 1e-5f, true, false},
                            {DType::Q8_0, DType::Q8_0, DType::Q4_1, DType::Q6_K, DType::Q4_1, DType::Q4_1,
                             DType::Q6_K, std::nullopt},
                            opt);
  if (opt.preset == "tiny-llama3")
    return transformer_spec("llama", opt.preset,
                            {4, 256, 1200, 8192, 8, 2, 32, 768, 0, 0, 500000.0f, 1e-5f, false, true},
                            {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q5_K, DType::Q4_K, DType::Q4_K,
                             DType::Q6_K, std::nullopt},
                            opt);
  if (opt.preset == "smollm2-135m")
    return transformer_spec("llama", opt.preset,
                            {30, 576, 49152, 8192, 9, 3, 64, 1536, 0, 0, 100000.0f, 1e-5f, true, false},
                            {DType::Q8_0, DType::Q8_0, DType::Q4_1, DType::Q4_1, DType::Q4_1, DType::Q4_1,
                             DType::Q4_1, std::nullopt},
                            opt);
  if (opt.preset == "8b")
    return transformer_spec("llama", opt.preset,
                            {32, 4096, 128256, 131072, 32, 8, 128, 14336, 0, 0, 500000.0f, 1e-5f, false, true},
                            kQ4KM, opt, true);
  if (opt.preset == "wide")  // layer 1 takes the more_bits types (more_bits_layer)
    return transformer_spec("llama", opt.preset,
                            {2, 2560, 2048, 4096, 9, 3, 256, 5376, 0, 0, 500000.0f, 1e-5f, false, false},
                            {DType::Q4_K, DType::Q6_K, DType::Q4_K, DType::Q5_K, DType::Q8_0, DType::Q4_K,
                             DType::Q5_K, DType::Q6_K},
                            opt);
  unknown_preset("llama", opt.preset, "tiny, tiny-llama3, smollm2-135m, 8b, wide");
}

ModelSpec qwen3_spec(const Options& opt) {
  if (opt.preset == "tiny")
    return transformer_spec("qwen3", opt.preset,
                            {4, 256, 1000, 4096, 4, 2, 128, 512, 0, 0, 1000000.0f, 1e-6f, true, false},
                            {DType::Q6_K, DType::Q6_K, DType::Q8_0, DType::Q8_0, DType::Q4_K, DType::Q4_K,
                             DType::Q6_K, std::nullopt},
                            opt);
  if (opt.preset == "8b")
    return transformer_spec("qwen3", opt.preset,
                            {36, 4096, 151936, 40960, 32, 8, 128, 12288, 0, 0, 1000000.0f, 1e-6f, false, false},
                            kQ4KM, opt, true);
  unknown_preset("qwen3", opt.preset, "tiny, 8b");
}

ModelSpec qwen3moe_spec(const Options& opt) {
  if (opt.preset == "tiny")
    return transformer_spec("qwen3moe", opt.preset,
                            {4, 256, 1000, 4096, 4, 2, 64, 256, 8, 2, 1000000.0f, 1e-6f, false, false},
                            {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q8_0, DType::Q8_0, DType::Q4_K,
                             DType::Q5_K, std::nullopt},
                            opt);
  if (opt.preset == "30b-a3b")
    return transformer_spec("qwen3moe", opt.preset,
                            {48, 2048, 151936, 40960, 32, 4, 128, 768, 128, 8, 1000000.0f, 1e-6f, false, false},
                            kQ4KM, opt, true);
  unknown_preset("qwen3moe", opt.preset, "tiny, 30b-a3b");
}

}  // namespace zinc::synth
