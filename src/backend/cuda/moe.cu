// Mixture of experts for a few tokens (decode), without a host round trip.
//
// gate_up: a block takes a run of ff rows of one (token, chosen expert) pair and
// writes act = silu(gate_e·x)·(up_e·x) for them (expert_glu: with biases or GPT-OSS's
// clamped form as the model has them). down: a block takes a run of output
// rows of one token and sums its k experts' rows · act in a fixed order, so the
// result is deterministic and needs no atomics. Both stage their weight rows in
// shared memory (expert_decode.cuh). Routed from logits (moe_block), down_part replaces
// down: a block takes a run of output rows of one (token, expert) pair, so it copies one
// span and stages one act row instead of k, and the shared expert's add sums the parts
// in the same order (PERFORMANCE.md, session 18: the step 4% faster), or without a
// shared expert one more launch (moe_parts_sum, session 63).
//
// Routed from logits at one token (moe_ffn_routed), each gate_up block finds its expert
// itself (one warp's top-k of the logits) and so does each down block, which does it,
// and issues its weight copies, before it waits for gate_up. (From two tokens one
// moe_route launch routes them all: kRouteOnceMinTokens.) That is safe because
// gate_up, unlike other kernels (pdl_begin), waits for the kernel before it before
// it lets down start: when down starts, every kernel before gate_up has completed,
// the router's matvec among them. shared_expert_add, after down, reads the shared
// expert's g and u before its wait on the same grounds.
//
// With down_part, down's blocks do not route: gate_up's block (0, k - 1) routes all k
// picks and publishes them as (id, weight) words, each down_part block spins on its
// one word, and the launch that sums the parts (shared_expert_add or moe_parts_sum)
// sets the words back to unpublished (PERFORMANCE.md session 45: +0.7%). The spin
// cannot hang: down starts only once every gate_up block has passed its trigger, so
// the publishing block is resident. It cannot read the layer before's picks: those
// were reset by that layer's sum, which completed before this gate_up's wait returned.
#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/expert_glu.cuh"
#include "backend/cuda/expert_route.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_stream.h"

namespace zinc::cuda {
namespace {

// One warp per token.
__global__ void moe_route_kernel(const float* logits, int E, int n, int k, bool renormalize, int32_t* ids,
                                 float* weights) {
  pdl_begin();
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= n) return;
  route_warp(logits + static_cast<int64_t>(t) * E, E, k, renormalize, ids + static_cast<int64_t>(t) * k,
             weights + static_cast<int64_t>(t) * k);
}

struct GateUpParams {
  const uint8_t* gate;  // {d, ff, E}
  const uint8_t* up;    // {d, ff, E}
  size_t row_bytes, span_slot;
  const float* x;  // {d, n}
  Routing route;
  ExpertGlu glu;
  float* act;  // {ff, k, n}
  int d, ff, E, k, rows;  // rows: ff rows per block
  bool bulk;              // spans_bulk_copyable(): one bulk copy per span
  unsigned long long* route_out = nullptr;  // ExpertParts::route (kPublish)
};

// A pick as one 64-bit word (weight bits, id), kNoPick while unpublished. Its own
// function, so gate_up's other blocks compile as they do without it (session 44:
// inlined, it grew gate_up<Q4_K> from 3232 to 3920 instructions and cost 3%).
__device__ __noinline__ void route_and_publish(const float* logits, int E, int k, bool renormalize, int32_t* ids,
                                               unsigned long long* out) {
  __shared__ float weights[kMaxRouted];
  route_warp(logits, E, k, renormalize, ids, weights);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  if (lane < k) {
    // Past the last usable logit (the rest all the NaN 0xffffffff, keyed as taken) a pick
    // is id -1. It goes out as E, as bad an id for down (NaN output), so that no word can
    // equal kNoPick and hang down.
    const auto id = static_cast<uint32_t>(ids[lane] < 0 ? E : ids[lane]);
    const unsigned long long v = static_cast<unsigned long long>(__float_as_uint(weights[lane])) << 32 | id;
    // Relaxed: the word is all that down reads through it (its act comes after its PDL
    // wait). A release here was a MEMBAR.ALL.GPU before the picks left, and with down's
    // acquire cost one sequence's decode 1.0% (H200, PERFORMANCE.md session 55).
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(out + lane), "l"(v) : "memory");
  }
}
__device__ __forceinline__ void read_pick(const unsigned long long* at, int32_t& id, float& w) {
  unsigned long long v;
  do asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(at) : "memory");
  while (v == kNoPick);
  id = static_cast<int32_t>(static_cast<uint32_t>(v)), w = __uint_as_float(static_cast<uint32_t>(v >> 32));
}

// grid (ff / rows, k, n). On integers (kQ16Chunks) at most 64 registers: four blocks
// per SM. The float path states no minimum: a minimum of 1 let ptxas take 79-124
// registers (Q8_0 95, two blocks an SM; PERFORMANCE.md session 44: +3.6% on Q8_0).
template <DType T, bool kPublish = false>
__global__ void __launch_bounds__(kExpertThreads, kQ16Chunks<T> ? 4 : 0)
    moe_gate_up_kernel(const __grid_constant__ GateUpParams p) {
  extern __shared__ uint4 smem[];
  // Bulk copies: [gate, up] of each row when a warp takes a row (row_wise), else of all rows.
  __shared__ uint64_t bars[2 * kExpertWarps];
  pdl_wait();  // before letting down start: see the top of the file
  pdl_launch_dependents();
  const int t = blockIdx.z, slot = blockIdx.y, r0 = blockIdx.x * p.rows, nr = min(p.rows, p.ff - r0);
  const int pair = t * p.k + slot;
  const bool bulk = kBulkSpans && p.bulk;
  // Up to one row per warp: each row is its own pair of copies and its warp starts on
  // it as soon as they land, with no block barrier after the first.
  const bool row_wise = bulk && p.rows <= kExpertWarps;
  __shared__ int32_t ids[kMaxRouted];
  auto* sm = reinterpret_cast<uint8_t*>(smem);
  const size_t bytes = nr * p.row_bytes;
  const auto first_byte = [&](int e) { return (static_cast<size_t>(e) * p.ff + r0) * p.row_bytes; };
  auto* xs = reinterpret_cast<float4*>(sm + 2 * p.span_slot);
  if (threadIdx.x < 32) {  // warp 0 finds the expert and (bulk) starts its copies
    if constexpr (kPublish) {  // routed from logits
      if (blockIdx.x == 0 && slot == p.k - 1)
        route_and_publish(p.route.logits + static_cast<int64_t>(t) * p.E, p.E, p.k, p.route.renormalize, ids,
                          p.route_out + t * p.k);
      else
        route_warp(p.route.logits + static_cast<int64_t>(t) * p.E, p.E, slot + 1, false, ids, nullptr);
    } else {
      if (p.route.logits)
        route_warp(p.route.logits + static_cast<int64_t>(t) * p.E, p.E, slot + 1, false, ids, nullptr);
      else if (threadIdx.x == 0) ids[slot] = p.route.ids[pair];
    }
#if __CUDA_ARCH__ >= 900
    __syncwarp();
    const int e = ids[slot];  // thread 0 wrote it
    const int lane = threadIdx.x;
    if (row_wise && lane < nr && e >= 0 && e < p.E) {
      for (int h = 0; h < 2; ++h) {
        uint64_t* bar = &bars[2 * lane + h];
        mbarrier_init(bar);
        mbarrier_expect(bar, static_cast<uint32_t>(p.row_bytes));
        bulk_copy(sm + h * p.span_slot + lane * p.row_bytes,
                  (h == 0 ? p.gate : p.up) + first_byte(e) + lane * p.row_bytes,
                  static_cast<uint32_t>(p.row_bytes), bar);
      }
    } else if (!row_wise && bulk && threadIdx.x == 0 && e >= 0 && e < p.E) {
      for (int h = 0; h < 2; ++h) {
        mbarrier_init(&bars[h]);
        mbarrier_expect(&bars[h], static_cast<uint32_t>(bytes));
        bulk_copy(sm + h * p.span_slot, (h == 0 ? p.gate : p.up) + first_byte(e), static_cast<uint32_t>(bytes),
                  &bars[h]);
      }
    }
#endif
  } else if (kQ16Chunks<T> && row_wise) {  // the others stage x meanwhile
    stage_q16_row(p.x + static_cast<int64_t>(t) * p.d, p.d, 32, blockDim.x - 32, Q16Row(xs, p.d));
  } else {
    const auto* x = reinterpret_cast<const float4*>(p.x + static_cast<int64_t>(t) * p.d);
    for (int c = threadIdx.x - 32; c < p.d / 4; c += blockDim.x - 32) xs[swizzled_chunk(c)] = x[c];
  }
  __syncthreads();
  const int e = ids[slot];
  float* act = p.act + static_cast<int64_t>(pair) * p.ff + r0;
  if (e < 0 || e >= p.E) {  // a bad id shows as NaN
    for (int r = threadIdx.x; r < nr; r += blockDim.x) act[r] = __int_as_float(0x7fc00000);
    return;
  }
  const uint8_t *gate = sm, *up = sm + p.span_slot;
  if (!bulk) {
    gate = stage_span(sm, p.gate + first_byte(e), bytes);
    cp_async_commit();
    up = stage_span(sm + p.span_slot, p.up + first_byte(e), bytes);
    cp_async_commit();
  }
  float* sums = reinterpret_cast<float*>(xs + p.d / 4);  // [gate rows, up rows]
  float* xsum = sums + 2 * p.rows;                       // [d / 32] with run scales
  // Row-wise on integers, x and its run sums were staged as a Q16Row.
  if constexpr (kHasRunScales<T>)
    if (!(kQ16Chunks<T> && row_wise)) stage_run_sums(xs, 1, p.d / 32, xsum);
#if __CUDA_ARCH__ >= 900
  if (row_wise) {
    if constexpr (!kQ16Chunks<T>) __syncthreads();  // the run sums
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= nr) return;
    float v[2];
    for (int h = 0; h < 2; ++h) {
      mbarrier_wait(&bars[2 * w + h], 0);
      const uint8_t* row = sm + h * p.span_slot + w * p.row_bytes;
      float acc[1] = {0};
      if constexpr (kQ16Chunks<T>) {
        for (int c = lane; c < p.d / 64; c += 32) acc[0] += chunk_dot_q16<T>(row, c, Q16Row(xs, p.d));
      } else {
        for (int q = lane; q < p.d / 32; q += 32) run_dot<T, 1>(row, q, xs, xsum, 0, 1, acc);
      }
      v[h] = warp_sum(acc[0]);
    }
    if (lane == 0) act[w] = expert_glu(p.glu, static_cast<int64_t>(e) * p.ff + r0 + w, v[0], v[1]);
    return;
  }
#endif
  const auto row_at = [&](int i, const uint8_t*& row, const float4*& xr, const float*& xsr) {
    row = (i < nr ? gate : up) + (i < nr ? i : i - nr) * p.row_bytes;
    xr = xs, xsr = xsum;
  };
  for (int h = 0; h < 2; ++h) {  // the gate rows while the up rows still arrive
    wait_spans(bulk, &bars[h], h == 0);
    __syncthreads();
    rows_dot_staged<T, 1>(h * nr, (h + 1) * nr, p.d, 1, 0, row_at, sums);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < nr; r += blockDim.x)
    act[r] = expert_glu(p.glu, static_cast<int64_t>(e) * p.ff + r0 + r, sums[r], sums[nr + r]);
}

struct DownParams {
  const uint8_t* down;  // {ff, d, E}
  size_t row_bytes, span_slot;
  Routing route;
  const float* act;  // {ff, k, n}
  const float* down_bias;  // {d, E}, or null
  float* y;          // {d, n}
  int d, ff, E, k, rows;  // rows: output rows per block
  bool bulk;
};

// grid (d / rows, n). Shared memory: k spans of rows, the k act rows, the k · rows
// sums, with run scales the k act rows' run sums.
template <DType T>
__global__ void __launch_bounds__(kExpertThreads) moe_down_kernel(const __grid_constant__ DownParams p) {
  extern __shared__ uint4 smem[];
  __shared__ int32_t ids[kMaxRouted];
  __shared__ float weights[kMaxRouted];
  __shared__ int mis[kMaxRouted];  // where each expert's span starts in its slot
  __shared__ uint64_t bars[2];     // bulk copies: the first half of the experts, the rest
  const int t = blockIdx.y, r0 = blockIdx.x * p.rows, nr = min(p.rows, p.d - r0);
  if (p.route.logits) {
    if (threadIdx.x < 32)
      route_warp(p.route.logits + static_cast<int64_t>(t) * p.E, p.E, p.k, p.route.renormalize, ids, weights);
  } else {
    pdl_begin();
    if (threadIdx.x < p.k) {
      ids[threadIdx.x] = p.route.ids[t * p.k + threadIdx.x];
      weights[threadIdx.x] = p.route.weights[t * p.k + threadIdx.x];
    }
  }
  __syncthreads();
  auto* sm = reinterpret_cast<uint8_t*>(smem);
  const int half = (p.k + 1) / 2;
  const bool bulk = kBulkSpans && p.bulk;
  // A bad id reads expert 0 against its NaN act, so the token's output shows it.
  const auto span = [&](int j) {
    const size_t e = ids[j] >= 0 && ids[j] < p.E ? static_cast<size_t>(ids[j]) : 0;
    return p.down + (e * p.d + r0) * p.row_bytes;
  };
  const size_t bytes = nr * p.row_bytes;
  if (bulk) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
      for (int h = 0; h < 2; ++h) {
        const int j0 = h == 0 ? 0 : half, j1 = h == 0 ? half : p.k;
        mbarrier_init(&bars[h]);
        mbarrier_expect(&bars[h], static_cast<uint32_t>((j1 - j0) * bytes));
        for (int j = j0; j < j1; ++j) bulk_copy(sm + j * p.span_slot, span(j), static_cast<uint32_t>(bytes), &bars[h]);
      }
    }
    if (threadIdx.x < p.k) mis[threadIdx.x] = 0;
#endif
  } else {
    for (int j = 0; j < p.k; ++j) {
      const uint8_t* row = stage_span(sm + j * p.span_slot, span(j), bytes);
      if (threadIdx.x == 0) mis[j] = static_cast<int>(row - (sm + j * p.span_slot));
      if (j == half - 1) cp_async_commit();
    }
    cp_async_commit();
  }
  if (p.route.logits) pdl_begin();
  const int act_chunks = p.ff / 4;
  auto* xs = reinterpret_cast<float4*>(sm + p.k * p.span_slot);
  const auto* act = reinterpret_cast<const float4*>(p.act + static_cast<int64_t>(t) * p.k * p.ff);
  for (int c = threadIdx.x; c < p.k * act_chunks; c += blockDim.x) {
    const int j = c / act_chunks, cc = c % act_chunks;
    xs[j * act_chunks + swizzled_chunk(cc)] = __ldcg(act + c);
  }
  float* sums = reinterpret_cast<float*>(xs + p.k * act_chunks);  // [expert][row]
  float* xsum = sums + p.k * p.rows;                              // [expert][ff / 32]
  // Also orders thread 0's mbarrier_init before any thread's wait on it (bulk).
  __syncthreads();
  if constexpr (kHasRunScales<T>) stage_run_sums(xs, p.k, p.ff / 32, xsum);
  const auto row_at = [&](int i, const uint8_t*& row, const float4*& xr, const float*& xsr) {
    const int j = i / nr;
    row = sm + j * p.span_slot + mis[j] + (i - j * nr) * p.row_bytes;
    xr = xs + j * act_chunks, xsr = xsum + j * (p.ff / 32);
  };
  for (int h = 0; h < 2; ++h) {  // the first experts while the others still arrive
    wait_spans(bulk, &bars[h], h == 0);
    __syncthreads();
    rows_dot_staged<T, 1>(h * half * nr, h == 0 ? half * nr : p.k * nr, p.ff, 1, 0, row_at, sums);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < nr; r += blockDim.x) {
    float total = 0;
    for (int j = 0; j < p.k; ++j) {
      const int e = ids[j] >= 0 && ids[j] < p.E ? ids[j] : 0;
      total += weights[j] * (sums[j * nr + r] + expert_bias(p.down_bias, static_cast<int64_t>(e) * p.d + r0 + r));
    }
    p.y[static_cast<int64_t>(t) * p.d + r0 + r] = total;
  }
}

// Each chosen expert's part on its own (the decode MoE with a shared expert, whose
// add sums the parts): grid (d / rows, k, n); a block copies one span of one expert's
// rows and stages that expert's act row alone. Writes the unweighted sums and, from
// the first block of each (token, expert), the expert's weight; y is not used.
struct DownPartParams : DownParams {
  ExpertParts parts;  // {d, k, n} sums, {k, n} weights
};

// Lets shared_expert_add launch at once (it reads g and u before its wait: safe, as the
// top of the file says), and at 48 registers (five blocks an SM) leaves it room beside
// four down_part blocks, so its blocks wait resident rather than launch when down_part
// ends (PERFORMANCE.md session 44: +0.9% at one token; the cap alone cost 1%).
template <DType T, bool kReadPick = false>
__global__ void __launch_bounds__(kExpertThreads, 5) moe_down_part_kernel(const __grid_constant__ DownPartParams p) {
  extern __shared__ uint4 smem[];
  __shared__ int32_t ids[kMaxRouted];
  __shared__ float weights[kMaxRouted];
  __shared__ uint64_t bar;
  pdl_launch_dependents();
  const int t = blockIdx.z, j = blockIdx.y, r0 = blockIdx.x * p.rows, nr = min(p.rows, p.d - r0);
  const int pair = t * p.k + j;
  if constexpr (kReadPick) {  // routed from logits, published by gate_up
    if (threadIdx.x == 0) read_pick(p.parts.route + pair, ids[j], weights[j]);
  } else if (p.route.logits) {
    if (threadIdx.x < 32)
      route_warp(p.route.logits + static_cast<int64_t>(t) * p.E, p.E, p.k, p.route.renormalize, ids, weights);
  } else {
    pdl_wait();
    if (threadIdx.x == 0) ids[j] = p.route.ids[pair], weights[j] = p.route.weights[pair];
  }
  __syncthreads();
  auto* sm = reinterpret_cast<uint8_t*>(smem);
  // A bad id reads expert 0 against its NaN act, so the token's output shows it.
  const size_t e = ids[j] >= 0 && ids[j] < p.E ? static_cast<size_t>(ids[j]) : 0;
  const uint8_t* src = p.down + (e * p.d + r0) * p.row_bytes;
  const size_t bytes = nr * p.row_bytes;
  const bool bulk = kBulkSpans && p.bulk;
  const uint8_t* rows = sm;
  if (bulk) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
      mbarrier_init(&bar);
      mbarrier_expect(&bar, static_cast<uint32_t>(bytes));
      bulk_copy(sm, src, static_cast<uint32_t>(bytes), &bar);
    }
#endif
  } else {
    rows = stage_span(sm, src, bytes);
    cp_async_commit();
  }
  if (p.route.logits) pdl_wait();
  const int chunks = p.ff / 4;
  auto* xs = reinterpret_cast<float4*>(sm + p.span_slot);
  const auto* act = reinterpret_cast<const float4*>(p.act + static_cast<int64_t>(pair) * p.ff);
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) xs[swizzled_chunk(c)] = __ldcg(act + c);
  float* sums = reinterpret_cast<float*>(xs + chunks);
  float* xsum = sums + p.rows;
  // Also orders thread 0's mbarrier_init before any thread's wait on it (bulk).
  __syncthreads();
  if constexpr (kHasRunScales<T>) stage_run_sums(xs, 1, p.ff / 32, xsum);
  wait_spans(bulk, &bar, false);
  __syncthreads();
  rows_dot_staged<T, 1>(
      0, nr, p.ff, 1, 0,
      [&](int i, const uint8_t*& row, const float4*& xr, const float*& xsr) {
        row = rows + i * p.row_bytes, xr = xs, xsr = xsum;
      },
      sums);
  __syncthreads();
  for (int r = threadIdx.x; r < nr; r += blockDim.x)
    p.parts.sums[static_cast<int64_t>(pair) * p.d + r0 + r] =
        sums[r] + expert_bias(p.down_bias, e * p.d + r0 + r);
  if (blockIdx.x == 0 && threadIdx.x == 0) p.parts.weights[pair] = weights[j];
}

// y {d, n} = the parts' weighted sum in expert order, as moe_down adds them: down
// for a model without a shared expert, whose add would sum them (one expert a block
// and this launch beat moe_down's k experts a block on Qwen3-30B-A3B's rows of 768:
// PERFORMANCE.md, session 63). It sets the published picks back, as that add would.
__global__ void moe_parts_sum_kernel(const ExpertParts parts, int d, int n, int k, float* y) {
  pdl_begin();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (parts.route && i < n * k) parts.route[i] = kNoPick;  // every down_part block has read its pick
  if (i >= d * n) return;
  const int t = i / d, r = i % d;
  float routed = 0;
  for (int j = 0; j < k; ++j)
    routed += parts.weights[t * k + j] * parts.sums[static_cast<int64_t>(t * k + j) * d + r];
  y[i] = routed;
}

// Shared memory a kernel may take; rows per block shrink until it fits.
constexpr size_t kSmemBudget = 96 * 1024;

// Halves a launch's rows per block until smem() (which reads rows and span_slot) fits.
template <class Params, class Smem>
void fit_rows(Params& p, const Smem& smem) {
  for (;; p.rows /= 2) {
    p.span_slot = span_slot_bytes(p.rows * p.row_bytes);
    if (smem() <= kSmemBudget) return;
    if (p.rows == 1) throw std::invalid_argument("cuda moe_ffn: expert rows too long for shared memory");
  }
}

// moe.cu's gate_up kernel for x's tokens.
void launch_gate_up(const Tensor& x, const ExpertWeights& ex, int k, const Routing& route, float* act,
                    unsigned long long* route_out, cudaStream_t s) {
  const Tensor &gate = ex.gate, &up = ex.up;
  const int d = static_cast<int>(x.ne[0]), ff = static_cast<int>(ex.down.ne[0]), E = static_cast<int>(gate.ne[2]);
  const int n = static_cast<int>(x.rows());
  // 8 ff rows per gate_up block and 4 output rows per down block: at one token, 512
  // blocks of each on a 35B-A3B layer, about four per SM of an H100 (all resident at
  // 64 registers). The dot products after the copies land are what a step waits for
  // (PERFORMANCE.md, session 8), and smaller blocks spread them over more warps and
  // end sooner: on an H100, 16 / 8 rows ran 354.6 tokens/s, 8 / 8 378, 8 / 4 384.3,
  // 16 / 4 360, 4 / 4 375.5, 8 / 2 351.5 (zinc bench tg128).
  GateUpParams g{static_cast<const uint8_t*>(gate.data),
                 static_cast<const uint8_t*>(up.data),
                 gate.row_bytes(),
                 0,
                 x.as<const float>(),
                 route,
                 expert_glu_of(ex),
                 act,
                 d,
                 ff,
                 E,
                 k,
                 std::min(8, ff),
                 spans_bulk_copyable({gate.data, up.data}, gate.row_bytes())};
  const int gate_up_runs = has_run_scales(gate.type) ? d / 32 : 0;
  auto gate_up_smem = [&] { return 2 * g.span_slot + (d + 2 * g.rows + gate_up_runs) * sizeof(float); };
  fit_rows(g, gate_up_smem);
  g.route_out = route_out;
  dispatch_weight_type(gate.type, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    const auto go = [&]<auto kKernel>() {
      allow_smem<kKernel>(kSmemBudget);
      launch_pdl_smem(kKernel, dim3(ceil_div(ff, g.rows), k, n), kExpertThreads, gate_up_smem(), s, g);
    };
    if (route_out) go.template operator()<moe_gate_up_kernel<T, true>>();
    else go.template operator()<moe_gate_up_kernel<T>>();
  });
  ZINC_CUDA_LAUNCHED("moe_gate_up");
}

// The routed experts' down after gate_up: with `parts` one expert a block (down_part),
// else each block sums all k experts for its output rows (down). `read_pick`: gate_up
// published the picks (route_out).
void launch_down(const ExpertWeights& ex, int k, int n, const Routing& route, const float* act, const Tensor& y,
                 const ExpertParts* parts, bool read_pick, cudaStream_t s) {
  const Tensor& down = ex.down;
  const int d = static_cast<int>(down.ne[1]), ff = static_cast<int>(down.ne[0]), E = static_cast<int>(down.ne[2]);
  // 4 output rows a block (launch_gate_up's comment has the sweep).
  DownParams dp{static_cast<const uint8_t*>(down.data),
                down.row_bytes(),
                0,
                route,
                act,
                ex.down_bias.as<const float>(),
                y.as<float>(),
                d,
                ff,
                E,
                k,
                std::min(4, d),
                spans_bulk_copyable({down.data}, down.row_bytes())};
  const int down_runs = has_run_scales(down.type) ? ff / 32 : 0;
  if (parts) {
    // 32 rows of one expert per block: 512 blocks on a 35B-A3B layer at one token, as
    // moe_down. With more tokens (routed once) that many rows made thousands of small
    // blocks; on an H200 (PERFORMANCE.md, session 34) 64 rows were best at 2 sequences,
    // 64 and 128 equal at 4, 128 best at 8 (+6% over 32).
    DownPartParams pp{dp, *parts};
    pp.rows = std::min(n < kRouteOnceMinTokens ? 32 : n < 4 ? 64 : 128, d);
    auto part_smem = [&] { return pp.span_slot + (ff + pp.rows + down_runs) * sizeof(float); };
    fit_rows(pp, part_smem);
    dispatch_weight_type(down.type, [&](auto type) {
      constexpr DType T = decltype(type)::value;
      const auto go = [&]<auto kKernel>() {
        allow_smem<kKernel>(kSmemBudget);
        launch_pdl_smem(kKernel, dim3(ceil_div(d, pp.rows), k, n), kExpertThreads, part_smem(), s, pp);
      };
      if (read_pick) go.template operator()<moe_down_part_kernel<T, true>>();
      else go.template operator()<moe_down_part_kernel<T>>();
    });
    ZINC_CUDA_LAUNCHED("moe_down_part");
    return;
  }
  // Down rows of every chosen expert per block; only this kernel needs them to fit.
  auto down_smem = [&] { return k * dp.span_slot + k * (ff + dp.rows + down_runs) * sizeof(float); };
  fit_rows(dp, down_smem);
  dispatch_weight_type(down.type, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    allow_smem<moe_down_kernel<T>>(kSmemBudget);
    launch_pdl_smem(moe_down_kernel<T>, dim3(ceil_div(d, dp.rows), n), kExpertThreads, down_smem(), s, dp);
  });
  ZINC_CUDA_LAUNCHED("moe_down");
}

void launch_experts(const Tensor& x, const ExpertWeights& ex, int k, const Routing& route, const Tensor& y, float* act,
                    const ExpertParts* parts, bool sum_parts, cudaStream_t s) {
  const Tensor &gate = ex.gate, &up = ex.up, &down = ex.down;
  if (gate.type != up.type) throw std::invalid_argument("cuda moe_ffn: gate and up experts of different types");
  const int d = static_cast<int>(x.ne[0]), ff = static_cast<int>(down.ne[0]), E = static_cast<int>(gate.ne[2]);
  const int n = static_cast<int>(x.rows());
  if (d % 32 != 0 || ff % 32 != 0) throw std::invalid_argument("cuda moe_ffn: rows not a multiple of 32 elements");
  if (k > kMaxRouted || E > kMaxRouterExperts)
    throw std::invalid_argument("cuda moe_ffn: over 32 chosen or 512 experts");

  // Large experts (gpt-oss's) are streamed (moe_stream.cu); these kernels take the rest.
  // gate_up publishes the picks for down_part (unread if down is streamed: whatever
  // sums the parts sets them back either way).
  unsigned long long* route_out = nullptr;
  if (!stream_gate_up(x, ex, k, route, act, s)) {
    route_out = parts && route.logits ? parts->route : nullptr;
    launch_gate_up(x, ex, k, route, act, route_out, s);
  } else if (sum_parts) {
    parts = nullptr;  // streamed down writes y itself, with no launch to sum parts
  }
  if (!stream_down(ex, k, n, route, act, y, parts, s)) launch_down(ex, k, n, route, act, y, parts, route_out, s);
  if (parts && sum_parts) {
    launch_pdl(moe_parts_sum_kernel, ceil_div(d * n, 256), 256, s, *parts, d, n, k, y.as<float>());
    ZINC_CUDA_LAUNCHED("moe_parts_sum");
  }
}

}  // namespace

void moe_route(const float* logits, int64_t E, int64_t n, int k, bool renormalize, int32_t* ids, float* weights,
               cudaStream_t s) {
  if (E > kMaxRouterExperts || k > kMaxRouted)
    throw std::invalid_argument("cuda moe_route: more than 512 experts or 32 chosen");
  launch_pdl(moe_route_kernel, ceil_div(n, 4), 128, s, logits, static_cast<int>(E), static_cast<int>(n), k,
             renormalize, ids, weights);
  ZINC_CUDA_LAUNCHED("moe_route");
}

size_t moe_ffn_scratch_floats(int64_t ff, int64_t n, int64_t k) { return static_cast<size_t>(ff * n * k); }

void moe_ffn(const Tensor& x, const ExpertWeights& experts, const Tensor& ids, const Tensor& weights, const Tensor& y,
             float* act, cudaStream_t s) {
  launch_experts(x, experts, static_cast<int>(ids.ne[0]),
                 Routing{nullptr, ids.as<const int32_t>(), weights.as<const float>(), false}, y, act, nullptr, false,
                 s);
}

void moe_ffn_routed(const Tensor& x, const Tensor& logits, int k, bool renormalize, const ExpertWeights& experts,
                    const Tensor& y, float* act, const ExpertParts* parts, bool sum_parts, int32_t* ids,
                    float* weights, cudaStream_t s) {
  if (x.rows() >= kRouteOnceMinTokens) {
    moe_route(logits.as<const float>(), logits.ne[0], x.rows(), k, renormalize, ids, weights, s);
    return launch_experts(x, experts, k, Routing{nullptr, ids, weights, false}, y, act, parts, sum_parts, s);
  }
  launch_experts(x, experts, k, Routing{logits.as<const float>(), nullptr, nullptr, renormalize}, y, act, parts,
                 sum_parts, s);
}

}  // namespace zinc::cuda
