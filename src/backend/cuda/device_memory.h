// Device memory for CudaBackend: allocations that fail with a message saying what did
// not fit, and the scratch arena of a forward pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace zinc::cuda {

// cudaMalloc, where running out of memory throws a message that says what did not fit
// and what to try (`advice`), and leaves the backend usable.
void* device_malloc(size_t bytes, const char* advice);

// Scratch memory: bump allocation from chunks; on reset several chunks fold into
// one of exactly the last pass's size, so the steady state is one chunk and identical
// op sequences get identical addresses (graph_replay.h relies on it). Chunks grow by a
// fixed step rather than by doubling: the first pass of a larger shape then holds its
// need plus at most one step, not up to twice its need (a 2048-token prefill of the
// flagship takes ~30 GB).
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }
  void* take(size_t bytes);
  // True when the memory moved (the caller must have synchronized).
  bool reset(cudaStream_t stream);

 private:
  void release();
  static constexpr size_t kStep = size_t{256} << 20;
  struct Chunk {
    void* ptr;
    size_t size;
  };
  std::vector<Chunk> chunks_;
  size_t used_ = 0;   // in the last chunk
  size_t taken_ = 0;  // by this pass, over all chunks
};

}  // namespace zinc::cuda
