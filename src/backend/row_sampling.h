// One row's parameters for Backend::sample_rows: the sampler chain without DRY
// (sample/sampler.h): the repetition, frequency and presence penalties over the row's
// recent tokens, then top-k, top-p, min-p and the draw, with its random number drawn
// by the host so that a seed gives the same tokens wherever the row is sampled. Laid
// out as kRowSamplingWords I32 words, the row of the parameter tensor.
//
// With top-k off, top-p and min-p act on the whole row, and a backend draws only
// rows whose survivors lie among the row's kMaxRowTopK best tokens; it declines the
// others (row_draw_declined: id -1, the row left penalised), which the caller then
// draws on the host from that row with the same parameters (draw_from_row).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace zinc {

// log(sum of exp(logits)) of a row: its max, plus the log of the sum of exp(logit -
// max) in double. The host's logprobs and Backend::token_logprobs use it.
inline double row_log_z(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return max + std::log(sum);
}

inline constexpr int kMaxRowTopK = 128;    // the largest top-k a backend samples
inline constexpr int kMaxRowRecent = 256;  // the longest penalty window a backend applies

struct RowSampling {
  double uniform = 0;    // the draw, in [0, 1)
  double log_min_p = 0;  // log(min-p): candidates below the best's logit + this go; -inf: off
  float top_p = 1;       // >= 1: off
  float temperature = 1; // > 0
  int32_t top_k = 1;     // 1 .. kMaxRowTopK, below the vocabulary size; 0: off
  // The penalties (apply_penalties) over recent[0, n_recent), oldest first, followed
  // by the row's id on entry to sample_rows when recent_then_id is 1: a step queued
  // before the host has read the token it is fed finds that token there. n_recent
  // 0 and recent_then_id 0: no penalties.
  int32_t n_recent = 0;
  float repeat_penalty = 1;
  float frequency_penalty = 0;
  float presence_penalty = 0;
  int32_t recent_then_id = 0;
  int32_t reserved[4] = {};
  int32_t recent[kMaxRowRecent] = {};
};
inline constexpr int kRowSamplingWords = static_cast<int>(sizeof(RowSampling) / sizeof(int32_t));
static_assert(sizeof(RowSampling) == (16 + kMaxRowRecent) * sizeof(int32_t));

}  // namespace zinc
