// matmul_few's host-side shape rule (no GPU needed): at one token, rows longer than a
// team of 8 warps covers (16 chunks of 256) are split into equal parts of whole chunks.
#include <gtest/gtest.h>

#include "backend/cuda/kernels.h"

namespace zinc {
namespace {

TEST(MatmulFew, SplitsLongRowsAtOneTokenOnly) {
  EXPECT_EQ(cuda::matmul_few_splits(2048, 1), 1);
  EXPECT_EQ(cuda::matmul_few_splits(4096, 1), 1);   // 16 chunks: a team of 8, two a warp
  EXPECT_EQ(cuda::matmul_few_splits(12288, 1), 3);  // Qwen3-8B's down projection: 48 = 3 x 16
  EXPECT_EQ(cuda::matmul_few_splits(14336, 1), 4);  // Llama 3 8B's: 56 = 4 x 14
  EXPECT_EQ(cuda::matmul_few_splits(6144, 1), 2);   // 24 = 2 x 12
  EXPECT_EQ(cuda::matmul_few_splits(18432, 1), 6);  // 72 = 6 x 12 (not 5: parts are equal)
  EXPECT_EQ(cuda::matmul_few_splits(3840, 1), 1);   // Gemma 3 12B's rows: 15 chunks, a ragged team of 8
  EXPECT_EQ(cuda::matmul_few_splits(15360, 1), 4);  // its down projection's: 60 = 4 x 15, ragged
  EXPECT_EQ(cuda::matmul_few_splits(5376, 1), 3);   // Gemma 3 27B's: 21 = 3 x 7
  EXPECT_EQ(cuda::matmul_few_splits(12288, 2), 1);  // several tokens: never split
}

}  // namespace
}  // namespace zinc
