// The CUDA backend: weights uploaded once in their block formats and dequantized
// inside the kernels, activations in f32, one stream. Forward passes that repeat an
// op sequence exactly (every decode step) are captured into a CUDA graph and
// replayed (see cuda_backend.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace zinc {

struct CudaOptions {
  int device = 0;
  bool graphs = true;  // capture and replay repeated forward passes
  bool profile = false;  // time every op with a cudaEvent pair (no graphs); see cuda_take_profile
};

std::unique_ptr<Backend> make_cuda_backend(int device = 0);
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options);

// GPU time of one op run with CudaOptions::profile; weight: the name of the first
// weight tensor it reads ("" for none).
struct CudaOpTime {
  std::string op, weight;
  double ms = 0;
};
// The ops run since the last call, in order (waits for the GPU). `backend` must be
// a CUDA backend made with profile on.
std::vector<CudaOpTime> cuda_take_profile(Backend& backend);

// GPUs the CUDA runtime sees; 0 without a driver or a GPU (never throws).
int cuda_device_count();

struct CudaDeviceInfo {
  std::string name;
  size_t memory_bytes = 0;
  int multiprocessors = 0;
  double peak_bandwidth_gbs = 0;  // from the memory clock and bus width
};
CudaDeviceInfo cuda_device_info(int device = 0);

}  // namespace zinc
