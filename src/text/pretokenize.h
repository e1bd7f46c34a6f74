// Regex pre-tokenizers of byte-level BPE vocabularies, by their tokenizer.ggml.pre
// name. Each is a chain of PCRE2 (UTF + UCP, JIT) regexes; every regex splits each
// piece the previous one produced into its matches and the gaps between them
// (Hugging Face's "Isolated" split behaviour).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::text {

class PreTokenizer {
 public:
  // Throws std::runtime_error for a name zinc does not know.
  static std::unique_ptr<PreTokenizer> by_name(std::string_view name);
  // The regex chain behind a name (used by the converter to recognise patterns).
  static std::vector<std::string> regexes_of(std::string_view name);
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of text, in order; together they cover text exactly.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> stages_;
};

}  // namespace zinc::text
