// Device memory for CudaBackend: allocations that fail with a message saying what did
// not fit, and the chunks of a forward pass's scratch arena.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace zinc::cuda {

// cudaMalloc, where running out of memory throws a message that says what did not fit
// and what to try (`advice`), and leaves the backend usable.
void* device_malloc(size_t bytes, const char* advice);

// Device chunks for the scratch arena (scratch_arena.h). Chunks grow by a fixed step
// rather than by doubling: the first pass of a larger shape then holds its need plus at
// most one step, not up to twice its need.
struct DeviceChunks {
  static constexpr size_t kAlign = 256;
  static constexpr size_t kStep = size_t{256} << 20;
  const cudaStream_t* stream = nullptr;  // synchronized before the chunks are folded
  void* allocate(size_t bytes);
  void release(void* p);
  size_t chunk_size(size_t need, size_t /*last*/) const { return need > kStep ? need : kStep; }
  void before_fold();
};

}  // namespace zinc::cuda
