// Per-sequence state that a forward pass reads and advances: a KV cache for each
// attention layer, and the conv and delta-rule states of each recurrent (GDN) layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace zinc {

struct LayerState {
  Tensor k_cache, v_cache;  // {head_dim, n_kv_heads, rows} F16: attention layers (rows: backend.h's kv_store)
  Tensor conv;              // {channels, kernel-1}: GDN layers
  Tensor delta;             // {dv, dk, heads} F32: GDN layers
};

struct SequenceState {
  int64_t n_ctx = 0;
  int64_t n_past = 0;  // tokens already absorbed
  std::vector<LayerState> layers;
  // I32 {1} in backend memory, allocated by the first generate() that draws on the
  // backend: the token a step picked there, which the next step reads from there.
  Tensor sampled_id;
  Tensor row_params;  // I32 {kRowSamplingWords, 1}: that draw's RowSampling, when sampled (not argmax)

  // Backend memory the state holds.
  size_t bytes() const {
    size_t total = 0;
    for (const auto& l : layers)
      for (const Tensor* t : {&l.k_cache, &l.v_cache, &l.conv, &l.delta})
        if (!t->empty()) total += t->nbytes();
    return total;
  }

  // Forget everything: the next forward starts at position 0.
  void reset(Backend& backend) {
    n_past = 0;
    for (auto& l : layers)
      for (Tensor* t : {&l.k_cache, &l.v_cache, &l.conv, &l.delta})
        if (!t->empty()) backend.zero(*t);
  }
};

}  // namespace zinc
