// A model's perplexity over a token stream, measured as llama.cpp's llama-perplexity
// measures it, so the two compare: the tokens cut into chunks of n_ctx (the last
// partial one dropped), each run from an empty sequence with its first token replaced
// by BOS when the vocabulary adds one, and each chunk's second half scored: the
// logprob of token j + 1 from the logits at position j, for j from n_ctx / 2 to
// n_ctx - 2. PPL = exp(mean negative logprob). The logprobs come from
// Backend::token_logprobs, so only one float a scored position leaves the device.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "backend/backend.h"
#include "model/model.h"

namespace zinc {

struct PerplexityOptions {
  int64_t n_ctx = 512;      // tokens per chunk, at least 4
  int64_t max_chunks = -1;  // -1: every whole chunk
  int32_t bos = -1;         // >= 0: each chunk's first token becomes this
  int64_t piece = 512;      // tokens per forward pass (each scored one's logits row is n_vocab floats)
};

struct Perplexity {
  int64_t chunks = 0;         // chunks done
  int64_t scored = 0;         // tokens scored
  double nll = 0, nll2 = 0;   // sums of the negative logprobs and of their squares
  double seconds = 0;
  double ppl() const;
  // llama-perplexity's "+/-": ppl · sqrt((the mean of nll² - the square of the mean nll) / (scored - 1)).
  double ppl_error() const;
};

// Throws std::invalid_argument when the tokens make fewer than two chunks (as
// llama-perplexity) or the options are out of range. on_chunk sees the sums after
// each chunk.
Perplexity perplexity(Model& model, Backend& backend, std::span<const int32_t> tokens, const PerplexityOptions& o,
                      const std::function<void(const Perplexity&)>& on_chunk = {});

}  // namespace zinc
