// The serving engine: many requests at once over one model (continuous batching).
//
// One engine thread owns the model and the backend. Each step it admits waiting
// requests into free slots (a slot is one SequenceState of n_ctx positions), then
// runs ONE forward pass over a batch made of every decoding sequence's next token
// plus prompt chunks of sequences still prefilling (up to step_tokens in all), so
// each weight is read once per step for all of them. It samples each sequence's
// next token with that request's own sampler (own seed, own history), so on the CPU
// a request's output does not depend on what else runs beside it. On a GPU the
// kernels differ with a step's token count, which moves logits in their last bits:
// a sampled draw near a boundary can differ (gpu-check saw it on two tiny MoE models).
//
// A sequence whose sampler the backend runs (greedy or top-k, with or without the
// repetition / frequency / presence penalties; no DRY, processors or logprobs) has its
// token drawn on the backend (Backend::sample_rows), so only the id is read back. When every active sequence
// decodes so, the engine queues each step before it reads the tokens of the step
// before, feeding those on the backend, so the host's work for a step overlaps the
// device's.
//
// Prefix reuse: prompts are absorbed in blocks of prefix_block tokens aligned to
// position 0; at each block end the engine copies the block's KV rows into the
// PrefixCache, and at some block ends the recurrent states too. A new request starts
// from the longest cached block prefix of its prompt that ends at such a checkpoint,
// and prefills only the rest. Chunks always end on block boundaries, so a resumed
// prompt runs the same computation as a fresh one and outputs are identical with the
// cache on or off.
//
// Callbacks run on the engine thread: they must return quickly (hand the event to
// the connection's thread) and must not call back into the engine except cancel().
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "sample/sampler.h"

namespace zinc {

// A per-request hook on the next-token logits, run before the sampler chain (and
// before logprobs): grammar masks, forced tokens. Implementations that need the
// vocabulary's text live outside the core (text/, server/).
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // Sets the logits of tokens that may not come next to -infinity. Leaving exactly
  // one finite logit forces that token.
  virtual void process(std::span<float> logits) = 0;
  // The token chosen for this step.
  virtual void accept(int32_t token) = 0;
};

// The most prompt positions whose logits one step of a scoring request computes.
inline constexpr int64_t kScoredRows = 128;

struct RequestOptions {
  std::vector<int32_t> prompt;  // at least one token; prompt.size() < n_ctx
  SamplerParams sampling;
  int64_t max_tokens = 256;     // capped by the context left; 0 only with prompt_logprobs (scoring alone)
  std::vector<int32_t> eog_ids; // sampling one ends the request; it is not streamed
  int top_logprobs = -1;        // -1: no logprobs; 0: the chosen token's; k (<= 20): and the k most likely
  // Scoring: also every prompt token's logprob after the first, given the tokens before
  // it, with max(top_logprobs, 0) alternatives (RequestCallbacks::on_prompt). Such a
  // prompt is computed whole, in chunks of at most kScoredRows tokens (each row is
  // n_vocab floats), so it neither resumes from nor fills the prefix cache, whose
  // states come from block-sized chunks.
  bool prompt_logprobs = false;
  std::vector<std::unique_ptr<LogitsProcessor>> processors;  // applied in order
};

struct TokenLogprob {
  int32_t id;
  float logprob;
};

struct TokenEvent {
  int32_t token;
  // When requested: log-softmax of the logits after the processors and before the
  // sampler chain (the model's own distribution, at temperature 1).
  float logprob = 0;
  std::vector<TokenLogprob> top;  // most likely first
};

enum class FinishReason {
  EndOfGeneration,  // an eog token was sampled
  Length,           // max_tokens, or the context is full
  Stopped,          // on_token returned false (stop string, client gone)
  Cancelled,        // cancel(), or the engine shut down
  Error,            // the forward pass threw; the message says why
};

struct RequestStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;     // prompt tokens restored from the prefix cache
  int64_t generated_tokens = 0;  // tokens streamed
  double queue_seconds = 0;      // submit to admission
  double prompt_seconds = 0;     // admission to the first token's logits
  double generation_seconds = 0; // first token to finish
};

struct RequestCallbacks {
  // Each generated token, in order; false ends the request with Stopped.
  std::function<bool(const TokenEvent&)> on_token;
  // Exactly once, last. `error` is empty unless reason is Error.
  std::function<void(FinishReason reason, const RequestStats& stats, const std::string& error)> on_finish;
  // With prompt_logprobs: prompt tokens 1 .. n - 1 in order, over one call per chunk,
  // all before the first on_token. The logprobs are the model's own (no processors).
  std::function<void(std::span<const TokenEvent>)> on_prompt;
};

struct EngineOptions {
  int n_parallel = 4;          // sequences in flight (slots)
  int64_t n_ctx = 4096;        // positions per sequence
  int64_t max_queue = 64;      // requests waiting for a slot; one more is refused
  // Prompts are absorbed in chunks of prefix_block (their last one shorter): on an H200
  // the flagship prefills 11.1k tokens/s in chunks of 256, 22.1k in chunks of 1024 and
  // 26.6k in chunks of 2048 (PERFORMANCE.md, session 47). A step of step_tokens delays
  // the decoding sequences beside a prefill by about that chunk's time.
  int64_t step_tokens = 2048;   // tokens per forward step, decode and prefill together
  int64_t prefix_block = 1024;  // prefix-cache granularity and prefill chunk alignment
  size_t prefix_cache_bytes = size_t{1} << 30;  // 0: no prefix cache
  // Recurrent states (far larger than a block's KV rows) are kept at block ends on a
  // multiple of this and at each prompt's last whole block: the points a later prompt
  // can resume from on a model with recurrent layers.
  int64_t prefix_checkpoint_tokens = 1024;
  // Before serving, a forward pass over a prompt of this many tokens (at most the
  // context allows) and three decode steps on a slot (reset, as always, when a request
  // takes it): what the first request would otherwise pay once (on a GPU: loading each
  // kernel's code at its first launch, growing the scratch memory, capturing the decode
  // step's graph) is paid by the constructor instead. 0: none.
  int64_t warm_up_tokens = 0;
};

// Raises o.step_tokens to the least the engine accepts: one prompt chunk (a block)
// beside every slot's decoding token.
inline void fit_step_tokens(EngineOptions& o) {
  o.step_tokens = std::max(o.step_tokens, o.prefix_block + o.n_parallel);
}

struct EngineMetrics {
  int64_t requests_total = 0, requests_running = 0, requests_waiting = 0;
  int64_t prompt_tokens_total = 0, cached_tokens_total = 0, generated_tokens_total = 0;
  double prompt_seconds_total = 0, generation_seconds_total = 0;
  size_t prefix_cache_bytes = 0;
  int64_t prefix_cache_entries = 0;      // blocks
  int64_t prefix_cache_checkpoints = 0;  // recurrent states among them
  double warm_up_seconds = 0;            // EngineOptions::warm_up_tokens' passes
};

// submit() when max_queue requests already wait.
class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Engine {
 public:
  // The model and backend must outlive the engine; nothing else may use them meanwhile.
  // Runs the warm-up (EngineOptions::warm_up_tokens) before it returns.
  Engine(Model& model, Backend& backend, const EngineOptions& options);
  ~Engine();  // cancels every request (their on_finish runs) and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns its id. Throws std::invalid_argument for an empty
  // prompt, a token id out of range or a prompt that leaves no room in n_ctx, and
  // QueueFull when the queue is full. Thread-safe.
  uint64_t submit(RequestOptions request, RequestCallbacks callbacks);
  // Ends a request at the next step (on_finish gets Cancelled). Unknown or finished
  // ids are ignored. Thread-safe; may be called from a callback.
  void cancel(uint64_t id);

  EngineMetrics metrics() const;
  const EngineOptions& options() const;
  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zinc
