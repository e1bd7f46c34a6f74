// What `zinc run` and `zinc chat` share: their common options, loading a model with
// its tokenizer and chat template, rendering a conversation into prompt tokens,
// streaming generated tokens as text, and the speed line printed after a reply.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/text/reply_router.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/generator.h"
#include "sample/sampler.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace zinc::cli {

struct TextGenerationOptions {
  std::string model;
  std::string system;        // system message, when not empty
  int64_t max_tokens = 512;  // per reply
  int64_t ctx = 4096;        // context length (capped at the model's training length)
  int64_t ubatch = GenerateOptions{}.prefill_chunk;  // prompt tokens per forward pass
  int threads = 0;
  SamplerParams sampling;
  bool seed_given = false;
};

// Registers -m, -n, --ctx, -u, --threads, --system and the sampling options.
void add_text_generation_options(CLI::App& cmd, TextGenerationOptions& options);
// The sampler settings, with a fresh random seed unless --seed was given.
SamplerParams resolve_sampling(const TextGenerationOptions& options);

// A model ready to talk: the file (which must outlive the weights), the backend,
// the model, its tokenizer and, when the file has one, its chat template.
struct TextModel {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::string chat_template;  // empty when the file has none
  std::vector<int32_t> eog_ids;

  static TextModel load(const TextGenerationOptions& options);
  // The context length to use: the option, capped at the model's training length.
  int64_t context_length(int64_t requested) const;
  // The prompt the chat template makes of these messages, opening the assistant's turn.
  std::string render(const nlohmann::ordered_json& messages) const;
  // Prompt tokens of rendered template text: special tokens parsed, no BOS added
  // (a template writes its own BOS, as transformers' apply_chat_template assumes).
  std::vector<int32_t> encode_rendered(const std::string& rendered) const;
  // Runs a short prompt and three decode steps through the empty `seq` and empties it
  // again, so that the first reply pays none of a first pass's one-time costs: on a
  // GPU the kernels' lazy loading, the decode graph's capture and the scratch memory's
  // growth. Nothing on the CPU. A copy of `sampler` draws (the reply's kernels), so a
  // --seed reply is the same with or without it. `chat` warms up before its first
  // prompt, where the user's typing hides it; `run` does not, since nothing hides it
  // there (docs/PERFORMANCE.md, session 55).
  void warm_up(SequenceState& seq, const Sampler& sampler, int64_t prefill_chunk) const;
};

// Prints each token's text as soon as it forms whole characters: to stdout, or for a
// harmony reply the answer to stdout and the reasoning to stderr (see ReplyRouter).
class TextStreamer {
 public:
  TextStreamer(const text::Tokenizer& tokenizer, bool harmony);
  void push(int32_t token);
  void finish();  // writes what is held back

  const ReplyRouter& reply() const { return router_; }

 private:
  text::StreamDecoder decoder_;
  ReplyRouter router_;
};

// "prompt: N tokens, X tok/s | reply: M tokens, Y tok/s" on stderr.
void print_speed(const GenerationStats& stats);

}  // namespace zinc::cli
