// The pieces behind make_grammar_processor (grammar.h), exposed for tests and
// measurements.
//
// TokenTrie: the vocabulary's token bytes as a byte trie in preorder, so a walk from
// a parser state handles each shared prefix once and skips a whole subtree as soon
// as its prefix cannot continue. GrammarMasks: one grammar's parser automaton plus a
// cache of allowed-token masks per parser state, shared by every request that uses
// the same grammar and vocabulary (a state seen before costs a lookup).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/grammar_matcher.h"
#include "text/tokenizer.h"

namespace zinc::text {

struct TokenTrie {
  struct Node {
    uint32_t end;          // index after this node's subtree
    uint32_t depth;        // bytes from the root, >= 1
    uint32_t token_begin;  // tokens whose bytes end here: token_ids[begin, begin + count)
    uint32_t token_count;
    uint8_t byte;
  };
  std::vector<Node> nodes;  // preorder
  std::vector<int32_t> token_ids;
  uint32_t max_depth = 0;
  int32_t n_vocab = 0;

  // Every token but control, unused and unknown ones, those with no bytes and those
  // holding kSpecialTokenMark (grammar.h), which no UTF-8 text holds; `specials` (control
  // tokens) join, spelled special_token(text).
  explicit TokenTrie(const Tokenizer& tokenizer, std::span<const int32_t> specials = {});
  // Shared per vocabulary (same token texts and types) and specials while something uses it.
  static std::shared_ptr<const TokenTrie> of(const Tokenizer& tokenizer, std::span<const int32_t> specials = {});
  // A hash of the token texts and types (about a millisecond for 150k tokens).
  static uint64_t fingerprint(const Tokenizer& tokenizer);
};

class GrammarMasks {
 public:
  using State = GrammarMatcher::State;
  struct Mask {
    std::vector<uint64_t> bits;  // bit i: token i may come next
    size_t count = 0;
  };

  GrammarMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);
  // Shared per (grammar, trie) while some processor uses it, or it is one of the few
  // used last, and it is not too big.
  static std::shared_ptr<GrammarMasks> of(std::shared_ptr<const Grammar> grammar,
                                          std::shared_ptr<const TokenTrie> trie);

  // Callers hold lock() around these: one engine may serve several requests on
  // threads of their own, all sharing this object.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }
  GrammarMatcher& matcher() { return matcher_; }
  const Mask& mask(State state);
  // Computes the mask without the cache (for measurements).
  Mask walk(State state);
  size_t memory_bytes() const;

 private:
  std::mutex mutex_;
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  GrammarMatcher matcher_;
  std::unordered_map<State, Mask> masks_;
  std::vector<State> at_depth_;
};

}  // namespace zinc::text
