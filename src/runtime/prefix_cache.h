// Prefix reuse: a tree over token ids, one node per block of `block` tokens, so a
// path from the root spells a prompt prefix that is a whole number of blocks. Each
// node keeps what a sequence needs to resume right after its block: the KV rows of
// the block's positions for every attention layer, and a checkpoint of every
// recurrent (GDN) layer's conv and delta-rule state at the block's end. A recurrent
// state cannot be cut at an arbitrary token, which is why reuse works in blocks.
//
// Snapshots live in host memory from the backend's host_alloc (page-locked for a
// GPU), in slots of one node's bytes that are kept and reused, at most the byte
// budget's worth. With every slot taken, the least recently used leaf gives up its
// slot (a node's KV rows are only usable with its ancestors', so inner nodes outlive
// their children). Not thread-safe: the engine's thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "runtime/sequence.h"

namespace zinc {

class PrefixCache {
 public:
  PrefixCache(int64_t block, size_t budget_bytes);
  ~PrefixCache();

  // Restores into `seq` the longest cached prefix of `tokens` that is at most
  // `max_tokens` long, sets seq.n_past to its length (a multiple of block) and
  // returns it. With nothing cached, zeroes seq and returns 0.
  int64_t restore(Backend& backend, std::span<const int32_t> tokens, int64_t max_tokens, SequenceState& seq);
  // Called when seq has absorbed exactly tokens[0, n) with n a positive multiple of
  // block: stores the last block unless cached already or its parent is not. One
  // backend serves every call, and outlives the cache.
  void store(Backend& backend, std::span<const int32_t> tokens, const SequenceState& seq);

  int64_t block() const { return block_; }
  size_t bytes() const { return static_cast<size_t>(entries_) * layout_.bytes; }  // in nodes
  int64_t entries() const { return entries_; }

 private:
  struct Node;
  // Where a node's slot keeps each layer's parts: K and V rows of the block
  // (attention layers), conv and delta states (recurrent layers); kNone where a
  // layer has no such part.
  struct Layout {
    static constexpr size_t kNone = ~size_t{0};
    std::vector<size_t> k, v, conv, delta;
    size_t bytes = 0;
    bool operator==(const Layout&) const = default;
  };
  Layout layout_of(const SequenceState& seq) const;
  Node* find_child(Node* parent, std::span<const int32_t> block_tokens) const;
  char* take_slot(Backend& backend, const Node* parent);
  char* remove_leaf(Node* leaf);  // its slot, which no node holds now

  int64_t block_;
  size_t budget_;
  int64_t entries_ = 0;
  uint64_t tick_ = 0;
  std::unique_ptr<Node> root_;
  Backend* backend_ = nullptr;  // whose host memory the slots are
  Layout layout_;               // of the first sequence stored; the slots' size
  std::vector<char*> slots_;    // every slot allocated
  bool host_full_ = false;      // host_alloc failed: no more slots
};

}  // namespace zinc
