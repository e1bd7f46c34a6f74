// Bump allocation for a forward pass's scratch, shared by the backends; Memory gives
// and takes back the chunks (host or device). A pass takes, marks and rewinds (a model
// gives each layer's intermediates back when the layer ends); reset() ends the pass
// and folds several chunks into one holding the pass's peak. So the steady state is
// one chunk, and the same sequence of take / mark / rewind gives the same addresses,
// which the CUDA backend's graph replay relies on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace zinc {

// Memory: static constexpr size_t kAlign; void* allocate(size_t); void release(void*);
// size_t chunk_size(size_t need, size_t last_chunk) (last_chunk 0 for the first);
// void before_fold() (the memory is about to be released and reallocated).
template <class Memory>
class ScratchArena {
 public:
  explicit ScratchArena(Memory memory = {}) : memory_(memory) {}
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;
  ~ScratchArena() { release(); }

  void* take(size_t bytes) {
    bytes = (bytes + Memory::kAlign - 1) & ~(Memory::kAlign - 1);
    // After a rewind, the chunks ahead are used again before a new one is added.
    while (chunk_ < chunks_.size() && used_ + bytes > chunks_[chunk_].size) ++chunk_, used_ = 0;
    if (chunk_ == chunks_.size()) {
      const size_t size = memory_.chunk_size(bytes, chunks_.empty() ? 0 : chunks_.back().size);
      chunks_.push_back({memory_.allocate(size), size});
    }
    void* p = static_cast<char*>(chunks_[chunk_].ptr) + used_;
    used_ += bytes;
    taken_ += bytes;
    peak_ = std::max(peak_, taken_);
    return p;
  }
  ScratchMark mark() const { return {chunk_, used_, taken_}; }
  void rewind(const ScratchMark& m) { chunk_ = m.chunk, used_ = m.used, taken_ = m.taken; }
  // Ends a pass; true when the memory moved.
  bool reset() {
    const size_t need = peak_;
    chunk_ = used_ = taken_ = peak_ = 0;
    if (chunks_.size() <= 1) return false;
    memory_.before_fold();
    release();
    chunks_.push_back({memory_.allocate(need), need});
    return true;
  }
  size_t held_bytes() const {
    size_t n = 0;
    for (const Chunk& c : chunks_) n += c.size;
    return n;
  }

 private:
  void release() {
    for (const Chunk& c : chunks_) memory_.release(c.ptr);
    chunks_.clear();
  }
  struct Chunk {
    void* ptr;
    size_t size;
  };
  Memory memory_;
  std::vector<Chunk> chunks_;
  size_t chunk_ = 0, used_ = 0;  // where the next take starts
  size_t taken_ = 0, peak_ = 0;  // bytes held by this pass now, and at most
};

}  // namespace zinc
