// The compiled form of a grammar, and the builder the compilers (JSON schema) use.
//
// Rules are lists of alternatives; an alternative is a sequence of symbols, each a
// set of bytes or a reference to a rule. Compiled, every alternative is laid out in
// one element array and ends with an End element, so a parse position is a single
// index (the parser's stacks hold these indexes, see grammar_matcher.h).
// Left recursion is refused at build time: the parser expands rules top-down.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zinc::text {

using ByteSet = std::bitset<256>;

class Grammar {
 public:
  enum class Kind : uint8_t { Bytes, Rule, End };
  struct Element {
    Kind kind;
    uint32_t index;  // Bytes: into byte_sets; Rule: the rule; End: unused
  };

  const std::vector<Element>& elements() const { return elements_; }
  const ByteSet& byte_set(uint32_t i) const { return byte_sets_[i]; }
  // First element of each alternative of a rule.
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alternatives_[rule]; }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  size_t rule_count() const { return alternatives_.size(); }
  // A Rule element naming the root rule, followed by End: where parsing starts.
  uint32_t start() const { return 0; }

 private:
  friend class GrammarBuilder;
  Grammar() = default;
  void check_no_left_recursion() const;

  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::vector<uint32_t>> alternatives_;
  std::vector<std::string> names_;
};

class GrammarBuilder {
 public:
  struct Symbol {
    int32_t rule = -1;  // >= 0: a reference to this rule; else the bytes
    ByteSet bytes;
  };
  using Sequence = std::vector<Symbol>;

  static Symbol ref(int32_t rule) { return {rule, {}}; }
  static Symbol byte(uint8_t b);
  static Symbol range(uint8_t lo, uint8_t hi);
  static Symbol bytes(std::string_view any_of);  // one of these bytes
  static Sequence literal(std::string_view text);
  // The sequences one after the other.
  static Sequence concat(std::initializer_list<Sequence> parts);

  int32_t new_rule(std::string name);
  void add(int32_t rule, Sequence alternative);
  int32_t rule(std::string name, std::vector<Sequence> alternatives);
  // `item` between min and max times (max < 0: unbounded), without separators.
  int32_t repeat(std::string name, const Symbol& item, int64_t min, int64_t max);

  // Throws std::invalid_argument when a rule has no alternative or is left-recursive.
  Grammar build(int32_t root) &&;

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> rules_;
};

}  // namespace zinc::text
