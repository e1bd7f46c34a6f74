// The grouped experts' kernels for a few tokens (moe_few.cu), launched by
// moe_grouped.cu while the experts average at most six tokens (kFewUpToPerExpert).
#pragma once

#include <cuda_fp16.h>

#include "backend/cuda/kernels.h"

namespace zinc::cuda {

// Tokens of one expert per tile: one mma n-tile.
inline constexpr int kFewTileTokens = 8;

// The routed experts' rows as the grouped kernels (moe_grouped.cu's and these) read them.
struct ExpertRows {
  const uint8_t* gate;  // {d, ff, E}
  const uint8_t* up;
  const uint8_t* down;  // {ff, d, E}
  size_t gate_row_bytes, down_row_bytes;
  ExpertGlu glu;
  const float* down_bias;  // {d, E}, or null
};
inline ExpertRows expert_rows(const ExpertWeights& ex) {
  return {static_cast<const uint8_t*>(ex.gate.data), static_cast<const uint8_t*>(ex.up.data),
          static_cast<const uint8_t*>(ex.down.data), ex.gate.row_bytes(), ex.down.row_bytes(), expert_glu_of(ex),
          ex.down_bias.as<const float>()};
}

// One tile of the pairs in expert order: its expert, first sorted position, pairs.
struct ExpertTile {
  int expert, pos0, count;
};

struct MoeFewArgs {
  const __half* xb;          // {d, n}: to_f16_pairs' f16
  const int32_t* sorted;     // pair indices in expert order
  const ExpertTile* tiles;   // [*tile_count]
  const int32_t* tile_count;
  __half* act;               // {ff, pairs} in expert order, f16 pairs
  float* out;                // {d, pairs} in pair order
  int max_tiles;             // a bound on *tile_count, for the grids
};

// Whether moe_few_launch takes these experts for inputs of d (types, shapes, Hopper).
bool moe_few_takes(const ExpertWeights& ex, int64_t d);
// gate + up + GLU into act, then down into out, over the tiles.
void moe_few_launch(const ExpertWeights& ex, int d, int k, const MoeFewArgs& a, cudaStream_t s);

}  // namespace zinc::cuda
