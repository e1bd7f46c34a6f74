// Perplexity over chunks (see perplexity.h).
#include "runtime/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace zinc {

double Perplexity::ppl() const { return scored > 0 ? std::exp(nll / static_cast<double>(scored)) : NAN; }

double Perplexity::ppl_error() const {
  if (scored < 2) return NAN;
  const double n = static_cast<double>(scored), mean = nll / n, var = nll2 / n - mean * mean;
  return var > 0 ? ppl() * std::sqrt(var / (n - 1)) : 0.0;
}

Perplexity perplexity(Model& model, Backend& backend, std::span<const int32_t> tokens, const PerplexityOptions& o,
                      const std::function<void(const Perplexity&)>& on_chunk) {
  if (o.n_ctx < 4 || o.piece < 1) throw std::invalid_argument("perplexity: n_ctx must be >= 4 and piece >= 1");
  const int64_t n_ctx = o.n_ctx, have = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (have < 2)
    throw std::invalid_argument("perplexity needs at least " + std::to_string(2 * n_ctx) + " tokens for chunks of " +
                                std::to_string(n_ctx) + "; the text has " + std::to_string(tokens.size()));
  const int64_t n_chunks = o.max_chunks < 0 ? have : std::min(have, o.max_chunks);
  const int64_t first = n_ctx / 2;  // the first position whose logits are scored
  const auto t0 = std::chrono::steady_clock::now();
  SequenceState seq = model.new_sequence(n_ctx);
  Tensor ids = backend.alloc_persistent(DType::I32, {n_ctx});
  Tensor logprobs = backend.alloc_persistent(DType::F32, {n_ctx});
  std::vector<float> got;
  Perplexity p;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const std::span<const int32_t> targets = tokens.subspan(static_cast<size_t>(c * n_ctx), static_cast<size_t>(n_ctx));
    std::vector<int32_t> chunk(targets.begin(), targets.end());  // fed; what each position predicts: targets
    if (o.bos >= 0) chunk[0] = o.bos;
    seq.reset(backend);
    for (int64_t a = 0; a < n_ctx; a += o.piece) {
      const int64_t b = std::min(n_ctx, a + o.piece);
      // Logits for the piece's positions from `first` on, minus the chunk's last (nothing after it).
      const int64_t from = std::max(a, first), to = std::min(b, n_ctx - 1), n_out = std::max<int64_t>(0, to - from);
      if (n_out > 0) backend.write(ids, targets.data() + from + 1, static_cast<size_t>(n_out) * sizeof(int32_t));
      const Tensor logits = model.forward(
          seq, std::span<const int32_t>(chunk).subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)),
          n_out > 0 ? b - from : 0);
      if (n_out == 0) continue;
      // The rows of positions [from, b); the last one is dropped when b is the chunk's end.
      Tensor rows = logits, row_ids = ids, out = logprobs;
      rows.ne[1] = n_out, row_ids.ne[0] = n_out, out.ne[0] = n_out;
      backend.token_logprobs(rows, row_ids, out);
      got.resize(static_cast<size_t>(n_out));
      backend.read(out, got.data(), got.size() * sizeof(float));
      for (float lp : got) {
        p.nll -= lp;
        p.nll2 += static_cast<double>(lp) * lp;
      }
      p.scored += n_out;
    }
    ++p.chunks;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (on_chunk) on_chunk(p);
  }
  return p;
}

}  // namespace zinc
