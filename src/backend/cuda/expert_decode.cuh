// Building blocks of the decode (few-token) expert kernels in moe.cu and
// shared_expert_decode.cu: weight rows copied to shared memory with cp.async, and
// row · x dot products read from there.
//
// A block stages all of its weight rows at once (cp.async needs no registers, so an
// SM keeps tens of KB in flight) and then dequantizes them from shared memory. A
// block's rows of one expert are contiguous in memory, so each expert's rows are one
// span, copied as the 16-byte chunks that cover it: the span keeps its misalignment
// (start % 16) in shared memory, so Dequant<T>::load8's alignment assumptions hold.
//
// Dot products go by runs of 32 consecutive elements (lane-owned), so a block
// format's scales (one per 16, 32 or 256 elements) are decoded once per run or
// less, and a run's minimum (Q4_K, Q5_K) is applied once per run through the run's
// Σx: Σ (dl·c − ml)·x = dl·Σ c·x − ml·Σ x. Activations sit in shared memory as
// float4 chunks with the 8 chunks of a run XOR-swizzled, so the lanes reading 8
// consecutive runs hit 8 different banks.
#pragma once

#include <initializer_list>

#include "backend/cuda/act_q16.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/warp_stream.cuh"

namespace zinc::cuda {

inline constexpr int kExpertThreads = 256;
inline constexpr int kExpertWarps = kExpertThreads / 32;

// Bytes of shared memory a span of `bytes` takes at any alignment.
__host__ __device__ inline size_t span_slot_bytes(size_t bytes) { return (bytes + 15) / 16 * 16 + 16; }

// Starts copying the 16-byte chunks that cover [src, src + bytes) to dst (16-byte
// aligned), spread over the block's threads; returns where src's first byte lands.
// The last chunk may read up to 15 bytes past the span (device buffers are
// allocated in whole 16-byte units).
__device__ __forceinline__ const uint8_t* stage_span(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const int mis = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
  const uint8_t* first = src - mis;
  const int chunks = static_cast<int>((mis + bytes + 15) / 16);
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) cp_async16(dst + 16 * c, first + 16 * c);
  return dst + mis;
}

// On Hopper a span whose both ends are 16-byte aligned can instead be one bulk copy
// (the copy engine), issued by one thread and counted on an mbarrier: a block's
// tens of kilobytes then cost a few instructions instead of one per 16 bytes.
#if __CUDA_ARCH__ >= 900
inline constexpr bool kBulkSpans = true;
#else
inline constexpr bool kBulkSpans = false;
#endif

// Whether every span of rows of these weights is bulk-copyable: the device is a
// Hopper (or later) and the weights and their rows are 16-byte aligned.
inline bool spans_bulk_copyable(std::initializer_list<const void*> weights, size_t row_bytes) {
  bool aligned = row_bytes % 16 == 0;
  for (const void* w : weights) aligned = aligned && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  return hopper_or_later() && aligned;
}

// Waits for a group of spans: its mbarrier (bulk), or the cp.async groups but the
// newest (first of two) or all of them.
__device__ __forceinline__ void wait_spans(bool bulk, uint64_t* bar, bool first_of_two) {
#if __CUDA_ARCH__ >= 900
  if (bulk) return mbarrier_wait(bar, 0);
#endif
  (void)bulk, (void)bar;
  first_of_two ? cp_async_wait<1>() : cp_async_wait<0>();
}

// Chunk c (4 floats) of a swizzled activation row: runs keep their 8 chunks, rotated.
__device__ __forceinline__ int swizzled_chunk(int c) { return c ^ ((c >> 3) & 7); }

// Formats whose runs carry a scale and a minimum (Q4_K, Q5_K): their dot products
// need the sum of each run of the activations (stage_run_sums).
template <DType T>
inline constexpr bool kHasRunScales = requires(const uint8_t* r) { Dequant<T>::run(r, 0); };

// kHasRunScales<t> for a runtime type, for sizing shared memory on the host.
inline bool has_run_scales(DType t) {
  bool has = false;
  dispatch_weight_type(t, [&](auto type) { has = kHasRunScales<decltype(type)::value>; });
  return has;
}

// xsum[t · runs + q] = the sum of run q of activation row t (rows swizzled, 8 · runs
// chunks each), added in a fixed order. Needs the rows written and a barrier.
__device__ __forceinline__ void stage_run_sums(const float4* xs, int rows, int runs, float* xsum) {
  for (int i = threadIdx.x; i < rows * runs; i += blockDim.x) {
    const float4* x = xs + 8 * i;
    const int rot = (i % runs) & 7;  // as in run_dot: neighbouring runs read different banks
    float s = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 a = x[j ^ rot];
      s += (a.x + a.y) + (a.z + a.w);
    }
    xsum[i] = s;
  }
}

// acc[t] += the run q (elements 32q .. 32q + 31) of `row` · x_t, x_t at xs + t · x_chunks
// and its run sums at xsum + t · x_chunks / 8 (read only for kHasRunScales<T>).
template <DType T, int kMaxX>
__device__ __forceinline__ void run_dot(const uint8_t* row, int q, const float4* xs, const float* xsum, int x_chunks,
                                        int nx, float (&acc)[kMaxX]) {
  const int rot = q & 7;
  const auto dot8 = [&](const float* v, int t, int j) {
    const float4* x = xs + t * x_chunks + 8 * q;
    const float4 a = x[(2 * j) ^ rot], b = x[(2 * j + 1) ^ rot];
    return v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
  };
  if constexpr (kHasRunScales<T>) {
    // Scale and minimum decoded once per run, applied once per run.
    const KRun r = Dequant<T>::run(row, 32 * q);
    float s[kMaxX] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[8];
      Dequant<T>::run_codes8(r, 8 * j, v);
#pragma unroll
      for (int t = 0; t < kMaxX; ++t)
        if (t < nx) s[t] += dot8(v, t, j);
    }
#pragma unroll
    for (int t = 0; t < kMaxX; ++t)
      if (t < nx) acc[t] += r.dl * s[t] - r.ml * xsum[t * (x_chunks / 8) + q];
  } else if constexpr (requires(float* v) { Dequant<T>::codes8(row, 0, v); }) {
    // One scale per 8 elements, applied once.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[8];
      const float scale = Dequant<T>::codes8(row, 32 * q + 8 * j, v);
#pragma unroll
      for (int t = 0; t < kMaxX; ++t)
        if (t < nx) acc[t] += scale * dot8(v, t, j);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[8];
      Dequant<T>::load8(row, 32 * q + 8 * j, v);
#pragma unroll
      for (int t = 0; t < kMaxX; ++t)
        if (t < nx) acc[t] += dot8(v, t, j);
    }
  }
}

// Activations as 16-bit integers (act_q16.cuh) for rows of K-quants with a scale and
// minimum per run (Q4_K, Q5_K): a lane takes a 64-element chunk, whose two runs'
// codes share their bytes, and meets them with DP4A.
template <DType T>
inline constexpr bool kQ16Chunks = T == DType::Q4_K || T == DType::Q5_K;

// An activation row in shared memory: the hi and lo words (uint4 chunks, 2 per run
// of 32, swizzled as swizzled_chunk), each run's scale and s·Σ q.
struct Q16Row {
  uint4 *hi, *lo;
  float *scale, *sum;
  __device__ Q16Row(void* at, int d)
      : hi(static_cast<uint4*>(at)),
        lo(hi + d / 16),
        scale(reinterpret_cast<float*>(lo + d / 16)),
        sum(scale + d / 32) {}
  static constexpr size_t bytes(int d) { return static_cast<size_t>(d) * 2 + static_cast<size_t>(d) / 32 * 8; }
};

// Quantizes x {d} (d a multiple of 128) into `row`, one float4 per thread in turn for
// threads [first, first + threads) of the block (whole warps).
__device__ __forceinline__ void stage_q16_row(const float* x, int d, int first, int threads, const Q16Row& row) {
  const auto* x4 = reinterpret_cast<const float4*>(x);
  for (int i = threadIdx.x - first; i < d / 4; i += threads) {  // d / 4 is a multiple of 32: whole warps
    float scale;
    const Q16Words w = q16_quantize4(x4[i], scale);
    int q = q16_sum4(w);
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const int c = swizzled_chunk(i / 4) * 4 + i % 4;  // word of the swizzled chunks
    reinterpret_cast<uint32_t*>(row.hi)[c] = w.hi;
    reinterpret_cast<uint32_t*>(row.lo)[c] = w.lo;
    if (i % 8 == 0) row.scale[i / 8] = scale, row.sum[i / 8] = scale * static_cast<float>(q);
  }
}

// The codes of chunk j (elements 64j .. 64j + 63) of a Q4_K / Q5_K block as bytes:
// run 2j in a, run 2j + 1 in b. The block is 16-byte aligned.
template <DType T>
__device__ __forceinline__ void k_chunk_codes(const uint8_t* block, int j, uint32_t (&a)[8], uint32_t (&b)[8]) {
  constexpr int kQs = T == DType::Q4_K ? 16 : 48;
  const auto* qs = reinterpret_cast<const uint4*>(block + kQs + 32 * j);
  const uint4 q0 = qs[0], q1 = qs[1];
  const uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) a[i] = w[i] & 0x0F0F0F0Fu, b[i] = (w[i] >> 4) & 0x0F0F0F0Fu;
  if constexpr (T == DType::Q5_K) {  // the fifth bits: bit r of byte l is element l of run r
    const auto* qh = reinterpret_cast<const uint4*>(block + 16);
    const uint4 h0 = qh[0], h1 = qh[1];
    const uint32_t h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      a[i] |= ((h[i] >> (2 * j)) & 0x01010101u) << 4;
      b[i] |= ((h[i] >> (2 * j + 1)) & 0x01010101u) << 4;
    }
  }
}

// Chunk c (elements 64c .. 64c + 63) of a Q4_K / Q5_K row in shared memory · x, one
// run after the other (fewer live registers).
template <DType T>
__device__ __forceinline__ float chunk_dot_q16(const uint8_t* row, int c, const Q16Row& x) {
  uint32_t codes[2][8];
  k_chunk_codes<T>(row + (c / 4) * Dequant<T>::kBlockBytes, c % 4, codes[0], codes[1]);
  float v = 0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    uint32_t xh[8], xl[8];
#pragma unroll
    for (int k = 0; k < 2; ++k) {  // the run's two chunks
      const uint4 h = x.hi[swizzled_chunk(4 * c + 2 * r + k)], l = x.lo[swizzled_chunk(4 * c + 2 * r + k)];
      xh[4 * k] = h.x, xh[4 * k + 1] = h.y, xh[4 * k + 2] = h.z, xh[4 * k + 3] = h.w;
      xl[4 * k] = l.x, xl[4 * k + 1] = l.y, xl[4 * k + 2] = l.z, xl[4 * k + 3] = l.w;
    }
    const KRun run = Dequant<T>::run(row, 64 * c + 32 * r);
    const float dot = static_cast<float>(q16_dot<8>(codes[r], xh, xl));
    v += run.dl * x.scale[2 * c + r] * dot - run.ml * x.sum[2 * c + r];
  }
  return v;
}

// Dot products of the block's rows [begin, end) (each `in` elements) with up to
// kMaxX activation rows, out[i · kMaxX + t]. row_at(i, row, xs, xsum) gives row i in
// shared memory, its activations and their run sums (stage_run_sums). A row of fewer
// than 32 runs takes only that many lanes (when it divides 32), so a warp does
// several short rows per pass.
template <DType T, int kMaxX, class RowAt>
__device__ __forceinline__ void rows_dot_staged(int begin, int end, int in, int nx, int x_chunks, const RowAt& row_at,
                                                float* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, runs = in / 32;
  const int lanes_per_row = runs >= 32 || 32 % runs != 0 ? 32 : runs, per_pass = 32 / lanes_per_row;
  const int sub = lane % lanes_per_row;
  for (int first = begin + warp * per_pass; first < end; first += kExpertWarps * per_pass) {
    const int i = first + lane / lanes_per_row;
    float acc[kMaxX] = {};
    if (i < end) {
      const uint8_t* row;
      const float4* xs;
      const float* xsum;
      row_at(i, row, xs, xsum);
      for (int q = sub; q < runs; q += lanes_per_row) run_dot<T, kMaxX>(row, q, xs, xsum, x_chunks, nx, acc);
    }
#pragma unroll
    for (int t = 0; t < kMaxX; ++t)
      for (int o = lanes_per_row / 2; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
    if (sub == 0 && i < end) {
#pragma unroll
      for (int t = 0; t < kMaxX; ++t)
        if (t < nx) out[i * kMaxX + t] = acc[t];
    }
  }
}

}  // namespace zinc::cuda
