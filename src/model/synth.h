// Synthetic models: random-weight GGUF files with an architecture's exact tensor
// names and layout. Tiny ones feed the oracle tests; the full-size flagship preset
// is the benchmark file (qwen35moe.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/types.h"

namespace zinc::synth {

// How a tensor's values are drawn.
enum class Init {
  Normal,    // N(mean, scale)
  NearOne,   // 1 + N(0, scale): norm weights (stored +1 by the converter)
  Ones,      // exactly 1
  Uniform,   // U(mean - scale, mean + scale)
};

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<int64_t> dims;  // GGML order
  Init init = Init::Normal;
  float scale = 1.0f;
  float mean = 0.0f;
};

struct ModelSpec {
  std::function<void(gguf::GgufWriter&)> metadata;
  std::vector<TensorSpec> tensors;
  // Full-size presets draw quantized blocks directly (fast); tiny ones quantize
  // Gaussian floats so values look like a real model's.
  bool random_blocks = false;
};

struct Options {
  std::string arch = "qwen35moe";
  std::string preset = "tiny";
  std::optional<int64_t> layers, experts;
  std::optional<DType> type;  // every weight matrix in this type
  std::optional<int64_t> vocab;  // vocabulary size (to match a real tokenizer)
};

// Throws for an unknown arch or preset.
ModelSpec make_spec(const Options& opt);
uint64_t total_bytes(const ModelSpec& spec);
void write(const ModelSpec& spec, uint64_t seed, const std::string& path, int n_threads);

// Whether llama.cpp's Q4_K_M gives layer i of `layers` more bits (Q6_K attn_v and
// ffn_down): the first and last eighth, and every third layer between.
bool more_bits_layer(int64_t i, int64_t layers);  // synth_transformer.cpp

// Per-architecture specs (synth_<arch>.cpp).
ModelSpec qwen35moe_spec(const Options& opt);
ModelSpec llama_spec(const Options& opt);     // synth_transformer.cpp
ModelSpec qwen3_spec(const Options& opt);     // synth_transformer.cpp
ModelSpec qwen3moe_spec(const Options& opt);  // synth_transformer.cpp
ModelSpec gemma3_spec(const Options& opt);    // synth_gemma3.cpp
ModelSpec gpt_oss_spec(const Options& opt);   // synth_gpt_oss.cpp

}  // namespace zinc::synth
