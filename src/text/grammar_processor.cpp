// Grammar masks over a vocabulary, and the per-request LogitsProcessor (grammar.h).
#include "text/grammar_processor.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "text/grammar.h"

namespace zinc::text {

namespace {
// A mask cache past this size is dropped and rebuilt from the states in use, and a
// GrammarMasks past twice it is no longer handed to new requests.
constexpr size_t kMaxMaskBytes = size_t{64} << 20;
constexpr size_t kRecentGrammars = 4;
}  // namespace

TokenTrie::TokenTrie(const Tokenizer& tokenizer, std::span<const int32_t> specials) : n_vocab(tokenizer.n_vocab()) {
  std::vector<std::pair<std::string, int32_t>> tokens;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (std::find(specials.begin(), specials.end(), id) != specials.end()) {
      tokens.emplace_back(special_token(tokenizer.token_bytes(id)), id);
      continue;
    }
    const TokenType type = tokenizer.token_type(id);
    if (type == TokenType::Control || type == TokenType::Unused || type == TokenType::Unknown) continue;
    std::string bytes = tokenizer.token_bytes(id);
    if (!bytes.empty() && bytes.find(kSpecialTokenMark) == std::string::npos) tokens.emplace_back(std::move(bytes), id);
  }
  std::sort(tokens.begin(), tokens.end());
  std::vector<uint32_t> open;  // open[d]: the node at depth d + 1 on the current path
  const std::string* previous = nullptr;
  for (const auto& [bytes, id] : tokens) {
    size_t common = 0;
    if (previous)
      while (common < previous->size() && common < bytes.size() && (*previous)[common] == bytes[common]) ++common;
    for (; open.size() > common; open.pop_back()) nodes[open.back()].end = static_cast<uint32_t>(nodes.size());
    for (size_t d = open.size(); d < bytes.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({0, static_cast<uint32_t>(d + 1), 0, 0, static_cast<uint8_t>(bytes[d])});
    }
    // Sorted order puts a token right after the node its bytes end at was made, and
    // equal byte strings next to each other, so each node's tokens are contiguous.
    Node& node = nodes[open.back()];
    if (node.token_count == 0) node.token_begin = static_cast<uint32_t>(token_ids.size());
    ++node.token_count;
    token_ids.push_back(id);
    max_depth = std::max<uint32_t>(max_depth, static_cast<uint32_t>(bytes.size()));
    previous = &bytes;
  }
  for (; !open.empty(); open.pop_back()) nodes[open.back()].end = static_cast<uint32_t>(nodes.size());
}

uint64_t TokenTrie::fingerprint(const Tokenizer& tokenizer) {
  uint64_t h = static_cast<uint64_t>(tokenizer.n_vocab());
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    const uint64_t x = std::hash<std::string_view>{}(tokenizer.token_text(id)) ^
                       (static_cast<uint64_t>(tokenizer.token_type(id)) << 56);
    h = (h ^ x) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  return h;
}

std::shared_ptr<const TokenTrie> TokenTrie::of(const Tokenizer& tokenizer, std::span<const int32_t> specials) {
  static std::mutex mutex;
  // Keyed by the vocabulary's contents, not the tokenizer's address: a trie may
  // outlive its tokenizer (recently used masks keep it), and addresses get reused.
  static std::map<std::pair<uint64_t, std::vector<int32_t>>, std::weak_ptr<const TokenTrie>> cache;
  std::vector<int32_t> special_ids(specials.begin(), specials.end());
  std::sort(special_ids.begin(), special_ids.end());
  const auto key = std::make_pair(fingerprint(tokenizer), std::move(special_ids));
  std::lock_guard<std::mutex> guard(mutex);
  if (auto trie = cache[key].lock()) return trie;
  auto trie = std::make_shared<const TokenTrie>(tokenizer, specials);
  cache[key] = trie;
  return trie;
}

GrammarMasks::GrammarMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(grammar), trie_(std::move(trie)), matcher_(std::move(grammar)), at_depth_(trie_->max_depth + 1) {}

std::shared_ptr<GrammarMasks> GrammarMasks::of(std::shared_ptr<const Grammar> grammar,
                                               std::shared_ptr<const TokenTrie> trie) {
  static std::mutex mutex;
  static std::map<std::pair<const Grammar*, const TokenTrie*>, std::weak_ptr<GrammarMasks>> cache;
  // The most recently used stay alive between requests, so back-to-back requests
  // with one grammar (json_object, a server's tool set) start with warm masks.
  static std::deque<std::shared_ptr<GrammarMasks>> recent;
  std::lock_guard<std::mutex> guard(mutex);
  std::shared_ptr<GrammarMasks> masks = cache[{grammar.get(), trie.get()}].lock();
  if (masks) {
    auto held = masks->lock();
    if (masks->memory_bytes() > 2 * kMaxMaskBytes) masks.reset();
  }
  if (!masks) {
    for (auto it = cache.begin(); it != cache.end();) it = it->second.expired() ? cache.erase(it) : std::next(it);
    masks = std::make_shared<GrammarMasks>(std::move(grammar), std::move(trie));
    cache[{masks->grammar_.get(), masks->trie_.get()}] = masks;
  }
  std::erase(recent, masks);
  recent.push_front(masks);
  if (recent.size() > kRecentGrammars) recent.pop_back();
  return masks;
}

GrammarMasks::Mask GrammarMasks::walk(State state) {
  Mask mask;
  mask.bits.assign((static_cast<size_t>(trie_->n_vocab) + 63) / 64, 0);
  const auto& nodes = trie_->nodes;
  at_depth_[0] = state;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    const State next = matcher_.advance(at_depth_[node.depth - 1], node.byte);
    if (next == GrammarMatcher::kDead) {
      i = node.end;  // no token with this prefix can come next
      continue;
    }
    at_depth_[node.depth] = next;
    for (uint32_t k = 0; k < node.token_count; ++k) {
      const int32_t id = trie_->token_ids[node.token_begin + k];
      mask.bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    mask.count += node.token_count;
    ++i;
  }
  return mask;
}

const GrammarMasks::Mask& GrammarMasks::mask(State state) {
  if (auto it = masks_.find(state); it != masks_.end()) return it->second;
  if (masks_.size() * (static_cast<size_t>(trie_->n_vocab) / 8) > kMaxMaskBytes) masks_.clear();
  return masks_.emplace(state, walk(state)).first->second;
}

size_t GrammarMasks::memory_bytes() const {
  return masks_.size() * (static_cast<size_t>(trie_->n_vocab) / 8) + matcher_.state_count() * 1024 +
         matcher_.stack_count() * 24;
}

namespace {

class GrammarProcessor final : public LogitsProcessor {
 public:
  GrammarProcessor(std::shared_ptr<const Grammar> grammar, const Tokenizer& tokenizer, std::vector<int32_t> eog_ids,
                   std::vector<int32_t> special_ids)
      : tokenizer_(tokenizer), eog_ids_(std::move(eog_ids)), special_ids_(std::move(special_ids)) {
    if (!grammar) throw std::invalid_argument("make_grammar_processor: no grammar");
    for (int32_t id : special_ids_)
      if (id < 0 || id >= tokenizer.n_vocab())
        throw std::invalid_argument("make_grammar_processor: special token id out of range");
    masks_ = GrammarMasks::of(std::move(grammar), TokenTrie::of(tokenizer, special_ids_));
    auto held = masks_->lock();
    state_ = masks_->matcher().initial();
  }

  void process(std::span<float> logits) override {
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    eog_logits_.clear();
    for (int32_t id : eog_ids_)
      eog_logits_.push_back(id >= 0 && static_cast<size_t>(id) < logits.size() ? logits[id] : kBanned);
    bool eog_allowed = ended_;
    if (ended_) {
      std::fill(logits.begin(), logits.end(), kBanned);
    } else {
      auto held = masks_->lock();
      const GrammarMasks::Mask& mask = masks_->mask(state_);
      // Nothing can continue: only eog (also the way out if no token fits at all).
      eog_allowed = masks_->matcher().is_complete(state_) || mask.count == 0;
      const size_t n = std::min(logits.size(), mask.bits.size() * 64);
      for (size_t word = 0; word * 64 < n; ++word) {
        const uint64_t bits = mask.bits[word];
        if (bits == ~uint64_t{0}) continue;  // dense masks: whole words allowed
        if (bits == 0) {                      // sparse masks: whole words banned
          std::fill(logits.begin() + static_cast<std::ptrdiff_t>(word * 64),
                    logits.begin() + static_cast<std::ptrdiff_t>(std::min(n, word * 64 + 64)), kBanned);
          continue;
        }
        for (size_t i = word * 64; i < std::min(n, word * 64 + 64); ++i)
          if (!((bits >> (i & 63)) & 1)) logits[i] = kBanned;
      }
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(n), logits.end(), kBanned);
    }
    for (size_t k = 0; k < eog_ids_.size(); ++k) {
      const int32_t id = eog_ids_[k];
      if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = eog_allowed ? eog_logits_[k] : kBanned;
    }
  }

  void accept(int32_t token) override {
    if (std::find(eog_ids_.begin(), eog_ids_.end(), token) != eog_ids_.end()) {
      ended_ = true;
      return;
    }
    if (token < 0 || token >= tokenizer_.n_vocab()) throw std::invalid_argument("grammar: token id out of range");
    const bool special = std::find(special_ids_.begin(), special_ids_.end(), token) != special_ids_.end();
    const std::string bytes = special ? special_token(tokenizer_.token_bytes(token)) : tokenizer_.token_bytes(token);
    auto held = masks_->lock();
    const GrammarMatcher::State next = masks_->matcher().advance(state_, bytes);
    if (next == GrammarMatcher::kDead)
      throw std::invalid_argument("grammar: token " + std::to_string(token) + " cannot continue the grammar");
    state_ = next;
  }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> eog_ids_, special_ids_;
  std::shared_ptr<GrammarMasks> masks_;
  GrammarMatcher::State state_ = GrammarMatcher::kDead;
  bool ended_ = false;
  std::vector<float> eog_logits_;
};

}  // namespace

std::unique_ptr<LogitsProcessor> make_grammar_processor(std::shared_ptr<const Grammar> grammar,
                                                        const Tokenizer& tokenizer, std::vector<int32_t> eog_ids,
                                                        std::vector<int32_t> special_ids) {
  return std::make_unique<GrammarProcessor>(std::move(grammar), tokenizer, std::move(eog_ids), std::move(special_ids));
}

}  // namespace zinc::text
