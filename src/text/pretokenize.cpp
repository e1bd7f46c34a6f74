// PCRE2-backed pre-tokenizers. The regexes are those of the models' Hugging Face
// tokenizer.json files (ByteLevel's built-in one for gpt2 and smollm).
#include "text/pretokenize.h"

#include <pcre2.h>

#include <stdexcept>

namespace zinc::text {

namespace {

// HF ByteLevel(use_regex=true), GPT-2's split.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3: case-insensitive contractions, digits in groups of up to three.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2 / Qwen3: as Llama 3 but one digit per piece.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: Qwen2's with combining marks kept inside words.
constexpr const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o / gpt-oss (tiktoken's o200k): a word is upper/title-case letters then
// lower-case ones (either run may be empty, not both), so "HelloWorld" is two words;
// marks and caseless letters fit both runs, a contraction is the word's suffix,
// digits group by three, and a punctuation run keeps trailing newlines and slashes.
constexpr const char* kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Per-thread scratch so one PreTokenizer can serve many threads.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = [this] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(c, nullptr, stack);
    return c;
  }();
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

std::vector<std::string> PreTokenizer::regexes_of(std::string_view name) {
  if (name == "gpt2" || name == "default") return {kGpt2};
  if (name == "llama3" || name == "llama-bpe") return {kLlama3};
  if (name == "qwen2") return {kQwen2};
  if (name == "qwen35") return {kQwen35};
  if (name == "gpt-4o" || name == "o200k") return {kO200k};
  if (name == "smollm") return {R"(\p{N})", kGpt2};  // HF: Digits(individual) then ByteLevel
  throw std::runtime_error("unsupported pre-tokenizer '" + std::string(name) +
                           "' (known: gpt2, gpt-4o, o200k, llama3, llama-bpe, qwen2, qwen35, smollm)");
}

std::unique_ptr<PreTokenizer> PreTokenizer::by_name(std::string_view name) {
  return std::make_unique<PreTokenizer>(regexes_of(name));
}

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const std::string& pattern : regexes) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto stage = std::make_unique<Compiled>();
    // MATCH_INVALID_UTF: arbitrary bytes are legal input; invalid ones never match
    // and so end up as pieces of their own.
    stage->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!stage->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw std::runtime_error("bad pre-tokenizer regex at " + std::to_string(offset) + ": " +
                               reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(stage->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    stages_.push_back(std::move(stage));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  MatchScratch& s = scratch();
  std::vector<std::string_view> current{text}, next;
  for (const auto& stage : stages_) {
    next.clear();
    for (std::string_view piece : current) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t gap_start = 0, offset = 0;
      while (offset < piece.size()) {
        int rc = pcre2_match(stage->code, subject, piece.size(), offset, 0, s.data, s.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw std::runtime_error("pre-tokenizer regex failed (" + std::to_string(rc) + ")");
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
        size_t start = ov[0], end = ov[1];
        if (end == start) {  // none of our regexes match empty; guard against looping anyway
          offset = start + 1;
          continue;
        }
        if (start > gap_start) next.push_back(piece.substr(gap_start, start - gap_start));
        next.push_back(piece.substr(start, end - start));
        gap_start = offset = end;
      }
      if (gap_start < piece.size()) next.push_back(piece.substr(gap_start));
    }
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
}

}  // namespace zinc::text
