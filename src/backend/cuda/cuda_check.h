// Host-side CUDA error checks, shared by the backend (C++) and the kernel
// launchers (.cu): every runtime call and every launch is checked.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace zinc::cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
#define ZINC_CUDA_CHECK(call) ::zinc::cuda::check_cuda((call), #call)
// After a kernel launch: a bad configuration shows up here, not at the next sync.
#define ZINC_CUDA_LAUNCHED(name) ::zinc::cuda::check_cuda(cudaGetLastError(), name)

inline int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace zinc::cuda
