#include "model_test_util.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>

#include <unistd.h>

#include "test_util.h"

namespace zinc::test {

namespace {
// What the preset asks for (each tensor's name, type, shape and values' law, and the
// file's size with its metadata), so that a changed preset never reuses a cached file.
std::string spec_fingerprint(const synth::ModelSpec& spec) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001B3ull;
  };
  gguf::GgufWriter w;
  spec.metadata(w);
  for (const synth::TensorSpec& t : spec.tensors) {
    w.add_tensor(t.name, t.type, t.dims);
    mix(t.name.data(), t.name.size());
    mix(&t.type, sizeof t.type);
    mix(t.dims.data(), t.dims.size() * sizeof(int64_t));
    mix(&t.init, sizeof t.init);
    mix(&t.scale, sizeof t.scale);
    mix(&t.mean, sizeof t.mean);
  }
  const uint64_t bytes = w.total_bytes();
  mix(&bytes, sizeof bytes);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}
}  // namespace

std::string synth_model(const synth::Options& opt, uint64_t seed) {
  static std::mutex mu;
  static std::map<std::string, std::string> made;
  std::string key = opt.arch + "-" + opt.preset + "-" + std::to_string(seed) + "-" +
                    std::to_string(opt.layers.value_or(0)) + "-" + std::to_string(opt.experts.value_or(0)) + "-" +
                    (opt.type ? std::string(type_name(*opt.type)) : "mixed") + "-" +
                    spec_fingerprint(synth::make_spec(opt));
  std::lock_guard<std::mutex> lock(mu);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  // Shared across test processes (ctest runs each test in its own): written under a
  // unique name, then renamed into place, so a concurrent reader never sees half a file.
  std::filesystem::create_directories(ZINC_TEST_CACHE_DIR);
  const std::string path = std::string(ZINC_TEST_CACHE_DIR) + "/" + key + ".gguf";
  if (!std::filesystem::exists(path)) {
    const std::string tmp = temp_dir() + "/" + key + ".gguf";
    synth::write(synth::make_spec(opt), seed, tmp, 2);
    std::filesystem::copy_file(tmp, path + ".part" + std::to_string(::getpid()),
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(path + ".part" + std::to_string(::getpid()), path);
  }
  made[key] = path;
  return path;
}

uint64_t fnv1a64_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  uint64_t h = 0xCBF29CE484222325ull;
  std::vector<char> buf(1 << 16);
  while (f) {
    f.read(buf.data(), buf.size());
    for (std::streamsize i = 0; i < f.gcount(); ++i) h = (h ^ static_cast<uint8_t>(buf[i])) * 0x100000001B3ull;
  }
  return h;
}

LogitStats compare_logits(const std::vector<float>& ref, const std::vector<float>& got, int64_t V) {
  if (ref.size() != got.size() || ref.size() % V != 0) throw std::invalid_argument("compare_logits: sizes");
  const int64_t n = static_cast<int64_t>(ref.size()) / V;
  LogitStats s;
  int64_t agree = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* r = ref.data() + t * V;
    const float* g = got.data() + t * V;
    agree += (std::max_element(r, r + V) - r) == (std::max_element(g, g + V) - g);
    const double rm = *std::max_element(r, r + V), gm = *std::max_element(g, g + V);
    double rz = 0, gz = 0;
    for (int64_t v = 0; v < V; ++v) rz += std::exp(r[v] - rm), gz += std::exp(g[v] - gm);
    double kl = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double lp = r[v] - rm - std::log(rz), lq = g[v] - gm - std::log(gz);
      kl += std::exp(lp) * (lp - lq);
      s.max_abs_diff = std::max(s.max_abs_diff, std::abs(double(r[v]) - g[v]));
    }
    s.mean_kl += kl / n;
  }
  s.top1_agreement = double(agree) / n;
  return s;
}

}  // namespace zinc::test
