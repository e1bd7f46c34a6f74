// Graph replay of repeated forward passes, for CudaBackend.
//
// A forward pass is plain host code calling ops, so the backend sees it as a
// "segment": the ops between scratch_reset() and the next read(), sync() or
// scratch_reset(). Each op appends a key (its op id, every tensor's type, shape and
// address, every scalar) and a closure that enqueues its kernels. Scratch addresses
// are deterministic (bump allocation from one arena) and positions live on the
// device, so consecutive decode steps produce identical keys. A segment that starts
// at scratch_reset() runs eagerly the first time and its key is remembered; the next
// segment defers its closures while its keys match the remembered ones, and at its
// end (read/sync/reset) captures them into a graph once and launches it, then
// replays the graph on every later match. write() still copies host data
// immediately (before the graph launch, in stream order). On any mismatch the
// deferred closures run eagerly and the new key is remembered instead.
#pragma once

#include <cuda_runtime.h>

#include <bit>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"

namespace zinc::cuda {

// The words that identify one op call: everything its launch depends on.
class Key {
 public:
  template <class OpId>
  explicit Key(OpId op) {
    words_.push_back(static_cast<uint64_t>(op));
  }
  Key& operator<<(const Tensor& t) {
    words_.push_back(static_cast<uint64_t>(t.type));
    for (int64_t d : t.ne) words_.push_back(static_cast<uint64_t>(d));
    words_.push_back(reinterpret_cast<uintptr_t>(t.data));
    return *this;
  }
  Key& operator<<(const Tensor* t) {
    if (t) return *this << *t;
    words_.push_back(0);
    return *this;
  }
  Key& operator<<(int64_t v) {
    words_.push_back(static_cast<uint64_t>(v));
    return *this;
  }
  Key& operator<<(float v) {
    words_.push_back(std::bit_cast<uint32_t>(v));
    return *this;
  }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  std::vector<uint64_t> words_;
};

// A closure that enqueues one op's kernels on a stream.
using Launch = std::function<void(cudaStream_t)>;

class GraphReplay {
 public:
  // enabled false: every segment runs eagerly (keys are still kept, nothing deferred).
  GraphReplay(bool enabled, cudaStream_t stream) : enabled_(enabled), stream_(stream) {}
  ~GraphReplay() { drop_graph(); }
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  // At scratch_reset(), after finish_segment(): a new segment begins. addresses_moved:
  // the scratch memory was reallocated, so the remembered graph's addresses are gone.
  void begin_segment(bool addresses_moved);
  // Appends the op's key; true when the launch was deferred (kept for the graph),
  // false when the caller must enqueue it now.
  bool defer(const Key& key, Launch& launch);
  // Runs the deferred launches now, if any (before a host copy that must follow
  // them); the rest of the segment then runs eagerly.
  void flush();
  // At read / sync / reset: launches the segment's graph if its keys matched the
  // remembered ones throughout, otherwise remembers this segment's keys.
  void finish_segment();

 private:
  void abandon();  // the deferred launches run now and deferring stops
  void launch_graph();
  void drop_graph();

  const bool enabled_;
  const cudaStream_t stream_;
  std::vector<uint64_t> key_;       // the current segment's op keys
  std::vector<uint64_t> prev_key_;  // the last eager segment that began at begin_segment()
  std::vector<Launch> pending_;     // deferred launches while key_ matches prev_key_
  bool deferring_ = false, segment_from_reset_ = false;
  cudaGraphExec_t graph_ = nullptr;  // captured from prev_key_'s launches
};

}  // namespace zinc::cuda
