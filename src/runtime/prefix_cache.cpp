#include "runtime/prefix_cache.h"

#include <algorithm>
#include <stdexcept>

namespace zinc {

namespace {

// Units taken from the host at a time: few allocations, and little memory held
// beyond what the nodes need.
constexpr size_t kChunkBytes = size_t{64} << 20;

size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

// A tensor of the sequence state and where its bytes lie in a node's units.
struct Part {
  const Tensor* tensor;
  size_t at;
};

// Bytes of one position in a KV cache {head_dim, heads, rows}.
size_t position_bytes(const Tensor& cache) { return cache.nbytes() / static_cast<size_t>(cache.ne[2]); }

// f(row, i, n) for each run of cache rows that holds positions [first, first + count):
// position first + i at row `row`, and the n after it in the rows after. A cache of
// fewer rows than the context is a sliding window's ring (backend.h's kv_store): it
// wraps, so count must be at most its rows.
template <class F>
void position_runs(const Tensor& cache, int64_t first, int64_t count, F&& f) {
  const int64_t rows = cache.ne[2];
  for (int64_t i = 0; i < count;) {
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
  std::vector<char*> kv;       // the block's K and V rows' units
  std::vector<char*> state;    // the checkpoint's units, or none
  uint64_t last_used = 0;      // stored, or restored through
  uint64_t state_used = 0;     // the checkpoint stored, or restored from
  int64_t depth = 0;           // blocks from the root
};

PrefixCache::PrefixCache(int64_t block, size_t budget_bytes)
    : block_(block), budget_(budget_bytes), root_(std::make_unique<Node>()) {
  if (block < 1) throw std::invalid_argument("prefix cache: block must be >= 1");
}

PrefixCache::~PrefixCache() {
  if (!backend_) return;
  try {
    backend_->sync();  // copies to and from units may still be queued
  } catch (const std::exception&) {
    return;  // the device failed: freeing could fail as well, so the units are left to the process
  }
  for (char* chunk : chunks_) backend_->host_free(chunk);
}

size_t PrefixCache::bytes() const {
  return (static_cast<size_t>(entries_) * kv_units_ + static_cast<size_t>(checkpoints_) * state_units_) * unit_bytes_;
}
int64_t PrefixCache::entries() const { return entries_; }
int64_t PrefixCache::checkpoints() const { return checkpoints_; }

// Whether the budget holds one node's KV rows and its checkpoint: else nothing stored
// could ever be restored.
bool PrefixCache::holds_a_node() const {
  return unit_bytes_ > 0 && budget_ / unit_bytes_ >= kv_units_ + state_units_;
}

bool PrefixCache::has_checkpoint(const Node* n) const { return state_units_ == 0 || !n->state.empty(); }

PrefixCache::Layout PrefixCache::layout_of(const SequenceState& seq) const {
  Layout l;
  const auto put = [](std::vector<size_t>& at, size_t& end, size_t bytes) {
    at.push_back(end);
    end += round_up(bytes, 256);  // each part on its own 256-byte boundary
  };
  for (const LayerState& ls : seq.layers) {
    if (ls.k_cache.empty()) {
      l.k.push_back(Layout::kNone), l.v.push_back(Layout::kNone);
    } else {
      put(l.k, l.kv_bytes, static_cast<size_t>(block_) * position_bytes(ls.k_cache));
      put(l.v, l.kv_bytes, static_cast<size_t>(block_) * position_bytes(ls.v_cache));
    }
    if (ls.conv.empty()) l.conv.push_back(Layout::kNone);
    else put(l.conv, l.state_bytes, ls.conv.nbytes());
    if (ls.delta.empty()) l.delta.push_back(Layout::kNone);
    else put(l.delta, l.state_bytes, ls.delta.nbytes());
  }
  return l;
}

template <class F>
void PrefixCache::pieces(const std::vector<char*>& units, size_t at, size_t bytes, F&& f) const {
  for (size_t done = 0; done < bytes;) {
    const size_t unit = (at + done) / unit_bytes_, in = (at + done) % unit_bytes_;
    const size_t len = std::min(bytes - done, unit_bytes_ - in);
    f(units[unit] + in, len, done);
    done += len;
  }
}

template <class F>
void PrefixCache::checkpoint_pieces(const SequenceState& seq, const std::vector<char*>& units, F&& f) const {
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    const LayerState& ls = seq.layers[l];
    for (const Part p : {Part{&ls.conv, layout_.conv[l]}, Part{&ls.delta, layout_.delta[l]}})
      if (!p.tensor->empty())
        pieces(units, p.at, p.tensor->nbytes(),
               [&](char* host, size_t len, size_t done) { f(*p.tensor, host, len, done); });
  }
}

template <class F>
void PrefixCache::kv_pieces(const SequenceState& seq, const std::vector<char*>& units, int64_t first, int64_t end,
                            F&& f) const {
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    const LayerState& ls = seq.layers[l];
    if (ls.k_cache.empty()) continue;
    const int64_t begin = std::max(first, end - ls.k_cache.ne[2]);
    if (begin >= first + block_) continue;
    const size_t bytes = position_bytes(ls.k_cache), skip = static_cast<size_t>(begin - first);
    position_runs(ls.k_cache, begin, first + block_ - begin, [&](size_t row, size_t i, size_t count) {
      for (const Part p : {Part{&ls.k_cache, layout_.k[l]}, Part{&ls.v_cache, layout_.v[l]}})
        pieces(units, p.at + (skip + i) * bytes, count * bytes,
               [&](char* host, size_t len, size_t done) { f(*p.tensor, host, len, row * bytes + done); });
    });
  }
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
  while (!path.empty() && !has_checkpoint(path.back())) path.pop_back();  // the recurrent state resumes only there
  if (path.empty()) return 0;
  ++tick_;
  const int64_t end = path.back()->depth * block_;
  for (Node* n : path) {
    n->last_used = tick_;
    const int64_t first = (n->depth - 1) * block_;
    // A ring keeps only the last rows positions before `end`: earlier blocks' rows
    // would be overwritten before they are read, so they are not copied at all.
    kv_pieces(seq, n->kv, first, end, [&](const Tensor& t, const char* host, size_t len, size_t offset) {
      backend.write(t, host, len, offset);
    });
  }
  Node* last = path.back();
  last->state_used = tick_;
  checkpoint_pieces(seq, last->state, [&](const Tensor& t, const char* host, size_t len, size_t offset) {
    backend.write(t, host, len, offset);
  });
  seq.n_past = end;
  return end;
}

void PrefixCache::store(Backend& backend, std::span<const int32_t> tokens, const SequenceState& seq,
                        bool checkpoint) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (budget_ == 0 || n < block_ || n % block_ != 0 || seq.n_past != n) return;
  if (backend_ && backend_ != &backend) throw std::invalid_argument("prefix cache: one backend serves every call");
  if (unit_bytes_ == 0) set_layout(seq);
  else if (layout_of(seq) != layout_) return;  // another sequence shape: its snapshots would not fit the units
  if (!holds_a_node()) return;
  Node* parent = root_.get();
  for (int64_t end = block_; end < n; end += block_) {
    parent = find_child(parent, tokens.subspan(end - block_, block_));
    if (!parent) return;  // an ancestor was given up: this block's KV alone is useless
  }
  const auto block_tokens = tokens.subspan(n - block_, block_);
  Node* node = find_child(parent, block_tokens);
  if (!node) {
    // The checkpoint this chain resumes from stays: without it the new rows are useless.
    const Node* resume = parent;
    while (resume != root_.get() && !has_checkpoint(resume)) resume = resume->parent;
    std::vector<char*> kv;
    if (!take_units(backend, kv_units_, parent, resume, kv)) return;
    auto owned = std::make_unique<Node>();
    node = owned.get();
    node->parent = parent;
    node->tokens.assign(block_tokens.begin(), block_tokens.end());
    node->depth = parent->depth + 1;
    node->kv = std::move(kv);
    parent->children.emplace(node->tokens, std::move(owned));
    ++entries_;
    // The block's rows; those a ring no longer holds are left as they are (restore
    // never copies them back).
    kv_pieces(seq, node->kv, n - block_, n, [&](const Tensor& t, char* host, size_t len, size_t offset) {
      backend.read_to_host_alloc(t, host, len, offset);
    });
  }
  node->last_used = ++tick_;
  if (!checkpoint || state_units_ == 0) return;
  if (node->state.empty()) {
    std::vector<char*> units;
    if (!take_units(backend, state_units_, node, nullptr, units)) return;
    node->state = std::move(units);
    ++checkpoints_;
    checkpoint_pieces(seq, node->state, [&](const Tensor& t, char* host, size_t len, size_t offset) {
      backend.read_to_host_alloc(t, host, len, offset);
    });
  }
  node->state_used = tick_;
}

void PrefixCache::set_layout(const SequenceState& seq) {
  layout_ = layout_of(seq);
  // A node's rows and its checkpoint in at most 16 units each: few pieces to copy,
  // little left unused.
  unit_bytes_ = round_up((std::max(layout_.kv_bytes, layout_.state_bytes) + 15) / 16, 256);
  kv_units_ = (layout_.kv_bytes + unit_bytes_ - 1) / unit_bytes_;
  state_units_ = (layout_.state_bytes + unit_bytes_ - 1) / unit_bytes_;
}

void PrefixCache::reserve(Backend& backend, const SequenceState& shape) {
  if (budget_ == 0 || (backend_ && backend_ != &backend)) return;
  if (unit_bytes_ == 0) set_layout(shape);
  if (!holds_a_node()) return;  // store would keep nothing
  while (grow(backend)) {
  }
}

bool PrefixCache::take_units(Backend& backend, size_t count, const Node* keep, const Node* keep_checkpoint,
                             std::vector<char*>& out) {
  while (free_.size() < count)
    if (!grow(backend) && !give_up_one(keep, keep_checkpoint)) return false;
  out.assign(free_.end() - static_cast<std::ptrdiff_t>(count), free_.end());
  free_.resize(free_.size() - count);
  return true;
}

// One more chunk of units while the budget has room. When the host refuses more
// memory, the cache keeps the units it has.
bool PrefixCache::grow(Backend& backend) {
  const size_t most = budget_ / unit_bytes_;
  if (host_full_ || units_ >= most) return false;
  const size_t count = std::min(most - units_, std::max<size_t>(1, kChunkBytes / unit_bytes_));
  char* chunk = nullptr;
  try {
    chunk = static_cast<char*>(backend.host_alloc(count * unit_bytes_));
  } catch (const std::exception&) {
    host_full_ = true;
    return false;
  }
  backend_ = &backend;
  chunks_.push_back(chunk);
  units_ += count;
  for (size_t i = 0; i < count; ++i) free_.push_back(chunk + i * unit_bytes_);
  return true;
}

// Frees units by giving up one thing, the least useful first; false when nothing but
// `keep` (its node) and `keep_checkpoint` (its checkpoint) is left. Linear in the node
// count, which the budget keeps small.
bool PrefixCache::give_up_one(const Node* keep, const Node* keep_checkpoint) {
  Node *stateless_leaf = nullptr, *checkpoint = nullptr, *leaf = nullptr;
  const auto older = [](Node* a, Node* b) { return !b || a->last_used < b->last_used; };
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& [key, child] : n->children) stack.push_back(child.get());
    if (n == root_.get()) continue;
    if (!n->state.empty() && n != keep_checkpoint && (!checkpoint || n->state_used < checkpoint->state_used))
      checkpoint = n;
    if (!n->children.empty() || n == keep || n == keep_checkpoint) continue;
    if (!has_checkpoint(n)) {
      if (older(n, stateless_leaf)) stateless_leaf = n;
    } else if (older(n, leaf)) {
      leaf = n;
    }
  }
  if (stateless_leaf) remove_leaf(stateless_leaf);
  else if (checkpoint) drop_checkpoint(checkpoint);
  else if (leaf) remove_leaf(leaf);
  else return false;
  return true;
}

void PrefixCache::drop_checkpoint(Node* n) {
  free_.insert(free_.end(), n->state.begin(), n->state.end());
  n->state.clear();
  --checkpoints_;
}

void PrefixCache::remove_leaf(Node* leaf) {
  if (!leaf->state.empty()) drop_checkpoint(leaf);
  free_.insert(free_.end(), leaf->kv.begin(), leaf->kv.end());
  --entries_;
  auto& siblings = leaf->parent->children;
  siblings.erase(siblings.find(leaf->tokens));  // destroys leaf
}

}  // namespace zinc
