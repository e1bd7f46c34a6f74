// Per-op GPU times for `zinc bench --profile`: with CudaOptions::profile the backend
// runs every op eagerly between two cudaEvents and remembers the op's name and the
// name of the first weight it reads (weights are named at upload), so a caller can
// sum exact GPU time per phase of a forward pass.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace zinc::cuda {

class OpProfiler {
 public:
  ~OpProfiler();
  void name_weight(const void* data, const std::string& name) { weights_[reinterpret_cast<uintptr_t>(data)] = name; }
  // Enqueues `launch` on s between two events. key: the op's key words (addresses in it name the weight).
  void run(const char* op, std::span<const uint64_t> key, const std::function<void(cudaStream_t)>& launch,
           cudaStream_t s);
  // Waits for s and returns the times of the ops run since the last take.
  std::vector<CudaOpTime> take(cudaStream_t s);

 private:
  struct Pending {
    const char* op;
    const std::string* weight;
    size_t events;  // index of the first of its two events
  };
  std::unordered_map<uintptr_t, std::string> weights_;
  std::vector<cudaEvent_t> events_;  // a pool, reused after each take
  std::vector<Pending> pending_;
  size_t used_ = 0;
};

}  // namespace zinc::cuda
