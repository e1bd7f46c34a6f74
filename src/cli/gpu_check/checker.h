// The checker behind `zinc gpu-check` (gpu_check_command.cpp): the same data on the
// CPU backend (the executable specification) and the CUDA backend, GPU outputs
// poisoned (NaN) before the kernels run, and one report line per comparison; the
// weight types, token counts and tolerances the op checks use.
#pragma once
#ifdef ZINC_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "gguf/gguf.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace zinc::cli::gpu_check {

class Checker {
 public:
  Checker() : cpu_(make_cpu_backend(0)), gpu_(make_cuda_backend(0)) {}

  int failures() const { return failures_; }
  void report(const std::string& what, double err, double tol) {
    const bool ok = std::isfinite(err) && err <= tol;
    if (!ok) ++failures_;
    ++checks_;
    if (!ok || verbose_) std::printf("%s %-48s err %.3g (tol %.0e)\n", ok ? "ok  " : "FAIL", what.c_str(), err, tol);
  }
  void set_verbose(bool v) { verbose_ = v; }
  int checks() const { return checks_; }

  // ---- data on both backends ----------------------------------------------------
  struct Both {
    Tensor cpu, gpu;
  };
  std::vector<float> randn(int64_t n, float scale = 1.0f, float mean = 0.0f) {
    std::normal_distribution<float> d(mean, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }
  Both f32(std::initializer_list<int64_t> dims, const std::vector<float>& host) {
    return raw(DType::F32, dims, host.data());
  }
  Both f16(std::initializer_list<int64_t> dims, const std::vector<float>& host) {
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i) bits[i] = float_to_half_bits(host[i]);
    return raw(DType::F16, dims, bits.data());
  }
  Both i32(std::initializer_list<int64_t> dims, const std::vector<int32_t>& host) {
    return raw(DType::I32, dims, host.data());
  }
  Both raw(DType t, std::initializer_list<int64_t> dims, const void* host) {
    Both b{cpu_->alloc_persistent(t, dims), gpu_->alloc_persistent(t, dims)};
    cpu_->write(b.cpu, host, b.cpu.nbytes());
    gpu_->write(b.gpu, host, b.gpu.nbytes());
    return b;
  }
  // An output: zero on the CPU, NaN on the GPU so unwritten elements show.
  Both out(std::initializer_list<int64_t> dims, DType t = DType::F32) {
    Both b{cpu_->alloc_persistent(t, dims), gpu_->alloc_persistent(t, dims)};
    std::vector<uint8_t> nan(b.gpu.nbytes(), 0xff);
    gpu_->write(b.gpu, nan.data(), nan.size());
    return b;
  }
  // A weight of type t with random blocks, uploaded through upload_weight.
  Both weight(DType t, std::vector<int64_t> dims, float scale) {
    gguf::TensorInfo info;
    info.type = t;
    info.dims = dims;
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    info.nbytes = row_bytes(t, dims[0]) * static_cast<size_t>(n / dims[0]);
    weights_.emplace_back(info.nbytes);
    fill_random_blocks(t, rng_(), 0, weights_.back().data(), n, scale);
    info.data = weights_.back().data();
    return {cpu_->upload_weight(info), gpu_->upload_weight(info)};
  }
  // matmul of w {in, out} with fresh random activations {in, n} on both backends; the output.
  Both matmul_fresh(const Both& w, int64_t n) {
    const int64_t in = w.cpu.ne[0];
    const Both x = f32({in, n}, randn(in * n));
    Both y = out({w.cpu.rows(), n});
    cpu_->matmul(w.cpu, x.cpu, y.cpu);
    gpu_->matmul(w.gpu, x.gpu, y.gpu);
    return y;
  }
  // matmul_many of x {in, n} with the weights ws on both backends; the outputs.
  std::vector<Both> matmul_many(const std::vector<Both>& ws, const Both& x) {
    const int64_t n = x.cpu.rows();
    std::vector<Both> ys;
    std::vector<Tensor> wc, wg, yc, yg;
    for (const Both& w : ws) {
      ys.push_back(out({w.cpu.rows(), n}));
      wc.push_back(w.cpu), wg.push_back(w.gpu), yc.push_back(ys.back().cpu), yg.push_back(ys.back().gpu);
    }
    cpu_->matmul_many(wc, x.cpu, yc);
    gpu_->matmul_many(wg, x.gpu, yg);
    return ys;
  }
  template <class T>
  std::vector<T> fetch(Backend& be, const Tensor& t) {
    std::vector<T> v(t.nbytes() / sizeof(T));
    be.read(t, v.data(), t.nbytes());
    return v;
  }
  // F32 values, or F16 ones widened.
  std::vector<float> fetch_float(Backend& be, const Tensor& t) {
    if (t.type != DType::F16) return fetch<float>(be, t);
    const auto bits = fetch<uint16_t>(be, t);
    std::vector<float> v(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) v[i] = half_bits_to_float(bits[i]);
    return v;
  }
  // How many of t's values on `be` are finite; finite_on_gpu: of b's GPU copy.
  double finite_on(Backend& be, const Tensor& t) {
    const auto got = fetch_float(be, t);
    return static_cast<double>(std::count_if(got.begin(), got.end(), [](float v) { return std::isfinite(v); }));
  }
  double finite_on_gpu(const Both& b) { return finite_on(*gpu_, b.gpu); }
  // max |gpu - cpu| / max |cpu|, NaN if any GPU value is not finite.
  double rel_err(const Both& b) {
    const auto ref = fetch_float(*cpu_, b.cpu), got = fetch_float(*gpu_, b.gpu);
    double max_ref = 1e-30, max_diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (!std::isfinite(got[i])) return NAN;
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
    }
    return max_diff / max_ref;
  }
  double mismatches_bytes(const Both& b) {
    const auto ref = fetch<uint8_t>(*cpu_, b.cpu), got = fetch<uint8_t>(*gpu_, b.gpu);
    double bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) bad += ref[i] != got[i];
    return bad;
  }
  double mismatches_i32(const Both& b) {
    const auto ref = fetch<int32_t>(*cpu_, b.cpu), got = fetch<int32_t>(*gpu_, b.gpu);
    double bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) bad += ref[i] != got[i];
    return bad;
  }

  Backend& cpu() { return *cpu_; }
  Backend& gpu() { return *gpu_; }

 private:
  std::unique_ptr<Backend> cpu_, gpu_;
  std::mt19937 rng_{20261122};
  std::vector<std::vector<uint8_t>> weights_;
  int failures_ = 0, checks_ = 0;
  bool verbose_ = true;
};

inline constexpr DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,   DType::Q4_0,
                                         DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::MXFP4,
                                         DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,   DType::Q6_K,
                                         DType::IQ4_XS};
// 1, 2 and 5: the matvec's kernels (matmul_few's for Q8_0 rows, at one token in groups
// of cuda::kFewOneTokenMinRows rows); 8: the experts' decode.
inline constexpr int64_t kTokenCounts[] = {1, 2, 3, 5, 8, 33, 70};
// The prefill attention kernel rounds the probabilities to f16 (Q keeps 22 bits as
// two f16 parts; the caches are f16 already).
constexpr double kAttentionF16Tol = 1e-3;

// Batches of more than cuda::kMatvecMaxTokens tokens (kExpertDecodeMaxTokens for the
// experts), and the weights matmul_few takes (from one token: Q8_0, Q4_K, Q5_K, Q6_K), multiply
// non-F32 weights on the tensor cores in f16 or bf16 (about 1e-3 relative error);
// F32 weights keep f32 accuracy there.
constexpr double kTensorCoreTol = 1e-2;
// The tensor cores' bar where they take weight i of those multiplied in one call
// (the GPU's copies): at one token matmul_few takes a weight only in a large enough
// group.
inline double matmul_tol(std::span<const Tensor> launch, size_t i, int64_t n) {
  const Tensor& w = launch[i];
  const bool few = cuda::matmul_few_takes(w, n) && cuda::matmul_batched_takes(launch, n);
  const bool tensor_cores = w.type != DType::F32 && (n > cuda::kMatvecMaxTokens || few);
  return tensor_cores ? kTensorCoreTol : 1e-4;
}
inline double matmul_tol(const Tensor& w, int64_t n) { return matmul_tol({&w, 1}, 0, n); }
inline std::vector<Tensor> gpu_copies(const std::vector<Checker::Both>& ws) {
  std::vector<Tensor> out;
  for (const Checker::Both& w : ws) out.push_back(w.gpu);
  return out;
}
inline double expert_tol(DType t, int64_t n) {
  return n > cuda::kExpertDecodeMaxTokens && t != DType::F32 ? kTensorCoreTol : 1e-4;
}
// The chunked delta rule (from kDeltaRuleChunkedMinTokens tokens) multiplies on the
// tensor cores in tf32 (unit roundoff 2^-11 = 4.9e-4). Its largest element error over
// 0.5M state or output values measures 6.5e-4..1.0e-3 of the largest reference value,
// so the bar is 4 units; shorter calls (f32 throughout) are held to 1e-3 as before.
constexpr double kTf32Tol = 2e-3;
inline double delta_rule_tol(int64_t n) { return n >= cuda::kDeltaRuleChunkedMinTokens ? kTf32Tol : 1e-3; }

inline std::string tname(DType t) { return std::string(type_name(t)); }

// Every op on fresh random data for every weight type and token count (op_checks.cpp).
void check_ops(Checker& c);
// A whole tiny model of `arch` (synth preset) on both backends: prefill, decode, long
// decodes, graph replay against eager, repeat runs (model_checks.cpp).
void check_model(Checker& c, const std::string& arch, const std::string& model_preset, const std::string& dir);

}  // namespace zinc::cli::gpu_check

#endif  // ZINC_WITH_CUDA
