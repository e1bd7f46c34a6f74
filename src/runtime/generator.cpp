// The generation loop (see generator.h).
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace zinc {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The token reads of a generation drawn on the backend: step k's id lands in
// ids[k % 2]. Reads still in flight when generation ends (a step queued ahead of the
// reply's last token, or an error) are waited for, so that none lands after `ids` is
// gone.
struct BackendReads {
  Backend& backend;
  int32_t ids[2] = {-1, -1};
  uint64_t tickets[2] = {0, 0};
  ~BackendReads() {
    for (uint64_t t : tickets) try {
        backend.wait_read(t);
      } catch (...) {  // already failing: the error that got here is the one to report
      }
  }
};
}  // namespace

GenerationResult generate(Model& model, Backend& backend, SequenceState& seq, std::span<const int32_t> prompt,
                          Sampler& sampler, const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt needs at least one token");
  if (options.prefill_chunk < 1) throw std::invalid_argument("generate: prefill chunk must be >= 1");
  const int64_t room = seq.n_ctx - seq.n_past;
  if (static_cast<int64_t>(prompt.size()) > room)
    throw std::invalid_argument("generate: prompt of " + std::to_string(prompt.size()) +
                                " tokens does not fit in the " + std::to_string(room) + " context positions left");
  const int64_t n_vocab = model.n_vocab();
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab) throw std::invalid_argument("generate: token id " + std::to_string(t) + " out of range");

  GenerationResult result;
  std::vector<float> logits(n_vocab);
  // A sampler that the backend can run (greedy, or top-k, with or without penalties;
  // Sampler::draws_from_row) has its token drawn on the backend into seq.sampled_id,
  // which the next step reads there; only the id comes back. A step's draw parameters
  // are written before its forward pass (a write inside the pass would end the
  // backend's graph replay); a step queued before its fed token is read leaves that
  // token, still in seq.sampled_id, for the backend to add to the penalties' window.
  const bool on_backend = sampler.draws_from_row(n_vocab);
  // A draw the backend may decline (top-k off) goes one step at a time: the host reads
  // each id, and draws from the penalised row itself when the backend left it.
  const bool declinable = on_backend && sampler.may_decline();
  const bool ahead = on_backend && !declinable;  // steps queued before their fed token is read
  const bool draws = on_backend && !sampler.picks_argmax();  // sample_rows, not argmax
  if (ahead && seq.sampled_id.empty()) seq.sampled_id = backend.alloc_persistent(DType::I32, {1});
  if (draws && seq.row_params.empty()) seq.row_params = backend.alloc_persistent(DType::I32, {kRowSamplingWords, 1});
  BackendReads reads{backend};
  RowSampling params;  // the last draw's, as written
  const auto next_draw = [&](bool fed_token_unread) {
    if (!draws) return;
    params = sampler.next_row_sampling(fed_token_unread);
    backend.write(seq.row_params, &params, sizeof(params));
  };
  const auto queue_draw = [&](const Tensor& l, int slot) {
    pick_on_backend(backend, l, draws ? &seq.row_params : nullptr, seq.sampled_id);
    reads.tickets[slot] = backend.read_async(seq.sampled_id, &reads.ids[slot], sizeof(int32_t));
  };
  const auto host_sample = [&](const Tensor& l) {
    if (declinable) {
      const int32_t id = backend_picks(backend, l, &seq.row_params)[0];
      if (id >= 0) return id;
      backend.read(l, logits.data(), logits.size() * sizeof(float));  // penalised by sample_rows
      return draw_from_row(logits, params);
    }
    backend.read(l, logits.data(), logits.size() * sizeof(float));
    return sampler.sample(logits);
  };

  const auto prefill_start = Clock::now();
  Tensor last_logits;
  for (int32_t t : prompt) sampler.accept(t);
  next_draw(false);
  for (size_t offset = 0; offset < prompt.size(); offset += options.prefill_chunk) {
    const size_t n = std::min<size_t>(options.prefill_chunk, prompt.size() - offset);
    last_logits = model.forward(seq, prompt.subspan(offset, n), 1);
  }
  int32_t token = -1;
  if (ahead) queue_draw(last_logits, 0);
  else token = host_sample(last_logits);
  // The prompt's time ends when its first token is in: here, or (drawn on the
  // backend) at step 0.
  auto decode_start = Clock::now();
  const auto prompt_done = [&] {
    result.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
    result.stats.prompt_seconds = seconds_since(prefill_start);
    decode_start = Clock::now();
  };
  bool prompt_timed = !ahead;
  if (prompt_timed) prompt_done();

  const auto is_eog = [&](int32_t t) {
    return std::find(options.eog_ids.begin(), options.eog_ids.end(), t) != options.eog_ids.end();
  };
  static const int32_t kFedOnBackend = 0;  // sizes a step's chunk: its id is seq.sampled_id
  const SequenceChunk fed_step{&seq, std::span(&kFedOnBackend, 1), 1, &seq.sampled_id};
  bool absorbed = false;  // the token being taken was fed to a step already queued
  result.stop = StopReason::MaxTokens;
  for (int64_t k = 0; static_cast<int64_t>(result.tokens.size()) < options.max_tokens; ++k) {
    if (ahead) {
      // Step k + 1 goes before token k is read unless token k would be the budget's
      // last or has no room left in the context.
      const int slot = static_cast<int>(k % 2);
      absorbed = static_cast<int64_t>(result.tokens.size()) + 1 < options.max_tokens && seq.n_past < seq.n_ctx;
      if (absorbed) {
        next_draw(true);  // token k is read and accepted below
        queue_draw(model.forward_batch(std::span(&fed_step, 1)), 1 - slot);
      }
      backend.wait_read(reads.tickets[slot]);
      token = reads.ids[slot];
      if (!prompt_timed) {
        prompt_done();
        prompt_timed = true;
      }
    }
    sampler.accept(token);
    if (is_eog(token)) {
      result.stop = StopReason::EndOfGeneration;
      result.end_token = token;
      result.end_absorbed = absorbed;
      break;
    }
    result.tokens.push_back(token);
    if (!on_token(token)) {
      result.stop = StopReason::Callback;
      break;
    }
    if (absorbed) continue;
    if (static_cast<int64_t>(result.tokens.size()) == options.max_tokens) break;
    if (seq.n_past >= seq.n_ctx) {
      result.stop = StopReason::ContextFull;
      break;
    }
    // Only a host or declinable draw gets here: a step drawn on the backend that did
    // not run ahead was the last.
    if (declinable) next_draw(false);  // before the pass: token is accepted
    token = host_sample(model.forward(seq, std::span<const int32_t>(&token, 1), 1));
  }
  if (!prompt_timed) {  // no token was wanted (max_tokens 0)
    backend.wait_read(reads.tickets[0]);
    prompt_done();
  }
  if (result.stop != StopReason::EndOfGeneration && !result.tokens.empty() && !absorbed)
    result.not_absorbed.push_back(result.tokens.back());
  result.stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.generation_seconds = seconds_since(decode_start);
  return result;
}

void pick_on_backend(Backend& backend, const Tensor& logits, const Tensor* params, const Tensor& ids) {
  if (params) backend.sample_rows(logits, *params, ids);
  else backend.argmax(logits, ids);
}

std::vector<int32_t> backend_picks(Backend& backend, const Tensor& logits, const Tensor* params) {
  const Tensor ids = backend.scratch(DType::I32, {logits.rows()});
  pick_on_backend(backend, logits, params, ids);
  std::vector<int32_t> out(static_cast<size_t>(logits.rows()));
  backend.read(ids, out.data(), out.size() * sizeof(int32_t));
  return out;
}

std::vector<int32_t> greedy_on_device(Model& model, Backend& backend, SequenceState& seq, const Tensor& next,
                                      int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::vector<uint64_t> tickets(tokens.size());
  const int32_t count_one = 0;  // only sizes the chunk: its id comes from `next`
  const SequenceChunk step{&seq, std::span(&count_one, 1), 1, &next};
  for (size_t i = 0; i < tokens.size(); ++i) {
    backend.argmax(model.forward_batch(std::span(&step, 1)), next);
    tickets[i] = backend.read_async(next, &tokens[i], sizeof(int32_t));
    if (i > 0) backend.wait_read(tickets[i - 1]);
  }
  if (!tickets.empty()) backend.wait_read(tickets.back());
  return tokens;
}

}  // namespace zinc
