#include "backend/cuda/graph_replay.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace zinc::cuda {

void GraphReplay::begin_segment(bool addresses_moved) {
  if (addresses_moved) {
    drop_graph();
    prev_key_.clear();
  }
  segment_from_reset_ = true;
  deferring_ = enabled_ && !prev_key_.empty();
}

bool GraphReplay::defer(const Key& key, Launch& launch) {
  const size_t start = key_.size();
  key_.insert(key_.end(), key.words().begin(), key.words().end());
  if (!deferring_) return false;
  if (key_.size() <= prev_key_.size() && std::equal(key_.begin() + start, key_.end(), prev_key_.begin() + start)) {
    pending_.push_back(std::move(launch));
    return true;
  }
  abandon();
  return false;
}

void GraphReplay::flush() {
  if (!pending_.empty()) abandon();
}

void GraphReplay::abandon() {
  for (auto& f : pending_) f(stream_);
  pending_.clear();
  deferring_ = false;
}

void GraphReplay::finish_segment() {
  if (deferring_ && key_.size() == prev_key_.size()) {
    launch_graph();
  } else {
    abandon();
    if (segment_from_reset_ && !key_.empty() && key_ != prev_key_) {
      drop_graph();
      prev_key_ = key_;
    }
  }
  pending_.clear();
  key_.clear();
  deferring_ = false;
  segment_from_reset_ = false;
}

void GraphReplay::launch_graph() {
  if (!graph_) {
    cudaGraph_t g = nullptr;
    ZINC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      for (auto& f : pending_) f(stream_);
    } catch (...) {
      cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    ZINC_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
    const cudaError_t e = cudaGraphInstantiate(&graph_, g, 0);
    cudaGraphDestroy(g);
    check_cuda(e, "cudaGraphInstantiate");
  }
  ZINC_CUDA_CHECK(cudaGraphLaunch(graph_, stream_));
}

void GraphReplay::drop_graph() {
  if (graph_) cudaGraphExecDestroy(graph_);
  graph_ = nullptr;
}

}  // namespace zinc::cuda
