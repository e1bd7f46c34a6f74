#include "backend/cuda/device_memory.h"

#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_check.h"

namespace zinc::cuda {

void* device_malloc(size_t bytes, const char* advice) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw std::runtime_error("GPU out of memory: " + std::to_string(bytes >> 20) + " MiB more needed, " +
                             std::to_string(free_b >> 20) + " of " + std::to_string(total_b >> 20) +
                             " MiB free; " + advice);
  }
  ZINC_CUDA_CHECK(err);
  return p;
}

void* DeviceChunks::allocate(size_t bytes) {
  return device_malloc(bytes,
                       "this is scratch for a forward pass: fewer tokens a pass need less (run and chat: -u; "
                       "serve: --step-tokens and --prefix-block)");
}

void DeviceChunks::release(void* p) { cudaFree(p); }

void DeviceChunks::before_fold() { ZINC_CUDA_CHECK(cudaStreamSynchronize(*stream)); }

}  // namespace zinc::cuda
