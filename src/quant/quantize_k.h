// The K-quant quantizers (quantize_k.cpp), called by quantize_row.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace zinc {

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n_blocks);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n_blocks);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n_blocks);

}  // namespace zinc
