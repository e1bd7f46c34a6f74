#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace zinc {

namespace {
std::string dims_string(const std::vector<int64_t>& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}
}  // namespace

float linear_rope_scale(const gguf::GgufFile& f, const std::string& arch) {
  const std::string type = f.get_string_or(arch + ".rope.scaling.type", "none");
  if (type == "none") return 1.0f;
  if (type == "linear") return static_cast<float>(1.0 / f.get_float(arch + ".rope.scaling.factor"));
  throw std::runtime_error(f.path() + ": rope scaling '" + type + "' is not supported");
}

void read_attention_heads(const gguf::GgufFile& f, const std::string& arch, int64_t n_embd, float eps,
                          blocks::AttentionOptions& opt) {
  const std::string a = arch + ".attention.";
  opt.n_head = f.get_int(a + "head_count");
  opt.n_head_kv = f.get_int_or(a + "head_count_kv", opt.n_head);
  opt.head_dim = f.get_int_or(a + "key_length", n_embd / opt.n_head);
  if (f.get_int_or(a + "value_length", opt.head_dim) != opt.head_dim)
    throw std::runtime_error(f.path() + ": value_length != key_length is not supported");
  opt.rope.n_rot = static_cast<int>(opt.head_dim);
  opt.norm_eps = eps;
}

YarnScaling yarn_rope_scaling(const gguf::GgufFile& f, const std::string& arch, int n_rot, float theta) {
  const std::string a = arch + ".rope.scaling.";
  if (f.get_string_or(a + "type", "none") != "yarn")
    throw std::runtime_error(f.path() + ": expected rope.scaling.type 'yarn'");
  const double factor = f.get_float(a + "factor");
  const double n_orig = static_cast<double>(f.get_int(a + "original_context_length"));
  const double beta_fast = f.get_float_or(a + "yarn_beta_fast", 32.0),
               beta_slow = f.get_float_or(a + "yarn_beta_slow", 1.0);
  if (factor < 1 || n_orig <= 0 || n_rot <= 0)
    throw std::runtime_error(f.path() + ": bad yarn rope scaling (factor " + std::to_string(factor) + ")");
  // Frequency pair j turns n_orig / (2π · theta^(2j/n_rot)) times over the original
  // context; pairs turning more than beta_fast times keep their frequency, fewer than
  // beta_slow are divided by factor, and a linear ramp blends those in between.
  const auto corr_dim = [&](double turns) {
    return n_rot * std::log(n_orig / (turns * 2 * std::numbers::pi)) / (2 * std::log(static_cast<double>(theta)));
  };
  const double low = std::max(0.0, corr_dim(beta_fast)), high = std::min(n_rot - 1.0, corr_dim(beta_slow));
  YarnScaling y;
  for (int j = 0; j < n_rot / 2; ++j) {
    const double ramp = std::clamp((j - low) / std::max(high - low, 0.001), 0.0, 1.0);
    const double keep = 1 - ramp;  // the share of the extrapolated (unscaled) frequency
    y.freq_factors.push_back(static_cast<float>(1.0 / (keep + (1 - keep) / factor)));
  }
  y.mscale = factor > 1 ? static_cast<float>(1 + 0.1 * std::log(factor)) : 1.0f;
  return y;
}

Tensor WeightLoader::get(const std::string& name, std::initializer_list<int64_t> dims) const {
  const gguf::TensorInfo* info = file_.find_tensor(name);
  if (!info) throw std::runtime_error(file_.path() + ": missing tensor " + name);
  std::vector<int64_t> want(dims);
  bool ok = info->dims.size() <= 4;
  for (size_t i = 0; ok && i < 4; ++i) {
    const int64_t d = i < want.size() ? want[i] : 1;
    ok = d < 0 || info->dim(i) == d;
  }
  if (!ok)
    throw std::runtime_error(file_.path() + ": tensor " + name + " has dims " + dims_string(info->dims) +
                             ", expected " + dims_string(want));
  return backend_.upload_weight(*info);
}

Tensor WeightLoader::get_optional(const std::string& name, std::initializer_list<int64_t> dims) const {
  return has(name) ? get(name, dims) : Tensor{};
}

}  // namespace zinc
