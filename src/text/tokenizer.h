// Tokenizers built from GGUF metadata (llama.cpp's tokenizer.ggml.* keys).
//
// Two algorithms, chosen by tokenizer.ggml.model:
//   "gpt2"  byte-level BPE: split by the regex pre-tokenizer named in
//           tokenizer.ggml.pre, map every byte to one symbol, apply merges by rank.
//   "llama" SentencePiece-style BPE: spaces become U+2581, symbols are characters
//           (bytes through <0xXX> tokens when a character is not in the vocab),
//           pairs merge by tokenizer.ggml.merges rank when the file has merges
//           (zinc's converter writes them; that reproduces Hugging Face exactly),
//           else by the score of the merged piece (sentencepiece's rule).
// Added tokens (control, user-defined) are cut out of the text first, leftmost-
// longest, as Hugging Face does; control tokens only when parse_special is true.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"
#include "text/bpe.h"
#include "text/flat_index.h"
#include "text/pretokenize.h"

namespace zinc::text {

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

class Tokenizer {
 public:
  // Throws std::runtime_error naming what is missing or unsupported.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  ~Tokenizer();

  // add_bos / add_eos default to the file's tokenizer.ggml.add_bos_token / add_eos_token.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  std::vector<int32_t> encode(std::string_view text, bool parse_special, bool add_bos) const;
  std::vector<int32_t> encode(std::string_view text, bool parse_special, bool add_bos, bool add_eos) const;

  // Concatenated token bytes; may end inside a UTF-8 character (see StreamDecoder).
  std::string decode(std::span<const int32_t> ids) const;
  // Raw bytes of one token; control and user-defined tokens as their text.
  std::string token_bytes(int32_t id) const;
  // The token as stored in the file (byte-level or U+2581 spelling).
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;

  int32_t bos() const { return bos_; }  // -1 when the vocab has none
  int32_t eos() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool is_eog(int32_t id) const;  // eos, eot, <|im_end|>, <end_of_turn>, ...
  int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
  std::optional<int32_t> find_token(std::string_view text) const;
  std::string chat_template() const { return chat_template_; }
  const std::string& model_name() const { return model_; }
  const std::string& pre_name() const { return pre_; }
  // Leading space that SentencePiece vocabularies add and strip again on decode.
  bool add_space_prefix() const { return add_space_prefix_; }

 private:
  Tokenizer();
  std::optional<BpeMerge> find_merge(int32_t left, int32_t right) const;
  void load_merges(const gguf::GgufFile& file);
  void index_added_tokens();
  void encode_fragment(std::string_view text, bool at_start, std::vector<int32_t>& out,
                       std::unordered_map<std::string, std::vector<int32_t>>& word_cache) const;
  void encode_byte_level(std::string_view text, std::vector<int32_t>& out,
                         std::unordered_map<std::string, std::vector<int32_t>>& word_cache) const;
  void encode_sentencepiece(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  std::string model_;  // "gpt2" or "llama"
  std::string pre_;
  bool byte_level_ = true;
  bool nfc_ = false;  // Qwen's tokenizers NFC-normalize text before splitting
  std::vector<std::string> texts_;
  std::vector<std::string> pieces_;  // decoded bytes of each token
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  TextIndex id_of_text_;  // over texts_
  MergeTable merges_;
  int32_t byte_token_[256];                   // symbol for each byte
  std::unique_ptr<PreTokenizer> pre_tokenizer_;

  // Added tokens: a byte trie, edges keyed by (node << 8 | byte); the root's edges
  // also in an array, since most text bytes start no added token.
  std::unordered_map<uint64_t, int32_t> trie_edges_;
  int32_t trie_root_[256];
  std::vector<int32_t> trie_token_;  // token ending at each node, or -1

  int32_t bos_ = -1, eos_ = -1, eot_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
  std::vector<int32_t> eog_;
  std::string chat_template_;
};

}  // namespace zinc::text
