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
  // Per layer, in order: the block's K and V rows (attention layers), or the conv
  // and delta states at the block's end (recurrent layers).
  std::vector<std::vector<char>> k_rows, v_rows, conv, delta;
  size_t bytes = 0;
  uint64_t last_used = 0;
  int64_t depth = 0;  // blocks from the root
};

PrefixCache::PrefixCache(int64_t block, size_t budget_bytes)
    : block_(block), budget_(budget_bytes), root_(std::make_unique<Node>()) {
  if (block < 1) throw std::invalid_argument("prefix cache: block must be >= 1");
}

PrefixCache::~PrefixCache() = default;

PrefixCache::Node* PrefixCache::find_child(Node* parent, std::span<const int32_t> block_tokens) const {
  auto it = parent->children.find(std::vector<int32_t>(block_tokens.begin(), block_tokens.end()));
  return it == parent->children.end() ? nullptr : it->second.get();
}

int64_t PrefixCache::restore(Backend& backend, std::span<const int32_t> tokens, int64_t max_tokens,
                             SequenceState& seq) {
  seq.reset(backend);
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
        backend.write(ls.k_cache, n->k_rows[l].data() + (skip + i) * bytes, count * bytes, row * bytes);
        backend.write(ls.v_cache, n->v_rows[l].data() + (skip + i) * bytes, count * bytes, row * bytes);
      });
    }
  }
  const Node* last = path.back();
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    const LayerState& ls = seq.layers[l];
    if (!ls.conv.empty()) backend.write(ls.conv, last->conv[l].data(), last->conv[l].size());
    if (!ls.delta.empty()) backend.write(ls.delta, last->delta[l].data(), last->delta[l].size());
  }
  seq.n_past = last->depth * block_;
  return seq.n_past;
}

void PrefixCache::store(Backend& backend, std::span<const int32_t> tokens, const SequenceState& seq) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (budget_ == 0 || n < block_ || n % block_ != 0 || seq.n_past != n) return;
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
  auto node = std::make_unique<Node>();
  node->parent = parent;
  node->tokens.assign(block_tokens.begin(), block_tokens.end());
  node->depth = parent->depth + 1;
  const size_t L = seq.layers.size();
  node->k_rows.resize(L);
  node->v_rows.resize(L);
  node->conv.resize(L);
  node->delta.resize(L);
  auto take = [&](const Tensor& t, std::vector<char>& dst, size_t offset, size_t bytes) {
    dst.resize(bytes);
    backend.read(t, dst.data(), bytes, offset);
    node->bytes += bytes;
  };
  for (size_t l = 0; l < L; ++l) {
    const LayerState& ls = seq.layers[l];
    if (!ls.k_cache.empty()) {
      // The block's rows; those a ring no longer holds stay zero (restore skips them).
      const size_t bytes = position_bytes(ls.k_cache);
      for (auto pair : {std::pair{&ls.k_cache, &node->k_rows[l]}, std::pair{&ls.v_cache, &node->v_rows[l]}}) {
        const Tensor* cache = pair.first;  // named, not bound: clang 14 cannot capture a binding
        std::vector<char>* rows = pair.second;
        rows->assign(static_cast<size_t>(block_) * bytes, 0);
        position_runs(*cache, n - block_, block_, [&](size_t row, size_t i, size_t count) {
          backend.read(*cache, rows->data() + i * bytes, count * bytes, row * bytes);
        });
        node->bytes += rows->size();
      }
    }
    if (!ls.conv.empty()) take(ls.conv, node->conv[l], 0, ls.conv.nbytes());
    if (!ls.delta.empty()) take(ls.delta, node->delta[l], 0, ls.delta.nbytes());
  }
  node->last_used = ++tick_;
  const Node* added = node.get();
  bytes_ += node->bytes;
  ++entries_;
  parent->children.emplace(node->tokens, std::move(node));
  evict_to_budget(added);
}

void PrefixCache::evict_to_budget(const Node* keep) {
  while (bytes_ > budget_) {
    // The least recently used leaf; linear in the node count, which the budget keeps small.
    Node* victim = nullptr;
    std::vector<Node*> stack{root_.get()};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (auto& [key, child] : n->children) stack.push_back(child.get());
      if (n != root_.get() && n->children.empty() && (!victim || n->last_used < victim->last_used)) victim = n;
    }
    if (!victim) return;
    remove_leaf(victim);
    if (victim == keep) return;  // the new block alone exceeds the budget
  }
}

void PrefixCache::remove_leaf(Node* leaf) {
  bytes_ -= leaf->bytes;
  --entries_;
  Node* parent = leaf->parent;
  parent->children.erase(leaf->tokens);
}

}  // namespace zinc
