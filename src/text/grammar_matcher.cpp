// The grammar parser's stacks, states and transitions (see grammar_matcher.h).
#include "text/grammar_matcher.h"

#include <algorithm>
#include <stdexcept>

namespace zinc::text {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  if (!grammar_) throw std::invalid_argument("GrammarMatcher: no grammar");
  stacks_.push_back({0, 0});  // the empty stack
  intern({});                 // kDead
  std::vector<StackId> start;
  expand(push(0, grammar_->start()), start);
  initial_ = intern(std::move(start));
}

GrammarMatcher::StackId GrammarMatcher::push(StackId rest, uint32_t top) {
  const uint64_t key = (static_cast<uint64_t>(top) << 32) | static_cast<uint32_t>(rest);
  auto [it, added] = stack_ids_.emplace(key, static_cast<StackId>(stacks_.size()));
  if (added) stacks_.push_back({top, rest});
  return it->second;
}

void GrammarMatcher::expand(StackId stack, std::vector<StackId>& out) {
  const auto& elements = grammar_->elements();
  const StackNode node = stacks_[stack];
  if (stack == 0 || elements[node.top].kind == Grammar::Kind::Bytes) {
    out.push_back(stack);
    return;
  }
  // A rule reference: continue after it once the rule ends (nothing to keep when it
  // ends its own alternative, so right recursion does not grow the stack).
  const uint32_t after = node.top + 1;
  const StackId rest = elements[after].kind == Grammar::Kind::End ? node.rest : push(node.rest, after);
  for (uint32_t alt : grammar_->alternatives(elements[node.top].index))
    expand(elements[alt].kind == Grammar::Kind::End ? rest : push(rest, alt), out);
}

GrammarMatcher::State GrammarMatcher::intern(std::vector<StackId> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  auto it = set_ids_.find(stacks);
  if (it != set_ids_.end()) return it->second;
  const State id = static_cast<State>(sets_.size());
  complete_.push_back(!stacks.empty() && stacks.front() == 0);
  rows_.push_back(nullptr);
  set_ids_.emplace(stacks, id);
  sets_.push_back(std::move(stacks));
  return id;
}

GrammarMatcher::State GrammarMatcher::advance_slow(State state, uint8_t byte) {
  const auto& elements = grammar_->elements();
  scratch_.clear();
  for (StackId s : sets_[state]) {
    if (s == 0) continue;
    const StackNode node = stacks_[s];
    if (!grammar_->byte_set(elements[node.top].index).test(byte)) continue;
    const uint32_t after = node.top + 1;
    expand(elements[after].kind == Grammar::Kind::End ? node.rest : push(node.rest, after), scratch_);
  }
  const State next = intern(scratch_);
  // intern() may have grown rows_: index it only now.
  if (!rows_[state]) {
    rows_[state] = std::make_unique<Row>();
    rows_[state]->fill(-1);
  }
  (*rows_[state])[byte] = next;
  return next;
}

GrammarMatcher::State GrammarMatcher::advance(State state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDead) break;
    state = advance(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool GrammarMatcher::accepts(std::string_view text) { return is_complete(advance(initial_, text)); }

}  // namespace zinc::text
