// The CPU backend's dot products. lane_dot keeps 32 partial sums, one per vector lane
// (element i goes to lane i % 32), so it runs as wide as the machine's vectors at
// every width with the same result. row_dot is lane_dot of a quantized row with x,
// dequantized block by block as it goes instead of written out first: the same float
// operations in the same order, so the two agree bit for bit (tests hold them to it),
// whichever way row_dot takes.
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace zinc::cpu {

double lane_dot(const float* a, const float* b, int64_t n);

// out[r] = lane_dot(a, b + r · b_stride, n) for r < count: attention's scores. Several
// rows' 32 lane sums are reduced side by side, each in lane_dot's order, so the bits
// are lane_dot's and the reductions' add chains overlap.
void lane_dots(const float* a, const float* b, int64_t b_stride, int64_t count, int64_t n, double* out);

// acc[j] += w[r] · b[r · b_stride + j] for j < n, the rows r = 0 .. count - 1 in turn,
// in double: attention's weighted sum of values, at the machine's vector width.
void add_weighted_rows(const double* w, const float* b, int64_t b_stride, int64_t count, int64_t n, double* acc);

// y[j · y_stride] = lane_dot(dequantize_row(t, row), x + j · x_stride) for the
// n_tokens tokens j, over n elements (a multiple of t's block). On a CPU with AVX2 or
// AVX-512 the block formats, and F32, F16 and BF16 rows a multiple of 32 long, decode
// the row once for every four tokens; other rows (F64, plain rows of other lengths),
// and every row elsewhere, are written out once and take lane_dot.
void row_dot(DType t, const void* row, const float* x, int64_t x_stride, int64_t n_tokens, int64_t n, float* y,
             int64_t y_stride);

}  // namespace zinc::cpu
