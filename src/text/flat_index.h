// Open-addressing hash tables for the vocabulary: token text -> id, and token pair
// -> merge. A 262k vocab with 515k merges loads in a fraction of the time node-based
// std::unordered_map needs, because a lookup touches one or two cache lines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "text/bpe.h"

namespace zinc::text {

// Token text -> id over a vector of texts the caller keeps alive and unchanged.
class TextIndex {
 public:
  void build(const std::vector<std::string>& texts) {
    texts_ = &texts;
    size_t capacity = 16;
    while (capacity < texts.size() * 2) capacity *= 2;
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{});
    for (size_t id = 0; id < texts.size(); ++id) {
      uint64_t h = std::hash<std::string_view>{}(texts[id]);
      for (size_t i = h & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].id < 0) {
          slots_[i] = {h, static_cast<int32_t>(id)};
          break;
        }
        if (slots_[i].hash == h && (*texts_)[slots_[i].id] == texts[id]) break;  // duplicate: first id wins
      }
    }
  }
  int32_t find(std::string_view text) const {
    if (slots_.empty()) return -1;
    uint64_t h = std::hash<std::string_view>{}(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && (*texts_)[s.id] == text) return s.id;
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    int32_t id = -1;
  };
  const std::vector<std::string>* texts_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// (left id, right id) -> merge; the first insertion of a pair wins.
class MergeTable {
 public:
  void reserve(size_t n) {
    size_t capacity = 16;
    while (capacity < n * 2) capacity *= 2;
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{});
  }
  bool empty() const { return size_ == 0; }
  void insert(int32_t left, int32_t right, BpeMerge merge) {
    uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, merge};
        ++size_;
        return;
      }
      if (slots_[i].key == key) return;
    }
  }
  const BpeMerge* find(int32_t left, int32_t right) const {
    if (size_ == 0) return nullptr;
    uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so no pair packs to this
  static uint64_t pack(int32_t l, int32_t r) { return static_cast<uint64_t>(l) << 32 | static_cast<uint32_t>(r); }
  static uint64_t mix(uint64_t k) {  // splitmix64 finaliser
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    return k ^ (k >> 31);
  }
  struct Slot {
    uint64_t key = kEmpty;
    BpeMerge merge{};
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace zinc::text
