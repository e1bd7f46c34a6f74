// The routed experts of a few tokens when each expert is large (gpt-oss-20b's are
// 2880 x 2880 MXFP4, 4.4 MB a matrix; the flagship's 0.6 MB): their rows are
// streamed as matvec.cu streams a weight, instead of moe.cu's blocks of 8 rows, which
// on such experts ran in several waves, each copying its rows and its activations
// before any arithmetic (PERFORMANCE.md, session 29).
//
// One block per SM. Each warp pulls whole rows through its own ring of shared-memory
// slots (warp_stream.cuh; a row that does not start on a 16-byte boundary is copied
// from the boundary below it) and dots two rows at a time against one activation row
// staged once per block in shared memory as 16-bit integers (act_q16.cuh: DP4A on
// integer codes takes fewer instructions a code than floats; gate_up 35 -> 28 us;
// MXFP4's codes are looked up as magnitudes, positive and negative apart):
//  - gate_up: a gate row and its up row, whose GLU it writes (act {ff, k, n});
//  - down: two rows of one expert, then the same two rows of the token's next chosen
//    expert, and so on, adding the k experts in order: y is a fixed-order sum with no
//    atomics (or, for a shared expert's add, each expert's part).
// Each block routes from the logits itself (expert_route.cuh), as moe.cu's kernels do.
#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/expert_glu.cuh"
#include "backend/cuda/expert_route.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_stream.h"
#include "backend/cuda/warp_stream.cuh"

namespace zinc::cuda {
namespace {

// Warps a block (one block an SM): as many as the registers (64 a thread for gate_up,
// 85 for down) and the shared memory (down also holds k act rows) allow, to hide the
// latencies of each warp's chain of lookups and dot products (down +10% against 16;
// gate_up unchanged, and its K-quant instances spill a few bytes at 64 registers).
template <bool kGateUp>
inline constexpr int kWarps = kGateUp ? 32 : 24;
constexpr int kStages = 4;  // ring slots a warp: two rows in use, two in flight
constexpr int kMaxPairs = static_cast<int>(kExpertDecodeMaxTokens) * kMaxRouted;
constexpr size_t kSmemBudget = 220 * 1024;
// Experts whose matrices are at least this large are streamed.
constexpr size_t kLargeExpertBytes = size_t{1} << 20;

struct StreamParams {
  const uint8_t* w[2];  // gate_up: gate, up {in, out, E}; down: down {in, out, E}, w[1] unused
  size_t row_bytes;     // a row of `in` elements
  int in, out;          // a row's elements; rows an expert
  int slot_bytes;
  const float* x;  // gate_up: x {d, n}; down: act {ff, k, n}
  Routing route;
  ExpertGlu glu;
  const float* down_bias;  // {d, E}, or null
  float* y;                // gate_up: act {ff, k, n}; down: y {d, n}, or the parts' sums {d, k, n}
  float* part_weights;     // down with parts: {k, n}; else null
  int E, k, n;
};

// Activation rows as 16-bit integers (act_q16.cuh), one Q16Row each, laid out for a
// multiple of 128 elements: the swizzle permutes whole groups of 8 chunks (a row of
// 2880 has 180 16-element chunks, and its last 4 would land past the row).
__host__ __device__ constexpr int q16_layout(int in) { return (in + 127) / 128 * 128; }
__host__ __device__ constexpr size_t q16_row_stride(int in) { return Q16Row::bytes(q16_layout(in)); }

// Stages `rows` activation rows of `in` elements (in a multiple of 32) from x as Q16Rows
// at `at`: four elements a thread in turn, a run per 8 lanes; lanes past the end take
// part in their run's shuffles with zeros. A thread issues the loads of up to kAhead
// turns before quantizing any, so that down's four act rows (3.75 turns a thread) wait
// for one load's latency, not four in a chain. kPaired (MXFP4): word 2m + s of a run
// holds its elements 4m + 2s, 4m + 2s + 16, 4m + 2s + 1, 4m + 2s + 17, the order in
// which mxfp4_run_dot's code words give them (a code byte holds elements j and j + 16).
template <bool kPaired>
__device__ __forceinline__ void stage_q16_rows(const float* x, int rows, int in, uint8_t* at) {
  constexpr int kAhead = 4;
  const int per_row = in / 4, total = rows * per_row;
  const int padded = (total + 31) / 32 * 32;
  const auto load = [&](int g) {
    const int i = g % per_row;
    float4 v = make_float4(0, 0, 0, 0);
    if (g < total && kPaired) {
      const float* run = x + 4 * (g - i % 8);  // g - i % 8: the run's first four
      const int e = 4 * (i % 8 / 2) + 2 * (i % 2);
      const float2 a = __ldcg(reinterpret_cast<const float2*>(run + e)),
                   b = __ldcg(reinterpret_cast<const float2*>(run + e + 16));
      v = make_float4(a.x, b.x, a.y, b.y);
    } else if (g < total) {
      v = __ldcg(reinterpret_cast<const float4*>(x) + g);
    }
    return v;
  };
  for (int first = threadIdx.x; first < padded; first += kAhead * blockDim.x) {
    float4 v[kAhead];
#pragma unroll
    for (int j = 0; j < kAhead; ++j) v[j] = load(first + j * blockDim.x);
#pragma unroll
    for (int j = 0; j < kAhead; ++j) {
      const int g = first + j * blockDim.x, r = g / per_row, i = g % per_row;
      if (g >= padded) break;  // whole warps: padded and blockDim.x are multiples of 32
      float scale;
      const Q16Words w = q16_quantize4(v[j], scale);
      int q = q16_sum4(w);
#pragma unroll
      for (int o = 1; o < 8; o <<= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
      if (g >= total) continue;
      const Q16Row row(at + r * q16_row_stride(in), q16_layout(in));
      const int c = swizzled_chunk(i / 4) * 4 + i % 4;  // word of the swizzled chunks
      reinterpret_cast<uint32_t*>(row.hi)[c] = w.hi;
      reinterpret_cast<uint32_t*>(row.lo)[c] = w.lo;
      if (i % 8 == 0) row.scale[i / 8] = scale, row.sum[i / 8] = scale * static_cast<float>(q);
    }
  }
}

__device__ __forceinline__ uint32_t load_shared_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_address(p)));
  return v;
}

// prmt.b32 in its default mode: byte i of the result is byte (nibble i & 7) of {b, a},
// or, where nibble i's bit 3 is set, that byte's sign spread over its 8 bits.
// (__byte_perm keeps only the nibbles' low 3 bits, an instruction more a lookup.)
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t v;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(v) : "r"(a), "r"(b), "r"(s));
  return v;
}

// Four MXFP4 codes' magnitudes, doubled (0 1 2 3 4 6 8 12), as bytes, from the selector
// nibbles in s's low 16 bits; lo is the table's first word, kMagnitudesLo. A code's bit
// 3, its sign, spreads its magnitude's sign, 0: the positive codes give their
// magnitudes and the negative ones 0, and with s ^ 0x8888 the other way round. Σ c·x is
// then Σ pos·x - Σ neg·x: two lookups and an XOR for four codes, where a signed table
// took three lookups and a selector of three more instructions (the integer ALU pipe,
// at half rate, bound the loop; DP4A runs on the FMA pipe).
inline constexpr uint32_t kMagnitudesLo = 0x03020100u;
__device__ __forceinline__ uint32_t mxfp4_magnitudes4(uint32_t lo, uint32_t s) { return prmt(lo, 0x0C080604u, s); }

// A lane's MXFP4 blocks of a row in shared memory: blocks are 17 bytes, so the lane's
// blocks lane, lane + 32, ... lie 544 bytes (a multiple of 4) apart, and each is read
// as 5 aligned words from the same bit offset.
struct Mxfp4Lane {
  const uint8_t* words;  // the lane's first block, rounded down to a word
  int shift;             // bits from there to the block
  __device__ Mxfp4Lane(const uint8_t* row, int lane) {
    const uint8_t* block = row + 17 * lane;
    const int bytes = static_cast<int>(reinterpret_cast<uintptr_t>(block) & 3);
    words = block - bytes, shift = 8 * bytes;
  }
};

// The lane's k-th MXFP4 block (17 bytes) of K rows against x's run q as 16-bit integers
// in the paired order (stage_q16_rows): four codes' magnitudes meet four elements per
// DP4A, positive and negative codes apart, twice (hi and lo bytes). lo: kMagnitudesLo.
template <int K>
__device__ __forceinline__ void mxfp4_run_dot(const Mxfp4Lane (&rows)[K], int k, int q, const Q16Row& x,
                                              uint32_t lo, float (&acc)[K]) {
  uint32_t xh[8], xl[8];
#pragma unroll
  for (int c = 0; c < 2; ++c) {  // the run's two chunks of four words
    const uint4 h = x.hi[swizzled_chunk(2 * q + c)], l = x.lo[swizzled_chunk(2 * q + c)];
    xh[4 * c] = h.x, xh[4 * c + 1] = h.y, xh[4 * c + 2] = h.z, xh[4 * c + 3] = h.w;
    xl[4 * c] = l.x, xl[4 * c + 1] = l.y, xl[4 * c + 2] = l.z, xl[4 * c + 3] = l.w;
  }
  const float xs = x.scale[q];
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const uint8_t* w = rows[r].words + 544 * k;
    const int at = rows[r].shift;
    uint32_t v[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) v[i] = load_shared_u32(w + 4 * i);
    int hp = 0, hn = 0, lp = 0, ln = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // Code word i: its low half the elements of x's word 2i, its high half 2i + 1.
      const uint32_t qs = __funnelshift_rc(v[i], v[i + 1], at + 8), qn = qs ^ 0x88888888u;
      const int pl = static_cast<int>(mxfp4_magnitudes4(lo, qs));
      const int ph = static_cast<int>(mxfp4_magnitudes4(lo, qs >> 16));
      const int nl = static_cast<int>(mxfp4_magnitudes4(lo, qn));
      const int nh = static_cast<int>(mxfp4_magnitudes4(lo, qn >> 16));
      const int h0 = static_cast<int>(xh[2 * i]), h1 = static_cast<int>(xh[2 * i + 1]);
      const int l0 = static_cast<int>(xl[2 * i]), l1 = static_cast<int>(xl[2 * i + 1]);
      hp = __dp4a(pl, h0, hp), hp = __dp4a(ph, h1, hp), hn = __dp4a(nl, h0, hn), hn = __dp4a(nh, h1, hn);
      lp = __dp4a(pl, l0, lp), lp = __dp4a(ph, l1, lp), ln = __dp4a(nl, l0, ln), ln = __dp4a(nh, l1, ln);
    }
    const uint32_t e = __funnelshift_r(v[0], v[1], at) & 0xFF;
    acc[r] += e8m0_half(static_cast<uint8_t>(e)) * xs * static_cast<float>(256 * (hp - hn) + (lp - ln));
  }
}

// The lane's part of two rows (in shared memory) · one activation row. magnitudes_lo:
// kMagnitudesLo in shared memory. Read from there it stays in one register; as a literal
// ptxas copied it into a fresh one before each lookup, 32 FMA-pipe instructions of the
// loop's 217 for two rows.
template <DType T>
__device__ __forceinline__ void two_rows_dot(const uint8_t* const (&rows)[2], int in, const Q16Row& x,
                                             const uint32_t* magnitudes_lo, float (&acc)[2]) {
  const int lane = threadIdx.x % 32;
  if constexpr (T == DType::MXFP4) {
    const Mxfp4Lane lanes[2] = {Mxfp4Lane(rows[0], lane), Mxfp4Lane(rows[1], lane)};
    const uint32_t lo = load_shared_u32(magnitudes_lo);
    for (int q = lane, k = 0; q < in / 32; q += 32, ++k) mxfp4_run_dot<2>(lanes, k, q, x, lo, acc);
  } else {
    for (int c = lane; c < in / 64; c += 32)
#pragma unroll
      for (int r = 0; r < 2; ++r) acc[r] += chunk_dot_q16<T>(rows[r], c, x);
  }
}

// Where a warp's next step is: token t's j-th chosen expert, from row `row`. gate_up's
// steps run row by row through each (token, expert) pair; down's through a token's k
// experts, then on to its next two rows. advance() walks them with no division (the
// two a step cost about 50 of a step's 160 instructions outside the dot products).
template <bool kGateUp>
struct StepAt {
  int t, j, row;
  // unit: gate_up a (pair, row), down a (token, row pair).
  __device__ StepAt(int unit, const StreamParams& p) {
    if constexpr (kGateUp) {
      const int pair = unit / p.out;
      t = pair / p.k, j = pair % p.k, row = unit % p.out;
    } else {
      const int halves = (p.out + 1) / 2;
      t = unit / halves, j = 0, row = 2 * (unit % halves);
    }
  }
  __device__ void advance(const StreamParams& p) {
    if constexpr (kGateUp) {
      if (++row < p.out) return;
      row = 0;
      if (++j < p.k) return;
      j = 0, ++t;
    } else {
      if (++j < p.k) return;
      j = 0, row += 2;
      if (row < p.out) return;
      row = 0, ++t;
    }
  }
};

// grid: one block per SM. Shared memory: the warps' mbarriers, their rings, the
// activation rows as Q16Rows.
template <DType T, bool kGateUp>
__global__ void __launch_bounds__(32 * kWarps<kGateUp>, 1) moe_stream_kernel(const __grid_constant__ StreamParams p) {
  extern __shared__ uint4 smem[];
  __shared__ int32_t ids[kMaxPairs];
  __shared__ float weights[kMaxPairs];
  __shared__ uint32_t magnitudes_lo;
  if (threadIdx.x == 0) magnitudes_lo = kMagnitudesLo;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool by_logits = p.route.logits != nullptr;
  // gate_up waits before it lets down start; down routes from the logits before its
  // wait (moe.cu's top comment says why that is safe).
  if constexpr (kGateUp) pdl_wait(), pdl_launch_dependents();
  else if (!by_logits) pdl_begin();
  if (warp < p.n) {
    const int t = warp;
    if (by_logits) {
      route_warp(p.route.logits + static_cast<int64_t>(t) * p.E, p.E, p.k, p.route.renormalize, ids + t * p.k,
                 weights + t * p.k);
    } else {
      for (int j = lane; j < p.k; j += 32) ids[t * p.k + j] = p.route.ids[t * p.k + j];
      for (int j = lane; j < p.k; j += 32) weights[t * p.k + j] = p.route.weights[t * p.k + j];
    }
  }
  __syncthreads();

  // Units: gate_up a (pair, row), one step; down a (token, row pair), a step per expert.
  const int halves = (p.out + 1) / 2;
  const int units = kGateUp ? p.n * p.k * p.out : p.n * halves, steps_per_unit = kGateUp ? 1 : p.k;
  // Consecutive warps of the grid on different SMs, so that a launch with fewer units
  // than warps spreads them over every SM.
  const int warps = gridDim.x * kWarps<kGateUp>, per = (units + warps - 1) / warps;
  const int first = (warp * gridDim.x + blockIdx.x) * per;
  const int steps = max(0, min(per, units - first)) * steps_per_unit;
  StepAt<kGateUp> next(first, p);  // the loop's next step
  // A step's token t, its j-th expert (pair t·k + j) and first row: its rows are `row`
  // and `row + 1` (down; an odd last row is read twice) or `row` of gate and of up.
  struct Step {
    int t, j, pair, e, row;
    bool valid;
  };
  const auto step_of = [&](const StepAt<kGateUp>& at) {
    Step st{at.t, at.j, at.t * p.k + at.j, 0, at.row, false};
    const int e = ids[st.pair];
    st.valid = e >= 0 && e < p.E;
    st.e = st.valid ? e : 0;  // a bad id reads expert 0 and writes NaN (gate_up)
    return st;
  };
  // Row `row` of tensor h (down's copy takes row + 1 with it).
  const auto row_src = [&](const Step& st, int h) {
    return p.w[h] + (static_cast<size_t>(st.e) * p.out + st.row) * p.row_bytes;
  };

  auto* bars = reinterpret_cast<uint64_t*>(smem);
  auto* rings = reinterpret_cast<uint8_t*>(smem) + ((kWarps<kGateUp> * kStages * 8 + 15) / 16) * 16;
  // A step's two rows: gate_up's lie in two tensors, two copies; down's are adjacent, one
  // copy into a slot of twice the size: half the copies to issue, gpt-oss-20b +0.5%
  // (PERFORMANCE.md, session 70).
  constexpr int kCopies = kGateUp ? 2 : 1;
  WarpStream<kStages / (2 / kCopies)> stream(rings + static_cast<size_t>(warp) * kStages * p.slot_bytes,
                                             p.slot_bytes * (2 / kCopies), bars + warp * kStages);
  // Issues step s, `ahead` steps past the loop's next (a copy walked there: a second
  // cursor kept beside it spilled registers).
  const auto issue = [&](int s, int ahead) {
    StepAt<kGateUp> at = next;
    for (int i = 0; i < ahead; ++i) at.advance(p);
    const Step st = s < steps ? step_of(at) : Step{};
    const int rows = kGateUp || st.row + 1 >= p.out ? 1 : 2;  // rows a copy
    for (int h = 0; h < kCopies; ++h) {
      if (s >= steps) stream.issue(kCopies * s + h, nullptr, 0);
      else stream.issue_unaligned(kCopies * s + h, row_src(st, h), rows * static_cast<int>(p.row_bytes));
    }
  };
  for (int s = 0; s < kStages / 2; ++s) issue(s, s);
  if (!kGateUp && by_logits) pdl_begin();  // act is gate_up's
  // Written after the wait: a later layer's scratch may reuse memory the kernels ahead read.
  if (!kGateUp && p.part_weights && blockIdx.x == 0)
    for (int i = threadIdx.x; i < p.n * p.k; i += blockDim.x) p.part_weights[i] = weights[i];

  // The activation rows: gate_up the tokens' x, down each pair's act.
  auto* xq = rings + static_cast<size_t>(kWarps<kGateUp>) * kStages * p.slot_bytes;
  stage_q16_rows<T == DType::MXFP4>(p.x, kGateUp ? p.n : p.n * p.k, p.in, xq);
  __syncthreads();

  float total[2] = {0, 0};  // down: the experts' weighted sum so far
  for (int s = 0; s < steps; ++s) {
    const Step st = step_of(next);
    next.advance(p);
    // The step's two biases (gate_up: gate and up; down: its two rows), loaded by the
    // lane that adds them before the dot products, which hide their latency.
    const int64_t at = static_cast<int64_t>(st.e) * p.out + st.row;
    float bias[2] = {0, 0};
    if (lane == 0) {
      if constexpr (kGateUp) bias[0] = expert_bias(p.glu.gate_bias, at), bias[1] = expert_bias(p.glu.up_bias, at);
      else bias[0] = expert_bias(p.down_bias, at), bias[1] = expert_bias(p.down_bias, at + (st.row + 1 < p.out));
    }
    const uint8_t* rows[2];
    rows[0] = stream.wait(kCopies * s);
    if constexpr (kGateUp) rows[1] = stream.wait(2 * s + 1);
    else rows[1] = st.row + 1 < p.out ? rows[0] + p.row_bytes : rows[0];  // an odd last row read twice
    const int xr = kGateUp ? st.t : st.pair;
    float acc[2] = {0, 0};
    two_rows_dot<T>(rows, p.in, Q16Row(xq + xr * q16_row_stride(p.in), q16_layout(p.in)), &magnitudes_lo, acc);
    stream.release();
    issue(s + kStages / 2, kStages / 2 - 1);
    acc[0] = warp_sum(acc[0]), acc[1] = warp_sum(acc[1]);
    if (lane != 0) continue;
    if constexpr (kGateUp) {
      p.y[static_cast<int64_t>(st.pair) * p.out + st.row] =
          st.valid ? expert_activation(p.glu, acc[0] + bias[0], acc[1] + bias[1]) : __int_as_float(0x7fc00000);
    } else {
      for (int h = 0; h < 2 && st.row + h < p.out; ++h) {
        const int r = st.row + h;
        const float v = acc[h] + bias[h];
        if (p.part_weights) {
          p.y[static_cast<int64_t>(st.pair) * p.out + r] = v;
        } else {
          total[h] += weights[st.pair] * v;
          if (st.j == p.k - 1) p.y[static_cast<int64_t>(st.t) * p.out + r] = total[h], total[h] = 0;
        }
      }
    }
  }
}

// Shared memory of a launch with slots of slot_bytes and x_rows activation rows of in.
template <bool kGateUp>
size_t stream_smem(int slot_bytes, int x_rows, int in) {
  const size_t bars = (kWarps<kGateUp> * kStages * 8 + 15) / 16 * 16;
  return bars + static_cast<size_t>(kWarps<kGateUp>) * kStages * slot_bytes +
         static_cast<size_t>(x_rows) * q16_row_stride(in);
}

// The types streamed (every other goes through moe.cu's kernels): gpt-oss's MXFP4,
// and the K-quants of re-quantized files. (Q8_0 rows of gpt-oss's 2880 elements, 3060
// bytes, would need 395 KB of rings for 32 warps.)
template <class F>
bool dispatch_streamed_type(DType t, F&& f) {
  switch (t) {
    case DType::MXFP4: f(std::integral_constant<DType, DType::MXFP4>{}); return true;
    case DType::Q4_K: f(std::integral_constant<DType, DType::Q4_K>{}); return true;
    case DType::Q5_K: f(std::integral_constant<DType, DType::Q5_K>{}); return true;
    default: return false;
  }
}

// Fills p's shape and slot size for weights w of rows of `in`, `x_rows` activation
// rows; false when the experts are small, the type is not streamed or it does not fit.
template <bool kGateUp>
bool stream_shape(StreamParams& p, const Tensor& w, int x_rows) {
  const int in = static_cast<int>(w.ne[0]), out = static_cast<int>(w.ne[1]);
  const size_t row_bytes = w.row_bytes();
  if (static_cast<size_t>(out) * row_bytes < kLargeExpertBytes || in % 32 != 0 ||
      reinterpret_cast<uintptr_t>(w.data) % 16 != 0)
    return false;
  const bool known = dispatch_streamed_type(w.type, [](auto) {});
  p.in = in, p.out = out, p.row_bytes = row_bytes;
  p.slot_bytes = static_cast<int>((row_bytes + 15) / 16 * 16 + 16);
  return known && stream_smem<kGateUp>(p.slot_bytes, x_rows, in) <= kSmemBudget;
}

template <bool kGateUp>
void launch_stream(const StreamParams& p, DType type, int x_rows, cudaStream_t s) {
  dispatch_streamed_type(type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    const size_t smem = stream_smem<kGateUp>(p.slot_bytes, x_rows, p.in);
    allow_smem<moe_stream_kernel<T, kGateUp>>(kSmemBudget);
    launch_pdl_smem(moe_stream_kernel<T, kGateUp>, sm_count(), 32 * kWarps<kGateUp>, smem, s, p);
  });
  ZINC_CUDA_LAUNCHED(kGateUp ? "moe_stream gate_up" : "moe_stream down");
}

}  // namespace

bool stream_gate_up(const Tensor& x, const ExpertWeights& ex, int k, const Routing& route, float* act,
                    cudaStream_t s) {
  StreamParams p{};
  const int n = static_cast<int>(x.rows());
  if (n > kExpertDecodeMaxTokens || n * k > kMaxPairs || !stream_shape<true>(p, ex.gate, n)) return false;
  if (reinterpret_cast<uintptr_t>(ex.up.data) % 16 != 0) return false;
  p.w[0] = static_cast<const uint8_t*>(ex.gate.data), p.w[1] = static_cast<const uint8_t*>(ex.up.data);
  p.x = x.as<const float>(), p.route = route, p.glu = expert_glu_of(ex), p.y = act;
  p.E = static_cast<int>(ex.gate.ne[2]), p.k = k, p.n = n;
  launch_stream<true>(p, ex.gate.type, n, s);
  return true;
}

bool stream_down(const ExpertWeights& ex, int k, int n, const Routing& route, const float* act, const Tensor& y,
                 const ExpertParts* parts, cudaStream_t s) {
  StreamParams p{};
  if (n > kExpertDecodeMaxTokens || n * k > kMaxPairs || !stream_shape<false>(p, ex.down, n * k)) return false;
  p.w[0] = static_cast<const uint8_t*>(ex.down.data);
  p.x = act, p.route = route, p.down_bias = ex.down_bias.as<const float>();
  p.y = parts ? parts->sums : y.as<float>();
  p.part_weights = parts ? parts->weights : nullptr;
  p.E = static_cast<int>(ex.down.ne[2]), p.k = k, p.n = n;
  launch_stream<false>(p, ex.down.type, n * k, s);
  return true;
}

}  // namespace zinc::cuda
