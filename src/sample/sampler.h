// The sampler chain: turns one row of next-token logits into a token id.
//
// Order, fixed and documented because it changes the result:
//   1. penalties: first DRY over the last `dry_penalty_last_n` accepted tokens (a
//      token that would extend a repeat of n >= dry_allowed_length tokens loses
//      dry_multiplier * dry_base^(n - dry_allowed_length)); then, over the last
//      `penalty_last_n`, repetition (positive logits divided by it, negative ones
//      multiplied), then frequency (times the token's count) and presence (once)
//      subtracted;
//   2. temperature <= 0: greedy argmax of the penalised logits (lowest id on ties);
//   3. truncation on the penalised logits at temperature 1: top-k, then top-p
//      (smallest prefix of the sorted candidates whose probability reaches p), then
//      min-p (drop candidates less likely than min_p times the most likely one);
//   4. temperature last: softmax(logit / T) over the survivors, and a seeded draw.
// The draw uses std::mt19937_64 and its own uniform mapping (the std distributions
// differ between standard libraries), so one seed gives one output everywhere.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

#include "backend/row_sampling.h"

namespace zinc {

struct SamplerParams {
  float temperature = 0.8f;      // <= 0: greedy
  int top_k = 40;                // <= 0: off
  float top_p = 0.95f;           // >= 1: off
  float min_p = 0.05f;           // <= 0: off
  float repeat_penalty = 1.0f;   // 1: off
  float frequency_penalty = 0;   // 0: off
  float presence_penalty = 0;    // 0: off
  int penalty_last_n = 64;       // how many recent tokens the penalties look at
  // DRY ("don't repeat yourself"): penalises continuing a sequence seen before.
  float dry_multiplier = 0;      // 0: off
  float dry_base = 1.75f;
  int dry_allowed_length = 2;    // repeats shorter than this cost nothing
  int dry_penalty_last_n = -1;   // how many recent tokens DRY looks at; -1: all of them, 0: off
  std::vector<int32_t> dry_breakers;  // tokens a repeat may not span (newline, ':', '"', '*')
  uint64_t seed = 0;
};

struct Candidate {
  int32_t id;
  float logit;
};

// ---- the stages, usable on their own -----------------------------------------------
// In place on a full logits row; `recent` holds the tokens to penalise (repeats count).
void apply_penalties(std::span<float> logits, std::span<const int32_t> recent, float repeat_penalty,
                     float frequency_penalty, float presence_penalty);
// In place on a full logits row; `history` holds the tokens seen, oldest first. For
// each earlier occurrence of the history's last n tokens (n as long as it matches,
// no breaker among them), the token that followed it, unless a breaker, loses
// multiplier * base^(n - allowed_length) when n >= allowed_length, using its
// longest such n (capped so the logit stays finite).
void apply_dry(std::span<float> logits, std::span<const int32_t> history, float multiplier, float base,
               int allowed_length, std::span<const int32_t> breakers);
// Index of the largest logit, the lowest on ties.
int32_t argmax(std::span<const float> logits);
// Each keeps the candidates sorted by logit, highest first (sorting them if needed),
// and never removes the most likely one.
void keep_top_k(std::vector<Candidate>& candidates, int k);
// keep_top_k's result for a whole logits row, 1 <= k <= row.size(), into `out`,
// without a candidate per token (one pass over the row).
void top_k_of_row(std::span<const float> row, int k, std::vector<Candidate>& out);
void keep_top_p(std::vector<Candidate>& candidates, float p);
void keep_min_p(std::vector<Candidate>& candidates, float min_p);
// softmax(logit / temperature) over the candidates, in their order.
std::vector<double> candidate_probabilities(std::span<const Candidate> candidates, float temperature);
// Index i with probability probs[i], from one uniform number in [0, 1).
size_t draw_index(std::span<const double> probs, double uniform);
// Stages 3 and 4: with top-k on, top_k_of_row, keep_top_p, min-p's cut at the best
// logit + s.log_min_p (keep_min_p's); with top-k off (0) or over the whole row, the
// same top-p and min-p over the whole row without sorting all of it (top-k off with
// neither: every token in id order); then softmax(logit / T) and draw_index at
// s.uniform.
// Backend::sample_rows' reference, after penalise_row.
int32_t draw_from_row(std::span<const float> row, const RowSampling& s);
// Whether Backend::sample_rows declines the row (row_sampling.h): top-k off, more
// than kMaxRowTopK tokens, and neither top-p's prefix (probabilities over the whole
// row) nor min-p's cut ends among the kMaxRowTopK best.
bool row_draw_declined(std::span<const float> row, const RowSampling& s);
// Stage 1 without DRY, in place: apply_penalties over s's window (s.recent, then
// `id` when s.recent_then_id). Nothing when s carries no window.
void penalise_row(std::span<float> row, const RowSampling& s, int32_t id);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);

  // The next token for this logits row ({n_vocab} floats). Does not accept it.
  int32_t sample(std::span<const float> logits);
  // Records a token (prompt or generated) for the penalties.
  void accept(int32_t token);
  // True when sample(row) is argmax(row) for every row (greedy, no penalties): the
  // caller may then take the argmax where the logits are (the GPU) and skip the row.
  bool picks_argmax() const { return params_.temperature <= 0 && !uses_penalties() && !uses_dry(); }
  // True when sample(row) is penalise_row then draw_from_row with next_row_sampling()
  // for every row of n_vocab logits (greedy as top-1, top-k at most kMaxRowTopK, or
  // top-k off with top-p or min-p on; no DRY; penalties over at most kMaxRowRecent
  // tokens): the caller may then draw where the logits are (Backend::sample_rows).
  bool draws_from_row(int64_t n_vocab) const;
  // True when such a draw may be declined (top-k off: row_sampling.h); the caller then
  // reads the penalised row and finishes with draw_from_row and the same parameters.
  bool may_decline() const { return params_.temperature > 0 && params_.top_k <= 0; }
  // The parameters of the next draw; consumes the random number that sample() would
  // (none when greedy). With penalties they carry the accepted tokens' window; with
  // then_id, for a step queued before its fed token is read and accepted, one token
  // fewer, and the backend adds the token it holds (RowSampling::recent_then_id).
  RowSampling next_row_sampling(bool then_id = false);
  // Forgets the history (the random stream goes on).
  void reset_history() {
    recent_.clear();
    dry_history_.clear();
  }

  const SamplerParams& params() const { return params_; }

 private:
  bool uses_penalties() const;
  bool uses_dry() const { return params_.dry_multiplier != 0 && params_.dry_penalty_last_n != 0; }
  double next_uniform();
  RowSampling row_sampling(double uniform) const;

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;   // at most penalty_last_n tokens, oldest first
  std::vector<float> penalised_;  // reused copy of the logits row
  std::vector<int32_t> recent_buffer_;
  std::deque<int32_t> dry_history_;  // at most dry_penalty_last_n tokens (all when -1)
  std::vector<int32_t> dry_buffer_;
};

}  // namespace zinc
