// Tokenizer construction from GGUF metadata, and the id -> bytes side (decode).
#include <stdexcept>

#include "text/byte_level.h"
#include "text/tokenizer.h"

namespace zinc::text {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// Texts that end a turn across the chat formats zinc knows, besides eos / eot.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<eos>", "</s>", "<|endoftext|>", "<|end_of_text|>",
    "<|return|>", "<|call|>", "<EOT>", "<|eom_id|>",
};

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit = c >= '0' && c <= '9' ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->model_ = file.get_string_or("tokenizer.ggml.model", "");
  if (t->model_ == "gpt2") {
    t->byte_level_ = true;
    t->pre_ = file.get_string_or("tokenizer.ggml.pre", "default");
    t->pre_tokenizer_ = PreTokenizer::by_name(t->pre_);
    t->nfc_ = t->pre_ == "qwen2" || t->pre_ == "qwen35";
  } else if (t->model_ == "llama") {
    t->byte_level_ = false;
    t->pre_ = file.get_string_or("tokenizer.ggml.pre", "default");
    t->add_space_prefix_ = file.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  } else {
    throw std::runtime_error(file.path() + ": unsupported tokenizer.ggml.model '" + t->model_ +
                             "' (zinc supports gpt2 and llama)");
  }

  std::vector<std::string_view> tokens = file.get_string_array("tokenizer.ggml.tokens");
  const size_t n = tokens.size();
  std::vector<int64_t> types = file.has("tokenizer.ggml.token_type") ? file.get_int_array("tokenizer.ggml.token_type")
                                                                      : std::vector<int64_t>(n, 1);
  if (types.size() != n) throw std::runtime_error(file.path() + ": tokenizer.ggml.token_type has the wrong length");
  if (file.has("tokenizer.ggml.scores")) {
    std::vector<double> scores = file.get_float_array("tokenizer.ggml.scores");
    if (scores.size() != n) throw std::runtime_error(file.path() + ": tokenizer.ggml.scores has the wrong length");
    t->scores_.assign(scores.begin(), scores.end());
  }

  t->texts_.reserve(n);
  t->pieces_.reserve(n);
  t->types_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    t->texts_.emplace_back(tokens[i]);
    auto type = static_cast<TokenType>(types[i] >= 0 && types[i] <= 6 ? types[i] : 0);
    t->types_.push_back(type);
    std::string_view text = tokens[i];
    if (type == TokenType::Control || type == TokenType::Unknown) {
      t->pieces_.emplace_back(text);
    } else if (t->byte_level_) {
      t->pieces_.push_back(type == TokenType::UserDefined ? std::string(text) : byte_level_decode(text));
    } else if (int byte = parse_byte_token(text); type == TokenType::Byte && byte >= 0) {
      t->pieces_.emplace_back(1, static_cast<char>(byte));
    } else {
      t->pieces_.push_back(replace_all(text, kSpace, " "));
    }
  }
  t->id_of_text_.build(t->texts_);  // texts_ no longer changes

  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    if (t->byte_level_) {
      symbol = byte_level_encode(std::string(1, static_cast<char>(b)));
    } else {
      static const char* hex = "0123456789ABCDEF";
      symbol = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    }
    t->byte_token_[b] = t->id_of_text_.find(symbol);
  }
  t->load_merges(file);
  if (t->byte_level_ && t->merges_.empty())
    throw std::runtime_error(file.path() + ": gpt2 tokenizer without tokenizer.ggml.merges");

  auto special = [&](const char* key) {
    int64_t id = file.get_int_or(key, -1);
    return id >= 0 && static_cast<size_t>(id) < n ? static_cast<int32_t>(id) : -1;
  };
  t->bos_ = special("tokenizer.ggml.bos_token_id");
  t->eos_ = special("tokenizer.ggml.eos_token_id");
  t->eot_ = special("tokenizer.ggml.eot_token_id");
  t->unk_ = special("tokenizer.ggml.unknown_token_id");
  t->add_bos_ = file.get_bool_or("tokenizer.ggml.add_bos_token", !t->byte_level_) && t->bos_ >= 0;
  t->add_eos_ = file.get_bool_or("tokenizer.ggml.add_eos_token", false) && t->eos_ >= 0;
  t->chat_template_ = file.get_string_or("tokenizer.chat_template", "");

  for (int32_t id : {t->eos_, t->eot_})
    if (id >= 0) t->eog_.push_back(id);
  for (std::string_view text : kEndOfGenerationTexts) {
    int32_t id = t->id_of_text_.find(text);
    if (id >= 0 && t->types_[id] == TokenType::Control) t->eog_.push_back(id);
  }
  // Harmony (gpt-oss) closes every message with <|end|> but a reply only with
  // <|return|> or <|call|>: after <|end|> of its analysis message the final one follows.
  auto control = [&](std::string_view text) {
    int32_t id = t->id_of_text_.find(text);
    return id >= 0 && t->types_[id] == TokenType::Control ? id : -1;
  };
  if (int32_t end = control("<|end|>"); end >= 0 && control("<|return|>") >= 0 && control("<|call|>") >= 0)
    std::erase(t->eog_, end);
  t->index_added_tokens();
  return t;
}

void Tokenizer::load_merges(const gguf::GgufFile& file) {
  const gguf::Value* merges = file.find("tokenizer.ggml.merges");
  if (!merges) return;
  const size_t n = merges->array_size();
  merges_.reserve(n);
  std::string joined;
  for (size_t rank = 0; rank < n; ++rank) {
    std::string_view merge = merges->array_string(rank);
    // From position 1: a token may itself be a space in some vocabularies.
    size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos) continue;
    std::string_view left = merge.substr(0, space), right = merge.substr(space + 1);
    int32_t l = id_of_text_.find(left), r = id_of_text_.find(right);
    joined.assign(left).append(right);
    int32_t m = id_of_text_.find(joined);
    if (l < 0 || r < 0 || m < 0) continue;
    merges_.insert(l, r, BpeMerge{static_cast<double>(rank), m});  // the first (best) rank wins
  }
}

void Tokenizer::index_added_tokens() {
  trie_token_.assign(1, -1);
  for (size_t id = 0; id < texts_.size(); ++id) {
    TokenType type = types_[id];
    if (type != TokenType::Control && type != TokenType::UserDefined && type != TokenType::Unknown) continue;
    const std::string& text = texts_[id];
    if (text.empty()) continue;
    int32_t node = 0;
    for (unsigned char byte : text) {
      uint64_t key = static_cast<uint64_t>(node) << 8 | byte;
      auto [it, inserted] = trie_edges_.try_emplace(key, static_cast<int32_t>(trie_token_.size()));
      if (inserted) trie_token_.push_back(-1);
      node = it->second;
    }
    if (trie_token_[node] < 0) trie_token_[node] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    auto edge = trie_edges_.find(static_cast<uint64_t>(b));
    trie_root_[b] = edge == trie_edges_.end() ? -1 : edge->second;
  }
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary (" +
                            std::to_string(n_vocab()) + " tokens)");
}

std::string Tokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return pieces_[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return texts_[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return types_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  bool first_text = true;
  for (int32_t id : ids) {
    check_id(id);
    std::string_view piece = pieces_[id];
    // SentencePiece vocabularies that add a leading space take it off again.
    if (first_text && types_[id] != TokenType::Control) {
      first_text = false;
      if (add_space_prefix_ && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    }
    out += piece;
  }
  return out;
}

bool Tokenizer::is_eog(int32_t id) const {
  for (int32_t e : eog_)
    if (e == id) return true;
  return false;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  int32_t id = id_of_text_.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace zinc::text
