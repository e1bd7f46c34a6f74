// Fetching an architecture's weights from a GGUF by name, with the shape checked
// against what the architecture expects, so a malformed file fails at load with a
// message naming the tensor rather than at some op later.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/blocks.h"

namespace zinc {

// The position scale of RoPE from `<arch>.rope.scaling.*`: 1, or 1/factor for linear
// scaling; other schemes would silently give wrong logits at every position, so they
// are refused.
float linear_rope_scale(const gguf::GgufFile& f, const std::string& arch);

// The heads of `<arch>.attention.*` into opt: head_count, head_count_kv (default
// head_count), key_length (default n_embd / head_count), which value_length must equal;
// RoPE over whole heads (n_rot = head_dim) and norm_eps = eps. What else differs is
// the architecture's to set.
void read_attention_heads(const gguf::GgufFile& f, const std::string& arch, int64_t n_embd, float eps,
                          blocks::AttentionOptions& opt);

// YaRN RoPE scaling from `<arch>.rope.scaling.*` (type "yarn", factor,
// original_context_length, yarn_beta_fast / yarn_beta_slow defaulting to 32 / 1): the
// divisor of each of the n_rot/2 frequencies (RopeParams::freq_factors) and the
// factor `mscale` = 1 + 0.1·ln(factor) by which YaRN multiplies cos and sin, i.e. the
// attention scores by mscale². The ramp between the extrapolated and the interpolated
// frequencies runs between the correction dimensions as computed, not rounded out to
// whole dimensions: OpenAI's gpt-oss reference and Hugging Face with truncate=false
// (GPT-OSS's config) do that; llama.cpp rounds them (floor / ceil).
struct YarnScaling {
  std::vector<float> freq_factors;
  float mscale = 1;
};
YarnScaling yarn_rope_scaling(const gguf::GgufFile& f, const std::string& arch, int n_rot, float theta);

class WeightLoader {
 public:
  WeightLoader(const gguf::GgufFile& file, Backend& backend) : file_(file), backend_(backend) {}

  // dims in GGML order, -1 for any; the tensor may omit trailing 1s ({2048} for {2048, 1}).
  Tensor get(const std::string& name, std::initializer_list<int64_t> dims) const;
  Tensor get_optional(const std::string& name, std::initializer_list<int64_t> dims) const;
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // A per-layer tensor name: "blk.<layer>.<suffix>".
  static std::string blk(int layer, const char* suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

  const gguf::GgufFile& file() const { return file_; }

 private:
  const gguf::GgufFile& file_;
  Backend& backend_;
};

}  // namespace zinc
