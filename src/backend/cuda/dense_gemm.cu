#include "backend/cuda/dense_gemm.h"

#include <cublas_v2.h>

#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequant.cuh"

namespace zinc::cuda {
namespace {

// cuBLAS asks for 32 MiB of workspace on Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cublas: ") + what + ": " + cublasGetStatusString(st));
}

// One thread per 8 consecutive elements of a row.
template <DType T>
__global__ void dequant_f16_kernel(const uint8_t* w, size_t row_bytes, int groups_per_row, int64_t groups,
                                   __half* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= groups) return;
  const int64_t r = i / groups_per_row;
  float v[8];
  Dequant<T>::load8(w + r * row_bytes, 8 * static_cast<int>(i - r * groups_per_row), v);
  reinterpret_cast<uint4*>(out)[i] = make_uint4(pack_f16_clamped(v[0], v[1]), pack_f16_clamped(v[2], v[3]),
                                                pack_f16_clamped(v[4], v[5]), pack_f16_clamped(v[6], v[7]));
}

}  // namespace

DenseGemm::DenseGemm() {
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "cublasCreate");
  handle_ = h;
  ZINC_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
}

DenseGemm::~DenseGemm() {
  cublasDestroy(handle_);
  cudaFree(workspace_);
}

bool DenseGemm::takes(const Tensor& w, int64_t n) {
  return n >= kDenseGemmMinTokens && w.type != DType::F32 && w.type != DType::BF16 && w.ne[0] % 8 == 0;
}

void DenseGemm::run(const Tensor& w, const __half* x16, float* y, __half* w16, int64_t n, cudaStream_t s) const {
  const int in = static_cast<int>(w.ne[0]), out = static_cast<int>(w.rows());
  const int64_t groups = static_cast<int64_t>(out) * (in / 8);
  dispatch_weight_type(w.type, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    dequant_f16_kernel<T><<<ceil_div(groups, 256), 256, 0, s>>>(static_cast<const uint8_t*>(w.data), w.row_bytes(),
                                                                 in / 8, groups, w16);
  });
  ZINC_CUDA_LAUNCHED("dequant_f16");
  // Column-major view: y (out x n) = w16ᵀ (out x in, stored in x out) · x16 (in x n).
  // cublasSetStream resets the workspace to cuBLAS's own pool, so it is set after.
  check_cublas(cublasSetStream(handle_, s), "cublasSetStream");
  check_cublas(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(n), in, &one, w16, CUDA_R_16F,
                            in, x16, CUDA_R_16F, in, &zero, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

}  // namespace zinc::cuda
