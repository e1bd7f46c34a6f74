#include "model/synth.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "quant/quant.h"

namespace zinc::synth {
namespace {

// splitmix64: a counter-based generator, so each tensor's values depend only on
// (seed, tensor index) and threads can fill tensors in any order.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

std::vector<float> draw_values(const TensorSpec& t, int64_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) {
    switch (t.init) {
      case Init::Normal: x = static_cast<float>(t.mean + t.scale * rng.normal()); break;
      case Init::NearOne: x = static_cast<float>(1.0 + t.scale * rng.normal()); break;
      case Init::Ones: x = 1.0f; break;
      case Init::Uniform: x = static_cast<float>(t.mean + t.scale * (2.0 * rng.uniform() - 1.0)); break;
    }
  }
  return v;
}

void fill_tensor(const ModelSpec& spec, const TensorSpec& t, uint64_t seed, uint64_t index, uint8_t* dst) {
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  const bool quantized = type_traits(t.type).quantized;
  if (spec.random_blocks && quantized && t.init == Init::Normal) {
    fill_random_blocks(t.type, seed, index, dst, n, t.scale);
    return;
  }
  Rng rng{seed * 0x100000001B3ull + index};
  const int64_t row = t.dims[0];
  std::vector<float> values = draw_values(t, n, rng);
  const size_t rb = row_bytes(t.type, row);
  for (int64_t r = 0; r < n / row; ++r) quantize_row(t.type, values.data() + r * row, dst + rb * r, row);
}

}  // namespace

ModelSpec make_spec(const Options& opt) {
  if (opt.arch == "qwen35moe") return qwen35moe_spec(opt);
  if (opt.arch == "llama") return llama_spec(opt);
  if (opt.arch == "qwen3") return qwen3_spec(opt);
  if (opt.arch == "qwen3moe") return qwen3moe_spec(opt);
  if (opt.arch == "gemma3") return gemma3_spec(opt);
  if (opt.arch == "gpt-oss") return gpt_oss_spec(opt);
  throw std::invalid_argument("synth: unknown architecture '" + opt.arch +
                              "' (known: qwen35moe, llama, qwen3, qwen3moe, gemma3, gpt-oss)");
}

uint64_t total_bytes(const ModelSpec& spec) {
  uint64_t total = 0;
  for (const auto& t : spec.tensors) {
    int64_t rows = 1;
    for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
    total += row_bytes(t.type, t.dims[0]) * rows;
  }
  return total;
}

void write(const ModelSpec& spec, uint64_t seed, const std::string& path, int n_threads) {
  gguf::GgufWriter w;
  spec.metadata(w);
  for (const auto& t : spec.tensors) {
    if (!spec.random_blocks && !can_quantize(t.type))
      throw std::invalid_argument("synth: cannot quantize to " + std::string(type_name(t.type)));
    w.add_tensor(t.name, t.type, t.dims);
  }
  w.write_file(
      path, [&](size_t i, uint8_t* dst) { fill_tensor(spec, spec.tensors[i], seed, i, dst); }, n_threads);
}

}  // namespace zinc::synth
