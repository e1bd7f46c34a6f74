// One row's parameters for Backend::sample_rows: the sampler chain without
// penalties (sample/sampler.h), with its random number drawn by the host so that a
// seed gives the same tokens wherever the row is sampled. Laid out as 8 I32 words,
// the shape of the parameter tensor.
#pragma once

#include <cstdint>

namespace zinc {

inline constexpr int kMaxRowTopK = 128;  // the largest top-k a backend samples

struct RowSampling {
  double uniform = 0;    // the draw, in [0, 1)
  double log_min_p = 0;  // log(min-p): candidates below the best's logit + this go; -inf: off
  float top_p = 1;       // >= 1: off
  float temperature = 1; // > 0
  int32_t top_k = 1;     // 1 .. kMaxRowTopK, below the vocabulary size
  int32_t unused = 0;
};
static_assert(sizeof(RowSampling) == 8 * sizeof(int32_t));

}  // namespace zinc
