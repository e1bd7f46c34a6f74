// Long batches through cuBLAS: a weight is dequantized to f16 in scratch (one read
// of its blocks, one write of 2 bytes per element), then multiplied by the f16 token
// rows with cuBLAS's tensor-core GEMM (f32 accumulate and output). From a few dozen
// tokens on this beats the fused-dequantization tiles of mma_pipe.cuh, which are
// bound by issue and shared-memory bandwidth well below the tensor cores' rate; the
// grouped expert GEMMs keep those tiles (their weights are too many to expand).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/tensor.h"

struct cublasContext;

namespace zinc::cuda {

// Batches from this many tokens take DenseGemm (weights of the types below).
inline constexpr int64_t kDenseGemmMinTokens = 64;

class DenseGemm {
 public:
  DenseGemm();
  ~DenseGemm();
  DenseGemm(const DenseGemm&) = delete;
  DenseGemm& operator=(const DenseGemm&) = delete;

  // Whether w {in, out} multiplies n tokens here: quantized and F16 weights (an
  // exact or nearly exact f16 expansion); F32 and BF16 keep their own paths.
  static bool takes(const Tensor& w, int64_t n);
  // y {out, n} = x16 {in, n} · wᵀ, with w16 (w.n_elements() halves) as scratch.
  void run(const Tensor& w, const __half* x16, float* y, __half* w16, int64_t n, cudaStream_t s) const;

 private:
  cublasContext* handle_ = nullptr;
  void* workspace_ = nullptr;  // fixed, so that graph capture never allocates
};

}  // namespace zinc::cuda
