// The gated delta rule on the CPU, in its two exact forms: the one-token recurrence
// (decode) and the chunked WY form (prefill), which turns most of the work into
// small matrix products. Both must agree; tests hold them to it.
#pragma once

#include <cstdint>

namespace zinc::cpu {

struct DeltaRuleShape {
  int64_t n_tokens;
  int64_t n_heads;     // value heads H
  int64_t n_k_heads;   // key heads Hk; value head h reads key head h % Hk
  int64_t dk, dv;
};

// q, k: [n][Hk][dk]; v, y: [n][H][dv]; g, beta: [n][H]; state: [H][dk][dv] (in/out).
// Processes heads [h_begin, h_end) so callers can split heads across threads.
void delta_rule_recurrent(const DeltaRuleShape& s, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* state, float* y, int64_t h_begin,
                          int64_t h_end);
void delta_rule_chunked(const DeltaRuleShape& s, int64_t chunk, const float* q, const float* k,
                        const float* v, const float* g, const float* beta, float* state, float* y,
                        int64_t h_begin, int64_t h_end);

}  // namespace zinc::cpu
