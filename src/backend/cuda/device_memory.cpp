#include "backend/cuda/device_memory.h"

#include <algorithm>
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

namespace {
void* scratch_chunk(size_t bytes) {
  return device_malloc(bytes,
                       "this is scratch for a forward pass: fewer tokens a pass need less (run and chat: -u; "
                       "serve: --step-tokens and --prefix-block)");
}
}  // namespace

void* DeviceArena::take(size_t bytes) {
  bytes = (bytes + 255) & ~size_t{255};
  if (chunks_.empty() || used_ + bytes > chunks_.back().size) {
    const size_t size = std::max(bytes, kStep);
    chunks_.push_back({scratch_chunk(size), size});
    used_ = 0;
  }
  void* p = static_cast<char*>(chunks_.back().ptr) + used_;
  used_ += bytes;
  taken_ += bytes;
  return p;
}

bool DeviceArena::reset(cudaStream_t stream) {
  const size_t need = taken_;
  used_ = taken_ = 0;
  if (chunks_.size() <= 1) return false;
  ZINC_CUDA_CHECK(cudaStreamSynchronize(stream));
  release();
  chunks_.push_back({scratch_chunk(need), need});
  return true;
}

void DeviceArena::release() {
  for (auto& c : chunks_) cudaFree(c.ptr);
  chunks_.clear();
}

}  // namespace zinc::cuda
