// Building and checking compiled grammars (see grammar_rules.h).
#include "text/grammar_rules.h"

#include <stdexcept>

namespace zinc::text {

GrammarBuilder::Symbol GrammarBuilder::byte(uint8_t b) {
  Symbol s;
  s.bytes.set(b);
  return s;
}

GrammarBuilder::Symbol GrammarBuilder::range(uint8_t lo, uint8_t hi) {
  Symbol s;
  for (int b = lo; b <= hi; ++b) s.bytes.set(static_cast<size_t>(b));
  return s;
}

GrammarBuilder::Symbol GrammarBuilder::bytes(std::string_view any_of) {
  Symbol s;
  for (char c : any_of) s.bytes.set(static_cast<uint8_t>(c));
  return s;
}

GrammarBuilder::Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence seq;
  for (char c : text) seq.push_back(byte(static_cast<uint8_t>(c)));
  return seq;
}

GrammarBuilder::Sequence GrammarBuilder::concat(std::initializer_list<Sequence> parts) {
  Sequence seq;
  for (const Sequence& p : parts) seq.insert(seq.end(), p.begin(), p.end());
  return seq;
}

int32_t GrammarBuilder::new_rule(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  return static_cast<int32_t>(rules_.size() - 1);
}

void GrammarBuilder::add(int32_t rule, Sequence alternative) { rules_.at(rule).push_back(std::move(alternative)); }

int32_t GrammarBuilder::rule(std::string name, std::vector<Sequence> alternatives) {
  const int32_t r = new_rule(std::move(name));
  for (Sequence& alt : alternatives) add(r, std::move(alt));
  return r;
}

int32_t GrammarBuilder::repeat(std::string name, const Symbol& item, int64_t min, int64_t max) {
  if (min < 0 || (max >= 0 && max < min)) throw std::invalid_argument(name + ": bad repeat bounds");
  Sequence tail;
  if (max < 0) {
    // Right recursion: the parser's stack does not grow with the count.
    const int32_t more = new_rule(name + "-more");
    add(more, {});
    add(more, {item, ref(more)});
    tail.push_back(ref(more));
  } else {
    // One optional link per item beyond min, so the parser knows how many are left.
    int32_t next = -1;
    for (int64_t j = max - min; j > 0; --j) {
      const int32_t opt = new_rule(name + "-opt");
      add(opt, {});
      Sequence seq{item};
      if (next >= 0) seq.push_back(ref(next));
      add(opt, std::move(seq));
      next = opt;
    }
    if (next >= 0) tail.push_back(ref(next));
  }
  Sequence seq(static_cast<size_t>(min), item);
  seq.insert(seq.end(), tail.begin(), tail.end());
  return rule(std::move(name), {std::move(seq)});
}

Grammar GrammarBuilder::build(int32_t root) && {
  Grammar g;
  g.elements_.push_back({Grammar::Kind::Rule, static_cast<uint32_t>(root)});
  g.elements_.push_back({Grammar::Kind::End, 0});
  std::unordered_map<ByteSet, uint32_t> set_index;
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r].empty()) throw std::invalid_argument("grammar: rule '" + names_[r] + "' has no alternative");
    std::vector<uint32_t> starts;
    for (const Sequence& alt : rules_[r]) {
      starts.push_back(static_cast<uint32_t>(g.elements_.size()));
      for (const Symbol& s : alt) {
        if (s.rule >= 0) {
          if (static_cast<size_t>(s.rule) >= rules_.size()) throw std::invalid_argument("grammar: bad rule reference");
          g.elements_.push_back({Grammar::Kind::Rule, static_cast<uint32_t>(s.rule)});
          continue;
        }
        auto [it, added] = set_index.emplace(s.bytes, static_cast<uint32_t>(g.byte_sets_.size()));
        if (added) g.byte_sets_.push_back(s.bytes);
        g.elements_.push_back({Grammar::Kind::Bytes, it->second});
      }
      g.elements_.push_back({Grammar::Kind::End, 0});
    }
    g.alternatives_.push_back(std::move(starts));
  }
  g.names_ = std::move(names_);
  g.check_no_left_recursion();
  return g;
}

void Grammar::check_no_left_recursion() const {
  const size_t n = alternatives_.size();
  // Which rules can match the empty string (a fixpoint).
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t pos : alternatives_[r]) {
        bool all = true;
        for (; elements_[pos].kind != Kind::End && all; ++pos)
          all = elements_[pos].kind == Kind::Rule && nullable[elements_[pos].index];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Rules each rule can start with before consuming a byte; a cycle is left recursion.
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t pos : alternatives_[r])
      for (; elements_[pos].kind == Kind::Rule; ++pos) {
        first[r].push_back(elements_[pos].index);
        if (!nullable[elements_[pos].index]) break;
      }
  enum : uint8_t { Unseen, Open, Done };
  std::vector<uint8_t> mark(n, Unseen);
  std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge to follow
  for (uint32_t r0 = 0; r0 < n; ++r0) {
    if (mark[r0] != Unseen) continue;
    path.push_back({r0, 0});
    mark[r0] = Open;
    while (!path.empty()) {
      auto& [r, edge] = path.back();
      if (edge == first[r].size()) {
        mark[r] = Done;
        path.pop_back();
        continue;
      }
      const uint32_t next = first[r][edge++];
      if (mark[next] == Open) throw std::invalid_argument("grammar: rule '" + names_[next] + "' is left-recursive");
      if (mark[next] == Unseen) {
        mark[next] = Open;
        path.push_back({next, 0});
      }
    }
  }
}

}  // namespace zinc::text
