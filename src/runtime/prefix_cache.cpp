#include "runtime/prefix_cache.h"

#include <algorithm>
#include <stdexcept>

namespace zinc {

namespace {

// Bytes of one position in a KV cache {head_dim, heads, rows}.
size_t position_bytes(const Tensor& cache) { return cache.nbytes() / static_cast<size_t>(cache.ne[2]); }

// f(row, i, n) for each run of cache rows that holds positions [first, first + count):
// position first + i at row `row`, and the n after it in the rows after. A cache of
// fewer rows than the context is a sliding window's ring (backend.h's kv_store): it
// wraps, and holds only the last `rows` positions, so earlier ones are skipped.
template <class F>
void position_runs(const Tensor& cache, int64_t first, int64_t count, F&& f) {
  const int64_t rows = cache.ne[2];
  for (int64_t i = std::max<int64_t>(0, count - rows); i < count;) {
    const int64_t row = (first + i) % rows, n = std::min(count - i, rows - row);
    f(static_cast<size_t>(row), static_cast<size_t>(i), static_cast<size_t>(n));
    i += n;
  }
}

}  // namespace

struct PrefixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> tokens;  // this block's ids (empty at the root)
  std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
  char* slot = nullptr;  // the snapshot, laid out as layout_
  uint64_t last_used = 0;
  int64_t depth = 0;  // blocks from the root
};

PrefixCache::PrefixCache(int64_t block, size_t budget_bytes)
    : block_(block), budget_(budget_bytes), root_(std::make_unique<Node>()) {
  if (block < 1) throw std::invalid_argument("prefix cache: block must be >= 1");
}

PrefixCache::~PrefixCache() {
  if (!backend_) return;
  try {
    backend_->sync();  // a restore's copies from a slot may still be queued
  } catch (const std::exception&) {
    return;  // the device failed: freeing could fail as well, so the slots are left to the process
  }
  for (char* slot : slots_) backend_->host_free(slot);
}

PrefixCache::Layout PrefixCache::layout_of(const SequenceState& seq) const {
  Layout l;
  const auto put = [&](std::vector<size_t>& at, size_t bytes) {
    at.push_back(l.bytes);
    l.bytes += (bytes + 255) / 256 * 256;  // each part on its own 256-byte boundary
  };
  for (const LayerState& ls : seq.layers) {
    if (ls.k_cache.empty()) {
      l.k.push_back(Layout::kNone), l.v.push_back(Layout::kNone);
    } else {
      put(l.k, static_cast<size_t>(block_) * position_bytes(ls.k_cache));
      put(l.v, static_cast<size_t>(block_) * position_bytes(ls.v_cache));
    }
    if (ls.conv.empty()) l.conv.push_back(Layout::kNone);
    else put(l.conv, ls.conv.nbytes());
    if (ls.delta.empty()) l.delta.push_back(Layout::kNone);
    else put(l.delta, ls.delta.nbytes());
  }
  return l;
}

PrefixCache::Node* PrefixCache::find_child(Node* parent, std::span<const int32_t> block_tokens) const {
  auto it = parent->children.find(std::vector<int32_t>(block_tokens.begin(), block_tokens.end()));
  return it == parent->children.end() ? nullptr : it->second.get();
}

int64_t PrefixCache::restore(Backend& backend, std::span<const int32_t> tokens, int64_t max_tokens,
                             SequenceState& seq) {
  seq.reset(backend);
  if (entries_ == 0 || layout_of(seq) != layout_) return 0;
  std::vector<Node*> path;
  Node* node = root_.get();
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  for (int64_t end = block_; end <= limit; end += block_) {
    Node* child = find_child(node, tokens.subspan(end - block_, block_));
    if (!child) break;
    path.push_back(child);
    node = child;
  }
  if (path.empty()) return 0;
  ++tick_;
  const int64_t end = path.back()->depth * block_;
  for (Node* n : path) {
    n->last_used = tick_;
    const int64_t first = (n->depth - 1) * block_;
    for (size_t l = 0; l < seq.layers.size(); ++l) {
      const LayerState& ls = seq.layers[l];
      if (ls.k_cache.empty()) continue;
      // A ring keeps only the last rows positions before `end`: earlier blocks' rows
      // would be overwritten before they are read, so they are not copied at all.
      const int64_t from = std::max(first, end - ls.k_cache.ne[2]);
      if (from >= first + block_) continue;
      const size_t bytes = position_bytes(ls.k_cache), skip = static_cast<size_t>(from - first);
      position_runs(ls.k_cache, from, first + block_ - from, [&](size_t row, size_t i, size_t count) {
        backend.write(ls.k_cache, n->slot + layout_.k[l] + (skip + i) * bytes, count * bytes, row * bytes);
        backend.write(ls.v_cache, n->slot + layout_.v[l] + (skip + i) * bytes, count * bytes, row * bytes);
      });
    }
  }
  const Node* last = path.back();
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    const LayerState& ls = seq.layers[l];
    if (!ls.conv.empty()) backend.write(ls.conv, last->slot + layout_.conv[l], ls.conv.nbytes());
    if (!ls.delta.empty()) backend.write(ls.delta, last->slot + layout_.delta[l], ls.delta.nbytes());
  }
  seq.n_past = last->depth * block_;
  return seq.n_past;
}

void PrefixCache::store(Backend& backend, std::span<const int32_t> tokens, const SequenceState& seq) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (budget_ == 0 || n < block_ || n % block_ != 0 || seq.n_past != n) return;
  if (backend_ && backend_ != &backend) throw std::invalid_argument("prefix cache: one backend serves every call");
  if (layout_.bytes == 0) layout_ = layout_of(seq);
  else if (layout_of(seq) != layout_) return;  // another sequence shape: its snapshots would not fit the slots
  Node* parent = root_.get();
  for (int64_t end = block_; end < n; end += block_) {
    parent = find_child(parent, tokens.subspan(end - block_, block_));
    if (!parent) return;  // an ancestor was evicted: this block's KV alone is useless
  }
  const auto block_tokens = tokens.subspan(n - block_, block_);
  if (Node* existing = find_child(parent, block_tokens)) {
    existing->last_used = ++tick_;
    return;
  }
  char* slot = take_slot(backend, parent);
  if (!slot) return;  // the budget holds no node beside the parent's chain
  auto node = std::make_unique<Node>();
  node->parent = parent;
  node->tokens.assign(block_tokens.begin(), block_tokens.end());
  node->depth = parent->depth + 1;
  node->slot = slot;
  // The block's rows; those a ring no longer holds are left as they are (restore
  // never copies them back).
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    const LayerState& ls = seq.layers[l];
    if (!ls.k_cache.empty()) {
      const size_t bytes = position_bytes(ls.k_cache);
      position_runs(ls.k_cache, n - block_, block_, [&](size_t row, size_t i, size_t count) {
        backend.read(ls.k_cache, slot + layout_.k[l] + i * bytes, count * bytes, row * bytes);
        backend.read(ls.v_cache, slot + layout_.v[l] + i * bytes, count * bytes, row * bytes);
      });
    }
    if (!ls.conv.empty()) backend.read(ls.conv, slot + layout_.conv[l], ls.conv.nbytes());
    if (!ls.delta.empty()) backend.read(ls.delta, slot + layout_.delta[l], ls.delta.nbytes());
  }
  node->last_used = ++tick_;
  ++entries_;
  parent->children.emplace(node->tokens, std::move(node));
}

// A new slot while the budget has room, else the least recently used leaf's (never
// `parent`, which the new node extends); null when none can be had. When the host
// refuses more memory, the cache keeps the slots it has.
char* PrefixCache::take_slot(Backend& backend, const Node* parent) {
  if (!host_full_ && (slots_.size() + 1) * layout_.bytes <= budget_) {
    char* slot = nullptr;
    try {
      slot = static_cast<char*>(backend.host_alloc(layout_.bytes));
    } catch (const std::exception&) {
      host_full_ = true;
    }
    if (slot) {
      backend_ = &backend;
      slots_.push_back(slot);
      return slot;
    }
  }
  // Linear in the node count, which the budget keeps small.
  Node* victim = nullptr;
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& [key, child] : n->children) stack.push_back(child.get());
    if (n != root_.get() && n != parent && n->children.empty() && (!victim || n->last_used < victim->last_used))
      victim = n;
  }
  return victim ? remove_leaf(victim) : nullptr;
}

char* PrefixCache::remove_leaf(Node* leaf) {
  char* slot = leaf->slot;
  --entries_;
  Node* parent = leaf->parent;
  parent->children.erase(leaf->tokens);
  return slot;
}

}  // namespace zinc
