// Prefix reuse: a tree over token ids, one node per block of `block` tokens, so a
// path from the root spells a prompt prefix that is a whole number of blocks. Each
// node keeps the KV rows of its block's positions for every attention layer, and may
// keep a checkpoint of every recurrent (GDN) layer's conv and delta-rule state at the
// block's end. A sequence resumes right after the deepest node of its prompt's path
// that has a checkpoint (for a model without recurrent layers: the deepest node), with
// the KV rows of that node and its ancestors. A recurrent state cannot be cut at an
// arbitrary token, which is why reuse works in blocks. On the flagship a checkpoint is
// 66 MB whatever the block, against 21 MB of KV rows for a block of 1024 tokens, which
// is why the caller may ask for one only at some blocks, and why checkpoints are given
// up before KV rows when memory runs short.
//
// Memory is equal units of host memory from the backend's host_alloc (page-locked for
// a GPU), taken in chunks up to the budget (all at once by reserve(), else as stores
// need them) and then reused. A node's KV rows take a fixed number of units, a
// checkpoint another (parts may straddle units). When more units are needed than are
// free, the cache gives up, in this order: the least recently used leaf without a
// checkpoint (no restore can use it), the least recently used checkpoint, the least
// recently used leaf. Not thread-safe: the engine's thread owns it.
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
  // `max_tokens` long and ends at a checkpoint, sets seq.n_past to its length (a
  // multiple of block) and returns it. With nothing cached, zeroes seq and returns 0.
  int64_t restore(Backend& backend, std::span<const int32_t> tokens, int64_t max_tokens, SequenceState& seq);
  // Called when seq has absorbed exactly tokens[0, n) with n a positive multiple of
  // block: stores the last block's KV rows unless cached already or its parent is not,
  // and with `checkpoint` its recurrent state too. One backend serves every call, and
  // outlives the cache.
  void store(Backend& backend, std::span<const int32_t> tokens, const SequenceState& seq, bool checkpoint);
  // Takes the whole budget's host memory now for sequences shaped as `shape`, so
  // that no store pays for it later (page-locking 1 GiB takes about half a second on
  // an H200 host). Without it, stores take memory as they need it.
  void reserve(Backend& backend, const SequenceState& shape);

  int64_t block() const { return block_; }
  size_t bytes() const;           // held by nodes
  int64_t entries() const;        // nodes (blocks)
  int64_t checkpoints() const;    // nodes with a recurrent checkpoint (none for a model without recurrent layers)

 private:
  struct Node;
  // Where each layer's parts lie: K and V rows of the block (attention layers) in the
  // node's KV units, conv and delta states (recurrent layers) in its checkpoint's, each
  // set of units taken as one range. kNone where a layer has no such part.
  struct Layout {
    static constexpr size_t kNone = ~size_t{0};
    std::vector<size_t> k, v, conv, delta;
    size_t kv_bytes = 0, state_bytes = 0;
    bool operator==(const Layout&) const = default;
  };
  Layout layout_of(const SequenceState& seq) const;
  void set_layout(const SequenceState& seq);  // and the unit size
  Node* find_child(Node* parent, std::span<const int32_t> block_tokens) const;
  bool has_checkpoint(const Node* n) const;
  // f(host, n, done) for each piece of the range [at, at + bytes) of `units`: n bytes
  // at host, `done` bytes into the range.
  template <class F>
  void pieces(const std::vector<char*>& units, size_t at, size_t bytes, F&& f) const;
  // f(tensor, host, n, offset) for each piece of seq's recurrent states (every conv and
  // delta part) in a checkpoint's units: n bytes at host, offset bytes into the tensor.
  template <class F>
  void checkpoint_pieces(const SequenceState& seq, const std::vector<char*>& units, F&& f) const;
  // f(tensor, host, n, offset) for each piece of the K and V rows of a node's block
  // [first, first + block) (its `units`) that seq's caches hold once `end` positions are
  // in them (a ring only the last of those): n bytes at host, offset bytes into the
  // tensor.
  template <class F>
  void kv_pieces(const SequenceState& seq, const std::vector<char*>& units, int64_t first, int64_t end, F&& f) const;
  bool holds_a_node() const;
  // `count` free units, giving up nodes or checkpoints as needed but never `keep`'s
  // node or `keep_checkpoint`'s checkpoint; false when they cannot be had.
  bool take_units(Backend& backend, size_t count, const Node* keep, const Node* keep_checkpoint,
                  std::vector<char*>& out);
  bool grow(Backend& backend);
  bool give_up_one(const Node* keep, const Node* keep_checkpoint);
  void drop_checkpoint(Node* n);
  void remove_leaf(Node* leaf);

  int64_t block_;
  size_t budget_;
  int64_t entries_ = 0, checkpoints_ = 0;
  uint64_t tick_ = 0;
  std::unique_ptr<Node> root_;
  Backend* backend_ = nullptr;  // whose host memory the units are
  Layout layout_;               // of the first sequence stored
  size_t unit_bytes_ = 0;
  size_t kv_units_ = 0;         // units of a node's KV rows
  size_t state_units_ = 0;      // units of a checkpoint
  std::vector<char*> chunks_;   // every host_alloc, each whole units
  size_t units_ = 0;            // allocated
  std::vector<char*> free_;     // units no node holds
  bool host_full_ = false;      // host_alloc failed: no more units
};

}  // namespace zinc
