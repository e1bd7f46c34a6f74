// fill_random_blocks: synthetic tensor data for random-weight models, fast enough to
// write a 20 GiB file in a couple of minutes. Every byte of a block is drawn from a
// counter-based generator, then the scale fields are overwritten with sane values
// (fp16 d chosen so the dequantized values have the requested std, jittered per
// block by +-25% so kernels that mix up blocks show it).
//
// Determinism contract: the bytes depend only on (type, seed, stream) and the
// element's position inside the call, so a call for n elements writes a prefix of
// what a call for more elements writes. Callers that split a tensor among threads
// must split it the same way whatever the thread count (e.g. fixed row ranges) and
// pass the range index as `stream`.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace zinc {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// splitmix64's finalizer: a bijective mix with full avalanche.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t stream_key(uint64_t seed, uint64_t stream) { return mix64(seed ^ mix64(stream ^ 0x5851f42d4c957f2dull)); }

inline uint64_t random_word(uint64_t key, uint64_t index) { return mix64(key + index * kGolden); }

// Bytes [first_byte, first_byte + n) of the stream; first_byte is a multiple of 8.
void fill_random_bytes(uint64_t key, uint64_t first_byte, uint8_t* dst, size_t n) {
  const uint64_t first_word = first_byte / 8;
  const size_t words = n / 8;
  for (size_t i = 0; i < words; ++i) {
    const uint64_t w = random_word(key, first_word + i);
    std::memcpy(dst + 8 * i, &w, 8);
  }
  if (n % 8 != 0) {
    const uint64_t w = random_word(key, first_word + words);
    std::memcpy(dst + 8 * words, &w, n % 8);
  }
}

// Mean of v^2 over a value table: the mean square of a uniformly random code.
template <typename T, size_t N>
constexpr double mean_square(const T (&values)[N], double offset = 0) {
  double s = 0;
  for (size_t i = 0; i < N; ++i) s += (values[i] - offset) * (values[i] - offset);
  return s / N;
}

// Mean square of (q - offset) for q uniform in 0..levels-1.
constexpr double code_mean_square(int levels, double offset) {
  double s = 0;
  for (int q = 0; q < levels; ++q) s += (q - offset) * (q - offset);
  return s / levels;
}

// Mean square of sc * q - r * m for independent uniform sc, m in 0..scale_levels-1 and
// q in 0..code_levels-1, with r = E[q] so the mean is zero (the K-quants' dmin = r * d).
constexpr double affine_k_mean_square(int scale_levels, int code_levels) {
  const double r = (code_levels - 1) / 2.0;
  const double e_s = (scale_levels - 1) / 2.0, e_s2 = code_mean_square(scale_levels, 0);
  const double e_q = r, e_q2 = code_mean_square(code_levels, 0);
  return e_s2 * e_q2 - 2 * r * e_s * e_q * e_s + r * r * e_s2;
}

constexpr double kInt8MeanSquare = code_mean_square(256, 128);  // int8 codes, -128..127

// Jittered scale values, indexed by 4 random bits already present in the block.
struct ScaleTable {
  uint16_t d[16];
  uint16_t aux[16];  // dmin, or the offset m of Q4_1 / Q5_1
  float d_value[16];
};

ScaleTable make_scale_table(float scale, double unit_mean_square, double aux_ratio) {
  constexpr float kMaxHalf = 65504.0f;
  double jitter_mean_square = 0;
  for (int k = 0; k < 16; ++k) jitter_mean_square += std::pow(0.75 + k / 30.0, 2) / 16;
  const double d_target = scale / std::sqrt(unit_mean_square * jitter_mean_square);
  ScaleTable t{};
  for (int k = 0; k < 16; ++k) {
    const double d = std::min(d_target * (0.75 + k / 30.0), kMaxHalf / std::max(1.0, std::fabs(aux_ratio)));
    t.d[k] = fp32_to_fp16(static_cast<float>(d));
    t.d_value[k] = fp16_to_fp32(t.d[k]);
    t.aux[k] = fp32_to_fp16(static_cast<float>(d * aux_ratio));
  }
  return t;
}

constexpr int64_t kChunkBlocks = 256;  // random bytes then fix-ups, while in cache

template <typename Block, typename FixUp>
void fill_blocks(uint64_t key, void* dst, int64_t n_blocks, FixUp fix_up) {
  static_assert((kChunkBlocks * sizeof(Block)) % 8 == 0);
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t start = 0; start < n_blocks; start += kChunkBlocks) {
    const int64_t count = std::min(kChunkBlocks, n_blocks - start);
    fill_random_bytes(key, static_cast<uint64_t>(start) * sizeof(Block), reinterpret_cast<uint8_t*>(blocks + start),
                      static_cast<size_t>(count) * sizeof(Block));
    for (int64_t b = start; b < start + count; ++b) fix_up(blocks[b]);
  }
}

// Blocks whose only scale is an fp16 d at the front or back.
template <typename Block>
void fill_d_only(uint64_t key, void* dst, int64_t nb, float scale, double unit_mean_square) {
  const ScaleTable t = make_scale_table(scale, unit_mean_square, 0);
  fill_blocks<Block>(key, dst, nb, [&](Block& b) { b.d = t.d[b.d & 15]; });
}

// Blocks with an fp16 d and a second fp16 field (dmin or m) tied to it.
template <typename Block, uint16_t Block::*Aux>
void fill_d_aux(uint64_t key, void* dst, int64_t nb, float scale, double unit_mean_square, double aux_ratio) {
  const ScaleTable t = make_scale_table(scale, unit_mean_square, aux_ratio);
  fill_blocks<Block>(key, dst, nb, [&](Block& b) {
    const int k = b.d & 15;
    b.d = t.d[k];
    b.*Aux = t.aux[k];
  });
}

void fill_q8_1(uint64_t key, void* dst, int64_t nb, float scale) {
  const ScaleTable t = make_scale_table(scale, kInt8MeanSquare, 0);
  fill_blocks<BlockQ8_1>(key, dst, nb, [&](BlockQ8_1& b) {
    const int k = b.d & 15;
    int sum = 0;
    for (int8_t q : b.qs) sum += q;
    b.d = t.d[k];
    b.s = fp32_to_fp16(static_cast<float>(sum) * t.d_value[k]);
  });
}

void fill_q8_k(uint64_t key, void* dst, int64_t nb, float scale) {
  const ScaleTable t = make_scale_table(scale, kInt8MeanSquare, 0);
  fill_blocks<BlockQ8_K>(key, dst, nb, [&](BlockQ8_K& b) {
    b.d = t.d_value[std::bit_cast<uint32_t>(b.d) & 15];
    for (int g = 0; g < kBlockK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
  });
}

// E8M0 scales are powers of two: half the blocks get 2^k, half 2^(k-1).
void fill_mxfp4(uint64_t key, void* dst, int64_t nb, float scale) {
  const double d_target = scale / std::sqrt(mean_square(kMxfp4Values));
  const double pair_rms = std::sqrt((1.0 + 0.25) / 2);  // rms of {1, 1/2}
  // e8m0_half(e) = 2^(e - 128); e <= 250 keeps 12 * 2^(e - 128) finite.
  const int e =
      d_target > 0 ? std::clamp(static_cast<int>(std::lround(std::log2(d_target / pair_rms))) + 128, 1, 250) : 1;
  fill_blocks<BlockMXFP4>(key, dst, nb, [&](BlockMXFP4& b) { b.e = static_cast<uint8_t>(e - (b.e & 1)); });
}

// Plain floats: element i is the sum of the four random bytes 4i..4i+3, minus their
// mean: a bell-shaped stand-in for a gaussian (std sqrt(4 * (256^2 - 1) / 12) = 147.8).
// Worked in chunks so the arithmetic loop vectorizes.
template <typename Store>
void fill_plain(uint64_t key, int64_t n, float scale, Store store) {
  constexpr int64_t kChunk = 1024;
  const float unit = scale / 147.80054f;
  uint32_t random[kChunk];
  float values[kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    fill_random_bytes(key, static_cast<uint64_t>(start) * 4, reinterpret_cast<uint8_t*>(random),
                      static_cast<size_t>(count) * 4);
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t u = random[i];
      const uint32_t pairs = (u & 0x00ff00ffu) + ((u >> 8) & 0x00ff00ffu);
      values[i] = static_cast<float>(static_cast<int32_t>((pairs & 0xffff) + (pairs >> 16)) - 510) * unit;
    }
    store(start, values, count);
  }
}

}  // namespace

void fill_random_blocks(DType t, uint64_t seed, uint64_t stream, void* dst, int64_t n, float scale) {
  const TypeTraits& tt = type_traits(t);
  if (n < 0 || n % tt.block_elems != 0)
    throw std::invalid_argument("fill_random_blocks: " + std::to_string(n) + " elements is not a whole number of " +
                                std::string(tt.name) + " blocks");
  if (!(scale >= 0) || !std::isfinite(scale))
    throw std::invalid_argument("fill_random_blocks: scale must be finite and >= 0");
  const uint64_t key = stream_key(seed, stream);
  const int64_t nb = n / tt.block_elems;
  auto* bytes = static_cast<uint8_t*>(dst);
  auto store_f32 = [bytes](int64_t start, const float* v, int64_t count) {
    std::memcpy(bytes + 4 * start, v, static_cast<size_t>(count) * 4);
  };
  auto store_f16 = [bytes](int64_t start, const float* v, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const uint16_t h = float_to_half_bits(v[i]);
      std::memcpy(bytes + 2 * (start + i), &h, 2);
    }
  };
  auto store_bf16 = [bytes](int64_t start, const float* v, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const uint16_t h = float_to_bf16_bits(v[i]);
      std::memcpy(bytes + 2 * (start + i), &h, 2);
    }
  };

  switch (t) {
    case DType::F32: return fill_plain(key, n, scale, store_f32);
    case DType::F16: return fill_plain(key, n, scale, store_f16);
    case DType::BF16: return fill_plain(key, n, scale, store_bf16);
    case DType::Q4_0: return fill_d_only<BlockQ4_0>(key, dst, nb, scale, code_mean_square(16, 8));
    case DType::Q5_0: return fill_d_only<BlockQ5_0>(key, dst, nb, scale, code_mean_square(32, 16));
    case DType::Q8_0: return fill_d_only<BlockQ8_0>(key, dst, nb, scale, kInt8MeanSquare);
    case DType::IQ4_NL: return fill_d_only<BlockIQ4_NL>(key, dst, nb, scale, mean_square(kIq4nlValues));
    case DType::Q4_1:
      return fill_d_aux<BlockQ4_1, &BlockQ4_1::m>(key, dst, nb, scale, code_mean_square(16, 7.5), -7.5);
    case DType::Q5_1:
      return fill_d_aux<BlockQ5_1, &BlockQ5_1::m>(key, dst, nb, scale, code_mean_square(32, 15.5), -15.5);
    case DType::Q8_1: return fill_q8_1(key, dst, nb, scale);
    case DType::Q2_K:
      return fill_d_aux<BlockQ2_K, &BlockQ2_K::dmin>(key, dst, nb, scale, affine_k_mean_square(16, 4), 1.5);
    case DType::Q4_K:
      return fill_d_aux<BlockQ4_K, &BlockQ4_K::dmin>(key, dst, nb, scale, affine_k_mean_square(64, 16), 7.5);
    case DType::Q5_K:
      return fill_d_aux<BlockQ5_K, &BlockQ5_K::dmin>(key, dst, nb, scale, affine_k_mean_square(64, 32), 15.5);
    case DType::Q3_K:  // six-bit scale - 32 times a code in -4..3
      return fill_d_only<BlockQ3_K>(key, dst, nb, scale, code_mean_square(64, 32) * code_mean_square(8, 4));
    case DType::Q6_K:  // int8 scale times a code in -32..31
      return fill_d_only<BlockQ6_K>(key, dst, nb, scale, kInt8MeanSquare * code_mean_square(64, 32));
    case DType::IQ4_XS:
      return fill_d_only<BlockIQ4_XS>(key, dst, nb, scale, code_mean_square(64, 32) * mean_square(kIq4nlValues));
    case DType::Q8_K: return fill_q8_k(key, dst, nb, scale);
    case DType::MXFP4: return fill_mxfp4(key, dst, nb, scale);
    case DType::F64:
    case DType::I8:
    case DType::I16:
    case DType::I32:
    case DType::I64: break;
  }
  throw std::invalid_argument("fill_random_blocks: no random data for type " + std::string(tt.name));
}

}  // namespace zinc
