// The parser for a compiled Grammar, as a lazily built automaton over bytes.
//
// A parse stack is a list of element positions (the top is the next symbol to match;
// below it, where to continue once the current rule ends). Stacks are interned as
// (top, rest) pairs, so a stack is one integer and shared tails are stored once. A
// parser state is the set of stacks that the bytes so far allow (the grammar may be
// ambiguous), also interned. Each state gets a 256-entry transition row the first
// time a byte is tried from it, so walking the vocabulary trie from a state already
// seen costs one array load per trie node.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/grammar_rules.h"

namespace zinc::text {

class GrammarMatcher {
 public:
  using State = int32_t;
  static constexpr State kDead = 0;  // no stack left: the bytes so far are not a prefix

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  State initial() const { return initial_; }
  State advance(State state, uint8_t byte) {
    if (const Row* row = rows_[state].get()) {
      const State next = (*row)[byte];
      if (next >= 0) return next;
    }
    return advance_slow(state, byte);
  }
  State advance(State state, std::string_view bytes);
  // The bytes so far are a whole string of the grammar (they may also continue).
  bool is_complete(State state) const { return complete_[state]; }
  // Whole-text check, for tests and validation.
  bool accepts(std::string_view text);

  size_t state_count() const { return sets_.size(); }
  size_t stack_count() const { return stacks_.size(); }

 private:
  using Row = std::array<State, 256>;
  using StackId = int32_t;  // 0: the empty stack (the root rule has ended)
  struct StackNode {
    uint32_t top;    // element position
    StackId rest;
  };

  State advance_slow(State state, uint8_t byte);
  StackId push(StackId rest, uint32_t top);
  // Appends the stacks `stack` stands for once every rule reference on top is
  // replaced by its alternatives: each has bytes on top, or is empty.
  void expand(StackId stack, std::vector<StackId>& out);
  State intern(std::vector<StackId> stacks);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<StackNode> stacks_;
  std::unordered_map<uint64_t, StackId> stack_ids_;
  std::vector<std::vector<StackId>> sets_;  // sorted stacks of each state
  std::map<std::vector<StackId>, State> set_ids_;
  std::vector<std::unique_ptr<Row>> rows_;
  std::vector<bool> complete_;
  State initial_ = kDead;
  std::vector<StackId> scratch_;
};

}  // namespace zinc::text
