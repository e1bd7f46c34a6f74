// The generation loop: prefill a prompt into a sequence in chunks, then decode one
// token at a time with a sampler until an end-of-generation token, a token budget,
// a full context, or the caller says stop. Knows token ids only (the tokenizer lives
// in the text layer), so end-of-generation ids are passed in.
//
// A sampler that the backend runs (greedy or top-k, penalties included; not DRY) has
// its tokens drawn on the backend (argmax or Backend::sample_rows), and its steps run
// one ahead: step k + 1 is queued, fed on the backend with step k's token, before
// step k's token is read, so the host's reading and streaming overlap the device's
// next step (as zinc bench and the serving engine decode). Only a step that may not
// be needed (the token budget's or the context's last) waits for its token first. A
// reply that the end-of-generation token or the callback ends has therefore fed that
// token to the sequence; the result says so.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "runtime/sequence.h"
#include "sample/sampler.h"

namespace zinc {

struct GenerateOptions {
  int64_t max_tokens = 256;     // tokens to generate at most
  // Prompt tokens per forward call. Each call reads every routed expert's weights
  // once, so longer chunks read less per token (H200, the flagship's pp8192: 24.7k
  // tokens/s in chunks of 2048, 27.5k in 4096, 29.3k in 8192), for about 355 KB of GPU
  // scratch a token (1.5 GB at 4096; docs/PERFORMANCE.md, session 48).
  int64_t prefill_chunk = 4096;
  std::vector<int32_t> eog_ids;  // sampling one of these ends the reply (not streamed)
};

enum class StopReason { EndOfGeneration, MaxTokens, Callback, ContextFull };

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prompt_seconds = 0;      // prefill, up to the first logits
  double generation_seconds = 0;  // sampling and decoding after that

  double prompt_tokens_per_second() const { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0; }
  double generation_tokens_per_second() const {
    return generation_seconds > 0 ? generated_tokens / generation_seconds : 0;
  }
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // every streamed token, in order
  // Streamed tokens the sequence has not absorbed: the last one when generation stops
  // for any reason but end-of-generation (feeding it would only serve a token nobody
  // asked for). A conversation that goes on feeds these first.
  std::vector<int32_t> not_absorbed;
  StopReason stop = StopReason::EndOfGeneration;
  // With StopReason::EndOfGeneration: the token that ended the reply (not streamed),
  // and whether the sequence absorbed it (a step after it was already queued).
  int32_t end_token = -1;
  bool end_absorbed = false;
  GenerationStats stats;
};

// Called with each generated token as soon as it is sampled; returning false stops.
using TokenCallback = std::function<bool(int32_t token)>;

// Absorbs `prompt` (at least one token) into `seq` after what it already holds, then
// generates. Every prompt and generated token is also accepted by the sampler (for
// its penalties). Throws std::invalid_argument when the prompt does not fit in the
// context that is left.
GenerationResult generate(Model& model, Backend& backend, SequenceState& seq, std::span<const int32_t> prompt,
                          Sampler& sampler, const GenerateOptions& options, const TokenCallback& on_token);

// ids (I32 {n}) = each row's token of logits {V, n} picked on the backend: drawn by
// sample_rows with `params` (a RowSampling per row), or the argmax (lowest id on ties,
// as the sampler's greedy pick) when params is null.
void pick_on_backend(Backend& backend, const Tensor& logits, const Tensor* params, const Tensor& ids);
// The same, with only the n ids read back.
std::vector<int32_t> backend_picks(Backend& backend, const Tensor& logits, const Tensor* params = nullptr);

// n greedy steps from the token in `next` (I32 {1} in backend memory), each step's
// argmax written back to `next` and fed to the step after on the backend; the host
// reads each token one step behind, so its work for a step overlaps the step before.
// Returns the n tokens; `next` ends holding the last.
std::vector<int32_t> greedy_on_device(Model& model, Backend& backend, SequenceState& seq, const Tensor& next,
                                      int64_t n);

}  // namespace zinc
