// Helpers for model tests: writing tiny synthetic models and comparing logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/synth.h"

namespace zinc::test {

// Writes (once per build tree) the synthetic model for these options and seed
// into the test cache dir and returns its path.
std::string synth_model(const synth::Options& opt, uint64_t seed);

// 64-bit FNV-1a of a file's bytes (the oracle goldens record it).
uint64_t fnv1a64_file(const std::string& path);

struct LogitStats {
  double top1_agreement = 0;  // fraction of positions whose argmax agrees
  double mean_kl = 0;         // mean KL(reference || test) of the softmax distributions
  double max_abs_diff = 0;
};
// ref and got: n rows of V logits each.
LogitStats compare_logits(const std::vector<float>& ref, const std::vector<float>& got, int64_t V);

}  // namespace zinc::test
