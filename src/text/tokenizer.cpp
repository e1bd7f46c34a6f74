// Text -> token ids: added-token splitting, then byte-level or SentencePiece BPE
// on the text between added tokens.
#include "text/tokenizer.h"

#include "text/unicode_nfc.h"

namespace zinc::text {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  return encode(text, parse_special, add_bos_, add_eos_);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special, bool add_bos) const {
  return encode(text, parse_special, add_bos, add_eos_);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special, bool add_bos,
                                       bool add_eos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  std::unordered_map<std::string, std::vector<int32_t>> word_cache;  // per call: no locking needed

  // Added tokens: leftmost-longest match. A control token found while parse_special
  // is off stays text, and no shorter token is looked for inside it (as in HF).
  size_t fragment_start = 0;
  for (size_t i = 0; i < text.size();) {
    int32_t node = trie_root_[static_cast<unsigned char>(text[i])], match = -1;
    size_t match_end = 0;
    if (node < 0) {
      ++i;
      continue;
    }
    if (trie_token_[node] >= 0) {
      match = trie_token_[node];
      match_end = i + 1;
    }
    for (size_t j = i + 1; j < text.size(); ++j) {
      auto edge = trie_edges_.find(static_cast<uint64_t>(node) << 8 | static_cast<unsigned char>(text[j]));
      if (edge == trie_edges_.end()) break;
      node = edge->second;
      if (trie_token_[node] >= 0) {
        match = trie_token_[node];
        match_end = j + 1;
      }
    }
    if (match < 0) {
      ++i;
      continue;
    }
    if (types_[match] != TokenType::UserDefined && !parse_special) {
      i = match_end;
      continue;
    }
    if (i > fragment_start)
      encode_fragment(text.substr(fragment_start, i - fragment_start), fragment_start == 0, out, word_cache);
    out.push_back(match);
    i = fragment_start = match_end;
  }
  if (fragment_start < text.size())
    encode_fragment(text.substr(fragment_start), fragment_start == 0, out, word_cache);

  if (add_eos && eos_ >= 0) out.push_back(eos_);
  return out;
}

void Tokenizer::encode_fragment(std::string_view text, bool at_start, std::vector<int32_t>& out,
                                std::unordered_map<std::string, std::vector<int32_t>>& word_cache) const {
  if (byte_level_) {
    if (nfc_) {
      std::string normalized = nfc_normalize(text);
      encode_byte_level(normalized, out, word_cache);
    } else {
      encode_byte_level(text, out, word_cache);
    }
  } else {
    encode_sentencepiece(text, at_start, out);
  }
}

std::optional<BpeMerge> Tokenizer::find_merge(int32_t left, int32_t right) const {
  if (!merges_.empty()) {
    const BpeMerge* m = merges_.find(left, right);
    if (!m) return std::nullopt;
    return *m;
  }
  // No merges list: sentencepiece's rule, the merged piece with the best score.
  if (scores_.empty()) return std::nullopt;
  int32_t id = id_of_text_.find(texts_[left] + texts_[right]);
  if (id < 0 || types_[id] != TokenType::Normal) return std::nullopt;
  return BpeMerge{-static_cast<double>(scores_[id]), id};
}

void Tokenizer::encode_byte_level(std::string_view text, std::vector<int32_t>& out,
                                  std::unordered_map<std::string, std::vector<int32_t>>& word_cache) const {
  std::vector<std::string_view> words;
  pre_tokenizer_->split(text, words);
  auto find = [this](int32_t a, int32_t b) { return find_merge(a, b); };
  std::vector<int32_t> symbols;
  for (std::string_view word : words) {
    auto cached = word_cache.find(std::string(word));
    if (cached != word_cache.end()) {
      out.insert(out.end(), cached->second.begin(), cached->second.end());
      continue;
    }
    symbols.clear();
    for (unsigned char b : word) {
      int32_t id = byte_token_[b] >= 0 ? byte_token_[b] : unk_;
      if (id >= 0) symbols.push_back(id);  // a vocab without this byte: nothing to emit
    }
    bpe_merge(symbols, find);
    out.insert(out.end(), symbols.begin(), symbols.end());
    word_cache.emplace(std::string(word), symbols);
  }
}

void Tokenizer::encode_sentencepiece(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  std::string normalized;
  normalized.reserve(text.size() + 8);
  if (add_space_prefix_ && at_start) normalized += kSpace;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpace;
    } else {
      normalized += c;
    }
  }
  // One symbol per character; characters missing from the vocab fall back to bytes.
  std::vector<int32_t> symbols;
  symbols.reserve(normalized.size());
  for (size_t i = 0; i < normalized.size();) {
    size_t len = std::min(utf8_length(static_cast<unsigned char>(normalized[i])), normalized.size() - i);
    if (int32_t id = id_of_text_.find(std::string_view(normalized).substr(i, len)); id >= 0) {
      symbols.push_back(id);
    } else {
      for (size_t k = 0; k < len; ++k) {
        int32_t id = byte_token_[static_cast<unsigned char>(normalized[i + k])];
        if (id < 0) id = unk_;
        if (id >= 0) symbols.push_back(id);
      }
    }
    i += len;
  }
  bpe_merge(symbols, [this](int32_t a, int32_t b) { return find_merge(a, b); });
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace zinc::text
