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
}  // namespace

GenerationResult generate(Model& model, Backend& backend, SequenceState& seq, std::span<const int32_t> prompt,
                          Sampler& sampler, const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt needs at least one token");
  if (options.prefill_chunk < 1) throw std::invalid_argument("generate: prefill chunk must be >= 1");
  const int64_t room = seq.n_ctx - seq.n_past;
  if (static_cast<int64_t>(prompt.size()) > room)
    throw std::invalid_argument("generate: prompt of " + std::to_string(prompt.size()) + " tokens does not fit in the " +
                                std::to_string(room) + " context positions left");
  const int64_t n_vocab = model.n_vocab();
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab) throw std::invalid_argument("generate: token id " + std::to_string(t) + " out of range");

  GenerationResult result;
  std::vector<float> logits(n_vocab);
  // The next token from a forward pass's logits: a greedy sampler's argmax is taken on
  // the backend and only the id is read, not n_vocab floats.
  const bool on_backend = sampler.picks_argmax();
  const auto next_token = [&](const Tensor& l) {
    if (on_backend) return backend_argmax(backend, l)[0];
    backend.read(l, logits.data(), logits.size() * sizeof(float));
    return sampler.sample(logits);
  };

  const auto prefill_start = Clock::now();
  Tensor last_logits;
  for (size_t offset = 0; offset < prompt.size(); offset += options.prefill_chunk) {
    const size_t n = std::min<size_t>(options.prefill_chunk, prompt.size() - offset);
    last_logits = model.forward(seq, prompt.subspan(offset, n), 1);
  }
  for (int32_t t : prompt) sampler.accept(t);
  int32_t token = next_token(last_logits);  // waits for the prompt's last pass
  result.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  result.stats.prompt_seconds = seconds_since(prefill_start);

  const auto decode_start = Clock::now();
  const auto is_eog = [&](int32_t t) {
    return std::find(options.eog_ids.begin(), options.eog_ids.end(), t) != options.eog_ids.end();
  };
  result.stop = StopReason::MaxTokens;
  while (static_cast<int64_t>(result.tokens.size()) < options.max_tokens) {
    sampler.accept(token);
    if (is_eog(token)) {
      result.stop = StopReason::EndOfGeneration;
      break;
    }
    result.tokens.push_back(token);
    if (!on_token(token)) {
      result.stop = StopReason::Callback;
      break;
    }
    if (static_cast<int64_t>(result.tokens.size()) == options.max_tokens) break;
    if (seq.n_past >= seq.n_ctx) {
      result.stop = StopReason::ContextFull;
      break;
    }
    token = next_token(model.forward(seq, std::span<const int32_t>(&token, 1), 1));
  }
  if (result.stop != StopReason::EndOfGeneration && !result.tokens.empty())
    result.not_absorbed.push_back(result.tokens.back());
  result.stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.generation_seconds = seconds_since(decode_start);
  return result;
}

std::vector<int32_t> backend_argmax(Backend& backend, const Tensor& logits) {
  const Tensor ids = backend.scratch(DType::I32, {logits.rows()});
  backend.argmax(logits, ids);
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
