// The gated delta rule for prefill in its chunked (WY / UT) form, the CUDA twin of
// cpu::delta_rule_chunked: chunks of 64 tokens aligned to the call's first token, so
// a chunk's arithmetic depends only on its tokens and the incoming state (a prompt
// cut at the same positions reproduces bitwise). With G the in-chunk cumulative
// log-decay, per chunk and value head:
//   A = -diag(β) strict_lower(K Kᵀ ∘ e^{G_i-G_j}),  T = (I - A)^{-1}
//   U = T diag(β) V,  W = T diag(β e^G) K,  QK = lower(Q Kᵀ ∘ e^{G_i-G_j})
//   v' = U - W S,  y = (e^G Q) S + QK v',  S ← e^{G_last} S + (e^{G_last-G} K)ᵀ v'
// Two kernels: the first computes W, U, QK, G and the decayed q and k for every
// (chunk, head) at once; the second walks the chunks of a head in order carrying S
// (f32, in registers), one block per 32 value columns, its next chunk's tiles
// arriving by cp.async while it computes. Products run on tensor cores in tf32 (f32
// accumulate, about 7e-4 relative error against f64); T comes from blocked forward
// substitution in f32.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kChunk = 64;
constexpr int kThreads = 256;       // first kernel
constexpr int kStateThreads = 512;  // second kernel: 16 warps to hide the latencies of its serial chunk loop
constexpr int kCols = 32;           // value columns per block of the state pass

// ---- tf32 m16n8k8 fragments, read from f32 shared memory ------------------------
// Lane l holds rows g = l/4 (+8) and columns c = l%4 (+4) of A, k = c (+4) and n = g
// of B, and C elements (g (+8), 2c (+1)). Row strides are padded so that the reads
// of a warp hit distinct banks: 4 mod 32 floats for row-major A and "transposed" B,
// 8 mod 32 for row-major B and transposed A.
__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ int frag_g() { return static_cast<int>(threadIdx.x % 32) / 4; }
__device__ __forceinline__ int frag_c() { return static_cast<int>(threadIdx.x % 4); }

// A(m, k) = p[m * ld + k].
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const float* p, int ld) {
  const int g = frag_g(), c = frag_c();
  a[0] = tf32(p[g * ld + c]), a[1] = tf32(p[(g + 8) * ld + c]);
  a[2] = tf32(p[g * ld + c + 4]), a[3] = tf32(p[(g + 8) * ld + c + 4]);
}
// A(m, k) = p[k * ld + m].
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const float* p, int ld) {
  const int g = frag_g(), c = frag_c();
  a[0] = tf32(p[c * ld + g]), a[1] = tf32(p[c * ld + g + 8]);
  a[2] = tf32(p[(c + 4) * ld + g]), a[3] = tf32(p[(c + 4) * ld + g + 8]);
}
// B(k, n) = p[k * ld + n].
__device__ __forceinline__ void load_b(uint32_t (&b)[2], const float* p, int ld) {
  const int g = frag_g(), c = frag_c();
  b[0] = tf32(p[c * ld + g]), b[1] = tf32(p[(c + 4) * ld + g]);
}
// B(k, n) = p[n * ld + k].
__device__ __forceinline__ void load_b_trans(uint32_t (&b)[2], const float* p, int ld) {
  const int g = frag_g(), c = frag_c();
  b[0] = tf32(p[g * ld + c]), b[1] = tf32(p[g * ld + c + 4]);
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// Row and column (within a 16x8 tile) of accumulator element e.
__device__ __forceinline__ int acc_row(int e) { return frag_g() + 8 * (e / 2); }
__device__ __forceinline__ int acc_col(int e) { return 2 * frag_c() + e % 2; }

struct ChunkedParams {
  const float* q;  // {dk, Hk, n}
  const float* k;  // {dk, Hk, n}
  const float* v;  // {dv, H, n}
  const float* g;  // {H, n}
  const float* beta;
  float* state;  // {dv, dk, H}
  float* y;      // {dv, H, n}
  float* prep;   // per (head, chunk): Layout<DK, DV>
  int n, H, Hk, n_chunks;
};

// What the first kernel leaves for the second, per (head, chunk), row-major.
template <int DK, int DV>
struct Layout {
  static constexpr int64_t w = 0;                        // W {64 rows, DK}
  static constexpr int64_t u = w + kChunk * DK;          // U {64 rows, DV}
  static constexpr int64_t qk = u + kChunk * DV;         // QK {64, 64}
  static constexpr int64_t qd = qk + kChunk * kChunk;    // q_i e^{G_i} {64 rows, DK}
  static constexpr int64_t kd = qd + kChunk * DK;        // k_i e^{G_last - G_i} {64 rows, DK}
  static constexpr int64_t gcum = kd + kChunk * DK;      // G {64}
  static constexpr int64_t floats = gcum + kChunk;
};

template <int DK, int DV>
struct PrepSmem {
  float k[kChunk][DK + 4];
  float v[kChunk][DV + 8];
  union {  // q is dead once Q Kᵀ is done; under 113 KB in all, two blocks fit an SM
    float q[kChunk][DK + 4];
    struct {
      float a[kChunk][kChunk + 4];  // A, then T diag(β)
      float t[kChunk][kChunk + 8];  // T, then T diag(β e^G)
    };
  };
  float gcum[kChunk], beta[kChunk];
};

// 16 bytes global -> shared without passing through registers, so a whole tile's
// loads are in flight at once; zeros when !valid (nothing is read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Starts copying 64 rows of W floats (row i at src + i * stride) into dst; rows at or
// past L become zeros: padded tokens have k = v = β = 0 and g = 0, so they change
// neither the state nor the real rows.
template <int W, int LD>
__device__ __forceinline__ void copy_rows(float (*dst)[LD], const float* src, int64_t stride, int L) {
  constexpr int kVec = W / 4;
#pragma unroll 4
  for (int e = threadIdx.x; e < kChunk * kVec; e += blockDim.x) {
    const int i = e / kVec, c4 = e % kVec * 4;
    cp_async16(&dst[i][c4], i < L ? src + i * stride + c4 : src, i < L);
  }
}

template <int DK, int DV>
__global__ void __launch_bounds__(kThreads, 2) delta_chunk_prep_kernel(const __grid_constant__ ChunkedParams p) {
  extern __shared__ float4 smem_raw[];
  auto& sh = *reinterpret_cast<PrepSmem<DK, DV>*>(smem_raw);
  const int c = blockIdx.x, h = blockIdx.y, kh = h % p.Hk;
  const int t0 = c * kChunk, L = min(kChunk, p.n - t0);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  const int64_t qk_row = static_cast<int64_t>(p.Hk) * DK, qk_at = (static_cast<int64_t>(t0) * p.Hk + kh) * DK;
  copy_rows<DK, DK + 4>(sh.k, p.k + qk_at, qk_row, L);
  copy_rows<DK, DK + 4>(sh.q, p.q + qk_at, qk_row, L);
  copy_rows<DV, DV + 8>(sh.v, p.v + (static_cast<int64_t>(t0) * p.H + h) * DV, static_cast<int64_t>(p.H) * DV, L);
  if (warp == 0) {  // G = inclusive prefix sum of g: two tokens per lane, then a warp scan
    const int i0 = 2 * lane, i1 = i0 + 1;
    const float g0 = i0 < L ? p.g[static_cast<int64_t>(t0 + i0) * p.H + h] : 0.0f;
    const float g1 = i1 < L ? p.g[static_cast<int64_t>(t0 + i1) * p.H + h] : 0.0f;
    float s = g0 + g1;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += up;
    }
    sh.gcum[i0] = s - g1, sh.gcum[i1] = s;
    sh.beta[i0] = i0 < L ? p.beta[static_cast<int64_t>(t0 + i0) * p.H + h] : 0.0f;
    sh.beta[i1] = i1 < L ? p.beta[static_cast<int64_t>(t0 + i1) * p.H + h] : 0.0f;
  }
  cp_async_wait_all();
  __syncthreads();

  float* out = p.prep + (static_cast<int64_t>(h) * p.n_chunks + c) * Layout<DK, DV>::floats;
  // The decayed queries of the state pass (zero rows stay zero).
  for (int e = threadIdx.x; e < kChunk * DK / 4; e += kThreads) {
    const int i = e / (DK / 4), c4 = e % (DK / 4) * 4;
    const float f = __expf(sh.gcum[i]);
    const float4 v = *reinterpret_cast<const float4*>(&sh.q[i][c4]);
    *reinterpret_cast<float4*>(out + Layout<DK, DV>::qd + i * DK + c4) =
        make_float4(v.x * f, v.y * f, v.z * f, v.w * f);
  }

  // K Kᵀ (warps 0-3) and Q Kᵀ (warps 4-7), 16 rows per warp, lower triangle only.
  {
    const bool is_qk = warp >= 4;
    const int mt = warp % 4;
    const float* arow = is_qk ? &sh.q[16 * mt][0] : &sh.k[16 * mt][0];
    float acc[kChunk / 8][4] = {};
    for (int k0 = 0; k0 < DK; k0 += 8) {
      uint32_t a[4];
      load_a(a, arow + k0, DK + 4);
#pragma unroll
      for (int j = 0; j < kChunk / 8; ++j) {
        if (8 * j > 16 * mt + 15) continue;
        uint32_t b[2];
        load_b_trans(b, &sh.k[8 * j][k0], DK + 4);
        mma(acc[j], a, b);
      }
    }
#pragma unroll
    for (int j = 0; j < kChunk / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * mt + acc_row(e), m = 8 * j + acc_col(e);
        const float decay = m <= i ? __expf(sh.gcum[i] - sh.gcum[m]) : 0.0f;
        acc[j][e] *= is_qk ? decay : (m < i ? -sh.beta[i] * decay : 0.0f);
      }
    if (is_qk) {
#pragma unroll
      for (int j = 0; j < kChunk / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int i = 16 * mt + acc_row(e), m = 8 * j + acc_col(e);
          *reinterpret_cast<float2*>(out + Layout<DK, DV>::qk + i * kChunk + m) = make_float2(acc[j][e], acc[j][e + 1]);
        }
    }
    __syncthreads();  // q is dead: A and T take its place
    if (!is_qk) {
#pragma unroll
      for (int j = 0; j < kChunk / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) sh.a[16 * mt + acc_row(e)][8 * j + acc_col(e)] = acc[j][e];
    }
    for (int e = threadIdx.x; e < kChunk * (kChunk + 8); e += kThreads) (&sh.t[0][0])[e] = 0.0f;  // T's upper part
  }
  __syncthreads();

  // T = (I - A)^{-1} in blocks of 16 (A is strictly lower, T unit lower): each
  // diagonal block by forward substitution in one warp (row i = e_i + Σ_{m<i} A_im T_m),
  // then block row b from the rows above it: T[b][<16b] = T_bb · (A[b][<16b] T[<16b][<16b]).
  if (warp < kChunk / 16) {
    const int o = 16 * warp, j = lane % 16, half = lane / 16;
    for (int i = 0; i < 16; ++i) {
      float s = 0;
#pragma unroll
      for (int mm = 0; mm < 8; ++mm) {  // A_im = 0 for m >= i, and rows >= i of T are still zero
        const int m = 2 * mm + half;
        s += sh.a[o + i][o + m] * sh.t[o + m][o + j];
      }
      s += __shfl_xor_sync(0xffffffffu, s, 16);
      if (half == 0) sh.t[o + i][o + j] = s + (i == j ? 1.0f : 0.0f);
      __syncwarp();
    }
  }
  __syncthreads();
  for (int b = 1; b < kChunk / 16; ++b) {
    const int cols = 16 * b;  // this block row's entries left of the diagonal: 16 x cols
    float x[kChunk / 16 - 1];
#pragma unroll
    for (int r = 0; r < kChunk / 16 - 1; ++r) {
      const int e = threadIdx.x + kThreads * r, i = e / cols, c = e % cols;
      x[r] = 0;
      if (r >= b) continue;
      for (int mb = 0; mb < cols; mb += 16)
#pragma unroll
        for (int m = mb; m < mb + 16; ++m) x[r] += sh.a[cols + i][m] * sh.t[m][c];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kChunk / 16 - 1; ++r) {
      const int e = threadIdx.x + kThreads * r;
      if (r < b) sh.a[cols + e / cols][e % cols] = x[r];  // A's used entries now hold the product
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kChunk / 16 - 1; ++r) {
      const int e = threadIdx.x + kThreads * r, i = e / cols, c = e % cols;
      if (r >= b) continue;
      float t = 0;
#pragma unroll
      for (int m = 0; m < 16; ++m) t += sh.t[cols + i][cols + m] * sh.a[cols + m][c];
      sh.t[cols + i][c] = t;
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < kChunk * kChunk; e += kThreads) {
    const int i = e / kChunk, m = e % kChunk;
    const float t = sh.t[i][m];
    sh.a[i][m] = t * sh.beta[m];
    sh.t[i][m] = t * sh.beta[m] * __expf(sh.gcum[m]);
  }
  __syncthreads();

  // U = T diag(β) V (warps 0-3) and W = T diag(β e^G) K (warps 4-7); T is lower
  // triangular, so a row tile needs only the columns up to its last row.
  {
    const bool is_w = warp >= 4;
    const int mt = warp % 4, width = is_w ? DK : DV;
    constexpr int kMaxW = DK > DV ? DK : DV;
    const float* arow = is_w ? &sh.t[16 * mt][0] : &sh.a[16 * mt][0];
    const int lda = is_w ? kChunk + 8 : kChunk + 4;
    const float* bmat = is_w ? &sh.k[0][0] : &sh.v[0][0];
    const int ldb = is_w ? DK + 4 : DV + 8;
    float acc[kMaxW / 8][4] = {};
    for (int k0 = 0; k0 <= 16 * mt + 8; k0 += 8) {
      uint32_t a[4];
      load_a(a, arow + k0, lda);
#pragma unroll
      for (int j = 0; j < kMaxW / 8; ++j) {
        if (8 * j >= width) continue;
        uint32_t b[2];
        load_b(b, bmat + k0 * ldb + 8 * j, ldb);
        mma(acc[j], a, b);
      }
    }
    float* dst = out + (is_w ? Layout<DK, DV>::w : Layout<DK, DV>::u);
#pragma unroll
    for (int j = 0; j < kMaxW / 8; ++j) {
      if (8 * j >= width) continue;
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int i = 16 * mt + acc_row(e), col = 8 * j + acc_col(e);
        *reinterpret_cast<float2*>(dst + i * width + col) = make_float2(acc[j][e], acc[j][e + 1]);
      }
    }
  }
  if (threadIdx.x < kChunk) out[Layout<DK, DV>::gcum + threadIdx.x] = sh.gcum[threadIdx.x];
  // The decayed keys of the state pass.
  for (int e = threadIdx.x; e < kChunk * DK / 4; e += kThreads) {
    const int i = e / (DK / 4), c4 = e % (DK / 4) * 4;
    const float f = __expf(sh.gcum[kChunk - 1] - sh.gcum[i]);
    const float4 v = *reinterpret_cast<const float4*>(&sh.k[i][c4]);
    *reinterpret_cast<float4*>(out + Layout<DK, DV>::kd + i * DK + c4) =
        make_float4(v.x * f, v.y * f, v.z * f, v.w * f);
  }
}

template <int DK>
struct StateSmem {
  float s[DK][kCols + 8];
  float w[kChunk][DK + 4];
  float q[kChunk][DK + 4];         // q_i e^{G_i}
  // Two of each of the rest: the next chunk's copy runs during this one.
  float kd[2][kChunk][DK + 8];     // k_j e^{G_last - G_j}
  float vn[2][kChunk][kCols + 8];  // U, then v' = U - W S
  float qk[2][kChunk][kChunk + 4];
};

template <int DK, int DV>
__global__ void __launch_bounds__(kStateThreads, 1) delta_chunk_state_kernel(const __grid_constant__ ChunkedParams p) {
  extern __shared__ float4 smem_raw[];
  auto& sh = *reinterpret_cast<StateSmem<DK>*>(smem_raw);
  const int c0 = blockIdx.x * kCols, h = blockIdx.y;
  const int warp = threadIdx.x / 32;
  using Lay = Layout<DK, DV>;

  // The state tiles this warp updates: row tile st_m, column tiles st_n0 .. st_n0 + kStN.
  constexpr int kRowTiles = DK / 16, kStN = (kRowTiles * kCols / 8) / (kStateThreads / 32);
  const int st_m = warp % kRowTiles, st_n0 = (warp / kRowTiles) * kStN;
  float* S = p.state + static_cast<int64_t>(h) * DK * DV;
  float st[kStN][4];
#pragma unroll
  for (int jj = 0; jj < kStN; ++jj)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int i = 16 * st_m + acc_row(e), col = 8 * (st_n0 + jj) + acc_col(e);
      const float2 v = *reinterpret_cast<const float2*>(S + static_cast<int64_t>(i) * DV + c0 + col);
      st[jj][e] = v.x, st[jj][e + 1] = v.y;
      sh.s[i][col] = v.x, sh.s[i][col + 1] = v.y;
    }

  // v' and y: warp owns row tile vm (of 4) and column tiles vn0 .. vn0 + kVN (of 4).
  constexpr int kColTiles = kCols / 8, kVN = (kChunk / 16) * kColTiles / (kStateThreads / 32);
  const int vm = warp / (kColTiles / kVN), vn0 = (warp % (kColTiles / kVN)) * kVN;
  const float out_scale = rsqrtf(static_cast<float>(DK));
  // A chunk's tiles arrive in two groups: W and e^G q, read by the first product only,
  // so the next chunk's copy overlaps the rest of this one; the others are double
  // buffered, their next copy overlapping all of this chunk.
  auto chunk_data = [&](int c) { return p.prep + (static_cast<int64_t>(h) * p.n_chunks + c) * Lay::floats; };
  auto copy_first = [&](int c) {
    copy_rows<DK, DK + 4>(sh.w, chunk_data(c) + Lay::w, DK, kChunk);
    copy_rows<DK, DK + 4>(sh.q, chunk_data(c) + Lay::qd, DK, kChunk);
  };
  auto copy_second = [&](int c) {
    copy_rows<DK, DK + 8>(sh.kd[c % 2], chunk_data(c) + Lay::kd, DK, kChunk);
    copy_rows<kCols, kCols + 8>(sh.vn[c % 2], chunk_data(c) + Lay::u + c0, DV, kChunk);
    copy_rows<kChunk, kChunk + 4>(sh.qk[c % 2], chunk_data(c) + Lay::qk, kChunk, kChunk);
  };
  copy_first(0);
  copy_second(0);
  for (int c = 0; c < p.n_chunks; ++c) {
    const int t0 = c * kChunk, L = min(kChunk, p.n - t0);
    const float last_decay = __expf(__ldg(chunk_data(c) + Lay::gcum + kChunk - 1));
    cp_async_wait_all();
    __syncthreads();
    if (c + 1 < p.n_chunks) copy_second(c + 1);  // its buffers were last read in chunk c - 1
    auto& vn = sh.vn[c % 2];
    auto& kd = sh.kd[c % 2];
    auto& qk = sh.qk[c % 2];

    // W S and (e^G q) S share the B fragments of S.
    float av[kVN][4] = {}, ay[kVN][4] = {};
    for (int k0 = 0; k0 < DK; k0 += 8) {
      uint32_t aw[4], aq[4];
      load_a(aw, &sh.w[16 * vm][k0], DK + 4);
      load_a(aq, &sh.q[16 * vm][k0], DK + 4);
#pragma unroll
      for (int jj = 0; jj < kVN; ++jj) {
        uint32_t b[2];
        load_b(b, &sh.s[k0][8 * (vn0 + jj)], kCols + 8);
        mma(av[jj], aw, b);
        mma(ay[jj], aq, b);
      }
    }
#pragma unroll
    for (int jj = 0; jj < kVN; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e) vn[16 * vm + acc_row(e)][8 * (vn0 + jj) + acc_col(e)] -= av[jj][e];
    __syncthreads();  // v' complete; S, W and e^G q are no longer read this chunk
    if (c + 1 < p.n_chunks) copy_first(c + 1);

    // y += QK v' (QK is lower triangular), then out.
    for (int k0 = 0; k0 <= 16 * vm + 8; k0 += 8) {
      uint32_t a[4];
      load_a(a, &qk[16 * vm][k0], kChunk + 4);
#pragma unroll
      for (int jj = 0; jj < kVN; ++jj) {
        uint32_t b[2];
        load_b(b, &vn[k0][8 * (vn0 + jj)], kCols + 8);
        mma(ay[jj], a, b);
      }
    }
#pragma unroll
    for (int jj = 0; jj < kVN; ++jj)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int i = 16 * vm + acc_row(e), col = c0 + 8 * (vn0 + jj) + acc_col(e);
        if (i < L)
          *reinterpret_cast<float2*>(p.y + (static_cast<int64_t>(t0 + i) * p.H + h) * DV + col) =
              make_float2(ay[jj][e] * out_scale, ay[jj][e + 1] * out_scale);
      }

    // S = e^{G_last} S + Kdᵀ v'.
#pragma unroll
    for (int jj = 0; jj < kStN; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[jj][e] *= last_decay;
    for (int k0 = 0; k0 < kChunk; k0 += 8) {
      uint32_t a[4];
      load_a_trans(a, &kd[k0][16 * st_m], DK + 8);
#pragma unroll
      for (int jj = 0; jj < kStN; ++jj) {
        uint32_t b[2];
        load_b(b, &vn[k0][8 * (st_n0 + jj)], kCols + 8);
        mma(st[jj], a, b);
      }
    }
#pragma unroll
    for (int jj = 0; jj < kStN; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e) sh.s[16 * st_m + acc_row(e)][8 * (st_n0 + jj) + acc_col(e)] = st[jj][e];
    __syncthreads();  // the next chunk overwrites S and the tiles
  }

#pragma unroll
  for (int jj = 0; jj < kStN; ++jj)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int i = 16 * st_m + acc_row(e), col = 8 * (st_n0 + jj) + acc_col(e);
      *reinterpret_cast<float2*>(S + static_cast<int64_t>(i) * DV + c0 + col) = make_float2(st[jj][e], st[jj][e + 1]);
    }
}

template <int DK, int DV>
void launch(const ChunkedParams& p, cudaStream_t st) {
  constexpr size_t kPrepBytes = sizeof(PrepSmem<DK, DV>), kStateBytes = sizeof(StateSmem<DK>);
  allow_smem<delta_chunk_prep_kernel<DK, DV>>(kPrepBytes);
  allow_smem<delta_chunk_state_kernel<DK, DV>>(kStateBytes);
  delta_chunk_prep_kernel<DK, DV><<<dim3(p.n_chunks, p.H), kThreads, kPrepBytes, st>>>(p);
  ZINC_CUDA_LAUNCHED("delta_chunk_prep");
  delta_chunk_state_kernel<DK, DV><<<dim3(DV / kCols, p.H), kStateThreads, kStateBytes, st>>>(p);
  ZINC_CUDA_LAUNCHED("delta_chunk_state");
}

}  // namespace

bool delta_rule_chunked_supported(const DeltaRuleShape& s) {
  return (s.dk == 64 || s.dk == 128) && (s.dv == 64 || s.dv == 128);
}

size_t delta_rule_chunked_scratch_floats(const DeltaRuleShape& s) {
  const int64_t chunks = (s.n_tokens + kChunk - 1) / kChunk;
  return static_cast<size_t>(s.n_heads * chunks * (kChunk * (3 * s.dk + s.dv + kChunk + 1)));
}

void gated_delta_rule_chunked(const DeltaRuleShape& shape, const float* q, const float* k, const float* v,
                              const float* g, const float* beta, float* state, float* y, float* scratch,
                              cudaStream_t s) {
  if (!delta_rule_chunked_supported(shape))
    throw std::invalid_argument("cuda gated_delta_rule_chunked: needs dk and dv of 64 or 128");
  const ChunkedParams p{q,
                        k,
                        v,
                        g,
                        beta,
                        state,
                        y,
                        scratch,
                        static_cast<int>(shape.n_tokens),
                        static_cast<int>(shape.n_heads),
                        static_cast<int>(shape.n_k_heads),
                        ceil_div(shape.n_tokens, kChunk)};
  if (shape.dk == 64 && shape.dv == 64) launch<64, 64>(p, s);
  else if (shape.dk == 64) launch<64, 128>(p, s);
  else if (shape.dv == 64) launch<128, 64>(p, s);
  else launch<128, 128>(p, s);
}

}  // namespace zinc::cuda
