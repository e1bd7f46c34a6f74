#include "backend/cuda/op_profile.h"

#include "backend/cuda/cuda_check.h"

namespace zinc::cuda {

OpProfiler::~OpProfiler() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void OpProfiler::run(const char* op, std::span<const uint64_t> key, const std::function<void(cudaStream_t)>& launch,
                     cudaStream_t s) {
  while (events_.size() < used_ + 2) {
    cudaEvent_t e = nullptr;
    ZINC_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  const std::string* weight = nullptr;
  for (uint64_t w : key) {
    auto it = weights_.find(static_cast<uintptr_t>(w));
    if (it != weights_.end()) {
      weight = &it->second;
      break;
    }
  }
  pending_.push_back({op, weight, used_});
  ZINC_CUDA_CHECK(cudaEventRecord(events_[used_], s));
  launch(s);
  ZINC_CUDA_CHECK(cudaEventRecord(events_[used_ + 1], s));
  used_ += 2;
}

std::vector<CudaOpTime> OpProfiler::take(cudaStream_t s) {
  ZINC_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<CudaOpTime> out;
  out.reserve(pending_.size());
  for (const Pending& p : pending_) {
    float ms = 0;
    ZINC_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[p.events], events_[p.events + 1]));
    out.push_back({p.op, p.weight ? *p.weight : std::string(), ms});
  }
  pending_.clear();
  used_ = 0;
  return out;
}

}  // namespace zinc::cuda
