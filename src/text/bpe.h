// The BPE merge loop shared by the byte-level and SentencePiece-style tokenizers.
//
// Symbols live in a linked list over an array; candidate pairs wait in a min-heap
// ordered by (priority, position), so the best pair merges first and equal pairs
// merge left to right (Hugging Face's and sentencepiece's order). A heap entry
// remembers the ids it was made for; if either side has merged since, it is stale
// and skipped. O(n log n) in the number of symbols, so a long word costs little.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

namespace zinc::text {

struct BpeMerge {
  double priority;  // lower merges first
  int32_t id;       // the merged token
};

// find(left, right) -> std::optional<BpeMerge>. Rewrites symbols in place.
template <typename FindMerge>
void bpe_merge(std::vector<int32_t>& symbols, const FindMerge& find) {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  struct Candidate {
    double priority;
    int left;
    int32_t left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap(std::greater<>{}, std::move(storage));
  auto offer = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    int32_t a = symbols[left], b = symbols[next[left]];
    if (std::optional<BpeMerge> m = find(a, b)) heap.push({m->priority, left, a, b, m->id});
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);

  constexpr int32_t kDead = -1;
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    int right = next[c.left];
    if (symbols[c.left] != c.left_id || right < 0 || symbols[right] != c.right_id) continue;
    symbols[c.left] = c.merged_id;
    symbols[right] = kDead;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    offer(prev[c.left]);
    offer(c.left);
  }
  int out = 0;
  for (int i = 0; i >= 0; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

}  // namespace zinc::text
