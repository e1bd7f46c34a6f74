// Could a persistent decode kernel reach issue 4's bar (3x llama.cpp: 1.51 ms per token
// on an H100, 1.44 ms on an H200)? Not part of the build; results in PERFORMANCE.md,
// sessions 16 and 17, and docs/logs/persistent-probe-*.log.
//
// One launch, one block per SM, streams the bytes of the flagship's decode step
// (qwen35moe 35B-A3B benchmark file, depth 0: 2.68 GB, 242 barriers) op by op, as a
// persistent kernel would. A block's share of each op (whole rows) goes through a ring
// of shared-memory slots filled by bulk copies; a grid-wide barrier separates dependent
// ops, and ops that read what the op before them read join it without one. A block may
// fetch up to `ahead` barriers past the op it consumes, except the routed experts'
// gate/up, whose addresses only the router gives. Barriers: session 16 compared three
// forms (its commit's version of this file, docs/logs/persistent-probe-session16.log);
// this one runs the best, "split": a counting barrier whose arrival (a release add) is
// followed by the next ops' copies and then the acquire polls.
//
// Session 16 stood in for the arithmetic by reading each slot once. Here ("dots") the
// block's warps take the dot products of a slot's rows with the op's activations as
// zinc's decode expert kernels do (expert_decode.cuh's run_dot), the activations staged
// from L2 into shared memory after the op's barrier (RMS-normalised where the model
// normalises, as a fused norm would); the routed experts' copies wait for a warp's
// top-8 of the router's outputs; the delta-rule state is read as rows and written
// back. Mode 2 takes the Q8_0 rows against int8 activations (DP4A). Every op's outputs
// are checked against one warp per row reading global memory.
// Session 18 added the warps mode (first in the output; `warps` prints it alone): the
// same step with each warp streaming its own rows through its own ring, the layout of
// zinc's matvec, with 4 slots of 2816 bytes or 2 of 5632, units round robin or
// contiguous.
// Prints the bytes alone, with barriers (this list, the same as 16-byte rows, session
// 16's list), the dot products per weight type without barriers, and the whole.
//   nvcc -std=c++20 -arch=sm_90a -O3 -I src -o /tmp/persistent_probe tools/persistent_probe.cu && /tmp/persistent_probe
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/expert_decode.cuh"

namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32, kRingBytes = 192 * 1024, kMaxOps = 512;

using zinc::DType;
namespace zc = zinc::cuda;

constexpr int kMaxStaged = 4096;  // activation floats an op stages

enum OpFlags : uint8_t {
  kPrefetch = 1,   // its bytes may be fetched before the barrier in front of it
  kRouted = 2,     // its copies wait for a top-8 of the router's outputs
  kNormed = 4,     // its staged activations are RMS-normalised first
  kJoinNext = 8,   // no barrier after it (the next op reads what it read)
  kWriteBack = 16, // its rows are written back (the delta-rule state)
};
struct Op {
  uint64_t offset;  // into the weight buffer
  uint32_t bytes;   // rows · row_bytes, a multiple of 16
  uint32_t rows, row_bytes, in;  // rows of `in` elements of `type`
  uint32_t y;         // its first output in the outputs
  uint32_t x_floats;  // activations staged after its barrier (0: keep the last op's)
  uint32_t x_rows;    // rows per activation slice of `in` (0: every row reads the first)
  uint32_t router_y;  // kRouted: where the router's 256 outputs are
  DType type;
  uint8_t flags;
};
__constant__ Op ops[kMaxOps];  // copied into each block's shared memory at the start

__device__ unsigned arrivals;  // the barrier's counter, zeroed before each launch
__device__ float activations[kMaxStaged];  // what every op stages (host-written)

__device__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

enum Barrier { kNone = 0, kSplit = 1 };

// This block's share of op i: rows [row0, row0 + n), bytes [start, start + len).
__device__ void share(const Op& op, uint32_t& row0, uint64_t& start, uint32_t& len) {
  const uint32_t per = (op.rows + gridDim.x - 1) / gridDim.x;
  row0 = per * blockIdx.x;
  const uint32_t n = row0 >= op.rows ? 0 : (op.rows - row0 < per ? op.rows - row0 : per);
  start = op.offset + static_cast<uint64_t>(row0) * op.row_bytes;
  len = n * op.row_bytes;
}
// Bytes of a slot's chunk of op: whole rows.
__device__ uint32_t chunk_bytes(const Op& op, uint32_t slot_bytes) { return slot_bytes / op.row_bytes * op.row_bytes; }

// Row · x over `in` elements (a warp; lane 0 gets the sum).
template <DType T>
__device__ float row_dot(const uint8_t* row, int in, const float* x) {
  const int lane = threadIdx.x % 32;
  float s = 0;
  for (int e = lane * 8; e < in; e += 256) {
    float w[8];
    zc::Dequant<T>::load8(row, e, w);
#pragma unroll
    for (int i = 0; i < 8; ++i) s += w[i] * x[e + i];
  }
  return zc::warp_sum(s);
}
__device__ float row_dot(DType t, const uint8_t* row, int in, const float* x) {
  switch (t) {
    case DType::Q8_0: return row_dot<DType::Q8_0>(row, in, x);
    case DType::Q4_K: return row_dot<DType::Q4_K>(row, in, x);
    case DType::Q5_K: return row_dot<DType::Q5_K>(row, in, x);
    case DType::Q6_K: return row_dot<DType::Q6_K>(row, in, x);
    default: return row_dot<DType::F32>(row, in, x);
  }
}

// The reference: one warp per row of op `op`, from global memory.
__global__ void reference_kernel(Op op, const uint8_t* weights, float* y) {
  __shared__ float x[kMaxStaged];
  __shared__ float red[32];
  const uint32_t staged = op.x_floats;
  float ss = 0;
  for (uint32_t i = threadIdx.x; i < staged; i += blockDim.x) ss += activations[i] * activations[i];
  const float total = zc::block_sum(ss, red);
  const float scale = op.flags & kNormed ? rsqrtf(total / staged + 1e-6f) : 1.0f;
  for (uint32_t i = threadIdx.x; i < staged; i += blockDim.x) x[i] = activations[i] * scale;
  __syncthreads();
  const uint32_t r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= op.rows) return;
  const float* xr = x + (op.x_rows ? r / op.x_rows % (staged / op.in) * op.in : 0);
  const float v = row_dot(op.type, weights + op.offset + static_cast<uint64_t>(r) * op.row_bytes, op.in, xr);
  if (threadIdx.x % 32 == 0) y[op.y + r] = v;
}

// The dot products of a chunk's `rows` rows (in shared memory) with the staged
// activations, as zinc's decode expert kernels take them (expert_decode.cuh's run_dot:
// a lane per run of 32 elements, K-quant scales decoded once per run, activations
// swizzled, with their run sums); short rows share a warp. Row r is row first + r of
// the op, whose output it writes.
template <DType T>
__device__ void consume_rows(const Op& o, const uint8_t* chunk, uint32_t first, uint32_t rows, const float4* xs,
                             const float* xsum, uint32_t staged, float* y, uint8_t* back) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, runs = static_cast<int>(o.in / 32);
  const int per_row = runs >= 32 || 32 % runs != 0 ? 32 : runs, per_pass = 32 / per_row, sub = lane % per_row;
  const int x_chunks = static_cast<int>(o.in / 4), slices = static_cast<int>(staged / o.in);
  for (uint32_t r0 = warp * per_pass; r0 < rows; r0 += kWarps * per_pass) {
    const uint32_t r = r0 + lane / per_row, g = first + r;
    float acc[1] = {0};
    if (r < rows) {
      const int slice = o.x_rows ? static_cast<int>(g / o.x_rows) % slices : 0;
      for (int q = sub; q < runs; q += per_row)
        zc::run_dot<T, 1>(chunk + r * o.row_bytes, q, xs + slice * x_chunks, xsum + slice * runs, x_chunks, 1, acc);
    }
    for (int d = per_row / 2; d > 0; d >>= 1) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], d);
    if (sub == 0 && r < rows) y[o.y + g] = acc[0];
  }
  if (back)  // the rows written back where they came from
    for (uint32_t i = threadIdx.x; i < rows * o.row_bytes / 16; i += kThreads)
      reinterpret_cast<uint4*>(back)[i] = reinterpret_cast<const uint4*>(chunk)[i];
}

// Mode 2 ("int8"): Q8_0 rows against activations quantized to int8 per 32 (a scale
// each) when staged, four products per instruction (DP4A); a lane per 32-element
// block, short rows sharing a warp as above.
__device__ void consume_q8_int8(const Op& o, const uint8_t* chunk, uint32_t first, uint32_t rows, const int8_t* xq,
                                const float* xq_scale, uint32_t staged, float* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, runs = static_cast<int>(o.in / 32);
  const int per_row = runs >= 32 || 32 % runs != 0 ? 32 : runs, per_pass = 32 / per_row, sub = lane % per_row;
  const int slices = static_cast<int>(staged / o.in);
  for (uint32_t r0 = warp * per_pass; r0 < rows; r0 += kWarps * per_pass) {
    const uint32_t r = r0 + lane / per_row, g = first + r;
    float acc = 0;
    if (r < rows) {
      const int slice = o.x_rows ? static_cast<int>(g / o.x_rows) % slices : 0;
      const int8_t* x = xq + slice * o.in;
      const float* xs = xq_scale + slice * runs;
      for (int q = sub; q < runs; q += per_row) {
        const uint8_t* b = chunk + r * o.row_bytes + q * 34;
        const uint16_t* codes = reinterpret_cast<const uint16_t*>(b + 2);  // 2-byte aligned
        const int4 x0 = reinterpret_cast<const int4*>(x + q * 32)[0], x1 = reinterpret_cast<const int4*>(x + q * 32)[1];
        const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        int dot = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          dot = __dp4a(static_cast<int>(codes[2 * j] | (static_cast<uint32_t>(codes[2 * j + 1]) << 16)), xv[j], dot);
        acc += static_cast<float>(dot) * zc::half_to_float(*reinterpret_cast<const uint16_t*>(b)) * xs[q];
      }
    }
    for (int d = per_row / 2; d > 0; d >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, d);
    if (sub == 0 && r < rows) y[o.y + g] = acc;
  }
}

// Warp 0: the top-8 of the router's 256 outputs (ties to the lower expert), reduced to
// a shift of the routed op's addresses that is always 0 but that the copies must wait for.
__device__ uint32_t route_shift_of(const float* router) {
  const int lane = threadIdx.x % 32;
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __ldcg(router + lane + 32 * i);
  int id_sum = 0;
  for (int j = 0; j < 8; ++j) {
    float best = -INFINITY;
    int bi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (v[i] > best) best = v[i], bi = i;
    const float m = zc::warp_max(best);
    const int src = __ffs(__ballot_sync(0xffffffffu, best == m)) - 1;
    const int bid = __shfl_sync(0xffffffffu, bi, src);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (lane == src && i == bid) v[i] = -INFINITY;
    id_sum += src + 32 * bid;
  }
  return id_sum > 100000 ? 256 : 0;
}

// The first `staged` activations from L2 into x4 as swizzled chunks when `store`,
// RMS-normalised there when `normed` (as a fused norm would); returns the norm's scale
// (1 when not normed). A block's threads together; block_sum is its barrier.
__device__ float stage_activations(float4* x4, uint32_t staged, bool store, bool normed, float* red) {
  float ss = 0;
  for (uint32_t i = threadIdx.x; i < staged / 4; i += kThreads) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(activations) + i);
    if (store) x4[zc::swizzled_chunk(static_cast<int>(i))] = v;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  const float scale = normed ? rsqrtf(zc::block_sum(ss, red) / staged + 1e-6f) : 1.0f;
  if (store && normed)
    for (uint32_t i = threadIdx.x; i < staged / 4; i += kThreads) {
      float4& v = x4[i];
      v.x *= scale, v.y *= scale, v.z *= scale, v.w *= scale;
    }
  return scale;
}

// The counting grid barrier's halves (thread 0 of each block): a release add, then
// acquire polls until every block of this round has arrived.
__device__ void grid_arrive() { asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&arrivals) : "memory"); }
__device__ void grid_wait(unsigned target) {
  unsigned seen;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(&arrivals) : "memory");
  } while (seen < target);
}

// The last op whose copies may be issued while op `consuming` is consumed: the ops
// joined to it, then up to `ahead` barriers further (every op without barriers).
__device__ int last_fetchable(const Op* table, int n_ops, int total, int consuming, int barriers, int ahead) {
  int last = barriers ? consuming : total - 1, crossed = 0;
  while (last + 1 < total) {
    const bool joined = table[last % n_ops].flags & kJoinNext, prefetch = table[(last + 1) % n_ops].flags & kPrefetch;
    if (!prefetch || (!joined && crossed == ahead)) break;
    crossed += !joined;
    ++last;
  }
  return last;
}

template <int kSlots>
__global__ void __launch_bounds__(kThreads, 1)
    step_kernel(uint8_t* weights, int n_ops, int steps, int barriers, int ahead, int dots, float* y, unsigned* sink) {
  // dots: 0 read the bytes only; 1 dot products in f32; 2 the same with Q8_0 rows in int8 (DP4A)
  constexpr int kSlotBytes = kRingBytes / kSlots;
  extern __shared__ __align__(128) uint8_t ring[];
  float* xs = reinterpret_cast<float*>(ring + kRingBytes);  // the op's activations
  // The op table, read from shared memory: from the constant bank a table of a few
  // hundred ops misses the constant cache on the issuing thread's path (measured).
  Op* table = reinterpret_cast<Op*>(ring + kRingBytes + kMaxStaged * 4);
  for (int i = threadIdx.x; i < n_ops * static_cast<int>(sizeof(Op) / 4); i += kThreads)
    reinterpret_cast<uint32_t*>(table)[i] = reinterpret_cast<const uint32_t*>(ops)[i];
  __shared__ uint64_t full[kSlots];
  __shared__ float red[32];
  __shared__ uint32_t route_shift;
  __shared__ float xsum[kMaxStaged / 32];  // the staged activations' run sums
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;");
    route_shift = 0;
  }
  __syncthreads();
  const int total = n_ops * steps, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned target = 0;            // the counting barrier's next multiple of the grid
  long issued = 0, consumed = 0;  // chunks, over the whole launch
  int issue_op = 0;               // thread 0: the op whose chunks it issues next, from issue_pos
  uint32_t issue_pos = 0, staged = 0;
  bool staged_int8 = false, staged_normed = false;
  int8_t* xq = reinterpret_cast<int8_t*>(xs);                   // mode 2: int8 activations
  float* xq_scale = xs + kMaxStaged / 4;                         // and their scales, after them
  // Thread 0 fills free slots with chunks up to the last op it may fetch now.
  const auto issue = [&](int consuming) {
    const int last = last_fetchable(table, n_ops, total, consuming, barriers, ahead);
    while (issued < consumed + kSlots && issue_op <= last) {
      uint32_t row0, len;
      uint64_t start;
      share(table[issue_op % n_ops], row0, start, len);
      if (issue_pos >= len) {
        ++issue_op, issue_pos = 0;
        continue;
      }
      const uint32_t cb = chunk_bytes(table[issue_op % n_ops], kSlotBytes);
      const uint32_t n = len - issue_pos < cb ? len - issue_pos : cb;
      const uint32_t shift = table[issue_op % n_ops].flags & kRouted ? route_shift : 0;
      const int slot = static_cast<int>(issued % kSlots);
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(&full[slot])), "r"(n));
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_u32(ring + slot * kSlotBytes)),
                   "l"(weights + start + issue_pos + shift), "r"(n), "r"(smem_u32(&full[slot]))
                   : "memory");
      issue_pos += n, ++issued;
    }
  };
  uint32_t acc = 0;
  for (int op = 0; op < total; ++op) {
    const Op& o = table[op % n_ops];
    uint32_t row0, len;
    uint64_t start;
    share(o, row0, start, len);
    if (dots) {
      if (o.flags & kRouted) {
        if (warp == 0) {
          const uint32_t shift = route_shift_of(y + o.router_y);
          if (lane == 0) route_shift = shift;
        }
        __syncthreads();
      }
      // The op's activations, from L2, normalised where the model does: as floats, or
      // (mode 2, Q8_0 ops) as int8 per 32 with a scale each. An op that keeps the last
      // op's stages them again when it needs the other form.
      const bool as_int8 = dots == 2 && o.type == DType::Q8_0;
      if (o.x_floats || (staged && staged_int8 != as_int8)) {
        if (o.x_floats) staged = o.x_floats, staged_normed = o.flags & kNormed;
        staged_int8 = as_int8;
        float4* x4 = reinterpret_cast<float4*>(xs);
        const float scale = stage_activations(x4, staged, !as_int8, staged_normed, red);
        if (as_int8) {
          // A warp's 32 lanes take one 32-element block (staged is a multiple of 32).
          for (uint32_t i = threadIdx.x; i < staged; i += kThreads) {
            const float v = __ldcg(activations + i) * scale, d = zc::warp_max(fabsf(v)) / 127.0f;
            xq[i] = static_cast<int8_t>(d > 0 ? __float2int_rn(v / d) : 0);
            if (lane == 0) xq_scale[i / 32] = d;
          }
        }
        __syncthreads();
        if (!as_int8) zc::stage_run_sums(x4, static_cast<int>(staged / o.in), static_cast<int>(o.in / 32), xsum);
        __syncthreads();
      }
    }
    const uint32_t cb = chunk_bytes(o, kSlotBytes);
    for (uint32_t pos = 0; pos < len; pos += cb) {
      if (threadIdx.x == 0) issue(op);
      const int slot = static_cast<int>(consumed % kSlots);
      const unsigned parity = static_cast<unsigned>(consumed / kSlots) & 1;
      asm volatile("{ .reg .pred p; w: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra w; }" ::"r"(
                       smem_u32(&full[slot])),
                   "r"(parity)
                   : "memory");
      const uint32_t n = len - pos < cb ? len - pos : cb;
      const uint8_t* chunk = ring + slot * kSlotBytes;
      if (dots) {
        const uint32_t first = row0 + pos / o.row_bytes, rows = n / o.row_bytes;
        const float4* x4 = reinterpret_cast<const float4*>(xs);
        uint8_t* back = o.flags & kWriteBack ? weights + start + pos : nullptr;
        if (staged_int8) consume_q8_int8(o, chunk, first, rows, xq, xq_scale, staged, y);
        else switch (o.type) {
          case DType::Q8_0: consume_rows<DType::Q8_0>(o, chunk, first, rows, x4, xsum, staged, y, back); break;
          case DType::Q4_K: consume_rows<DType::Q4_K>(o, chunk, first, rows, x4, xsum, staged, y, back); break;
          case DType::Q5_K: consume_rows<DType::Q5_K>(o, chunk, first, rows, x4, xsum, staged, y, back); break;
          case DType::Q6_K: consume_rows<DType::Q6_K>(o, chunk, first, rows, x4, xsum, staged, y, back); break;
          default: consume_rows<DType::F32>(o, chunk, first, rows, x4, xsum, staged, y, back); break;
        }
      } else {
        for (uint32_t i = threadIdx.x; i < n / 16; i += kThreads) {
          const uint4 v = reinterpret_cast<const uint4*>(chunk)[i];
          acc ^= v.x + v.y + v.z + v.w;
        }
      }
      __syncthreads();  // the slot is free again
      ++consumed;
    }
    if (o.flags & kJoinNext) continue;
    if (barriers == kSplit) {
      // A counting barrier in two halves with the next op's copies between them: a
      // release issued after the copies might wait for them.
      __syncthreads();
      target += gridDim.x;
      if (threadIdx.x == 0) {
        grid_arrive();
        issue(op);
        grid_wait(target);
      }
      __syncthreads();
    }
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;  // keeps the reads
}

// ---- Mode "warps" (session 18): each warp streams its own rows -------------------
// The zinc matvec's layout (warp_stream.cuh) instead of a block on one slot at a time:
// every warp of the grid takes its own units of each op (a few whole rows, or a piece
// of a row too long for a slot) through its own ring of kWarpSlots slots, computes
// them as soon as they land and issues its next copies (into the ops after a barrier
// too, up to `ahead` barriers) before it reaches the barrier. The block meets only to
// stage the activations and at the grid barrier.
// Rings: 4 slots of 2816 bytes (8 rows of the routed down, Q5_K of 512) or 2 of twice that.
constexpr int kWarpRing = kWarps * 4 * 2816;

// How op o is cut into units: unit_rows whole rows, or one row in `pieces` pieces of
// whole 256-element groups; warp w of the grid takes units w, w + W, ...
struct Layout {
  uint32_t unit_rows, pieces, piece_elems, piece_bytes, units;
};
template <int kWarpSlotBytes>
__device__ Layout layout_of(const Op& o) {
  Layout l;
  const uint32_t warps = gridDim.x * kWarps;
  if (o.row_bytes <= static_cast<uint32_t>(kWarpSlotBytes)) {
    const uint32_t fit = kWarpSlotBytes / o.row_bytes, even = (o.rows + warps - 1) / warps;
    l.unit_rows = max(1u, min(fit, even));
    l.pieces = 1;
  } else {
    l.unit_rows = 1;
    uint32_t p = (o.row_bytes + kWarpSlotBytes - 1) / kWarpSlotBytes;
    while (o.in % (p * 256) != 0) ++p;
    l.pieces = p;
  }
  l.piece_elems = o.in / l.pieces;
  l.piece_bytes = o.row_bytes / l.pieces;
  l.units = (o.rows + l.unit_rows - 1) / l.unit_rows;
  return l;
}
// A warp's units: round robin (w, w + W, ...) or, `contiguous`, a run of them.
__device__ uint32_t units_of_warp(const Layout& l, uint32_t gw, bool contiguous) {
  const uint32_t warps = gridDim.x * kWarps;
  if (contiguous) {
    const uint32_t per = (l.units + warps - 1) / warps, first = gw * per;
    return first < l.units ? min(per, l.units - first) : 0;
  }
  return l.units > gw ? (l.units - 1 - gw) / warps + 1 : 0;
}
__device__ uint32_t unit_of_warp(const Layout& l, uint32_t gw, uint32_t k, bool contiguous) {
  const uint32_t warps = gridDim.x * kWarps;
  return contiguous ? gw * ((l.units + warps - 1) / warps) + k : gw + k * warps;
}

// A warp's dot products of one item: rows r0 .. r0 + nr of op o (whole rows), or the
// piece starting at element e0 of row r0. Returns the piece's sum in every lane
// (pieces), or writes the rows' outputs.
template <DType T>
__device__ float warp_item(const Op& o, const uint8_t* chunk, uint32_t r0, uint32_t nr, uint32_t elems, uint32_t e0,
                           bool piece, const float4* xs, const float* xsum, uint32_t staged, float* y) {
  const int lane = threadIdx.x % 32, runs = static_cast<int>(elems / 32);
  const int per_row = runs >= 32 || 32 % runs != 0 ? 32 : runs, per_pass = 32 / per_row, sub = lane % per_row;
  const int slices = static_cast<int>(staged / o.in);
  float total = 0;
  for (uint32_t rr = 0; rr < nr; rr += per_pass) {
    const uint32_t r = rr + lane / per_row, g = r0 + r;
    float acc[1] = {0};
    if (r < nr) {
      const int slice = o.x_rows ? static_cast<int>(g / o.x_rows) % slices : 0;
      const float4* x = xs + slice * (o.in / 4) + e0 / 4;
      const float* xsm = xsum + slice * (o.in / 32) + e0 / 32;
      for (int q = sub; q < runs; q += per_row) zc::run_dot<T, 1>(chunk + r * o.row_bytes, q, x, xsm, 0, 1, acc);
    }
    for (int d = per_row / 2; d > 0; d >>= 1) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], d);
    if (piece) total += __shfl_sync(0xffffffffu, acc[0], 0);
    else if (sub == 0 && r < nr) y[o.y + g] = acc[0];
  }
  return total;
}

template <int kWarpSlots>
__global__ void __launch_bounds__(kThreads, 1)
    warp_step_kernel(uint8_t* weights, int n_ops, int steps, int barriers, int ahead, int dots, float* y, unsigned* sink,
                     int contiguous) {
  constexpr int kWarpSlotBytes = kWarpRing / kWarps / kWarpSlots;
  extern __shared__ __align__(128) uint8_t ring[];
  float* xs = reinterpret_cast<float*>(ring + kWarpRing);
  Op* table = reinterpret_cast<Op*>(ring + kWarpRing + kMaxStaged * 4);
  for (int i = threadIdx.x; i < n_ops * static_cast<int>(sizeof(Op) / 4); i += kThreads)
    reinterpret_cast<uint32_t*>(table)[i] = reinterpret_cast<const uint32_t*>(ops)[i];
  __shared__ uint64_t full[kWarps][kWarpSlots];
  __shared__ float red[32];
  __shared__ uint32_t route_shift;
  __shared__ float xsum[kMaxStaged / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, total = n_ops * steps;
  const uint32_t gw = blockIdx.x * kWarps + warp;
  uint8_t* my_ring = ring + warp * kWarpSlots * kWarpSlotBytes;
  if (lane == 0) {
    for (int s = 0; s < kWarpSlots; ++s) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(&full[warp][s])));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  if (threadIdx.x == 0) route_shift = 0;
  __syncthreads();
  unsigned target = 0;
  long issued = 0, consumed = 0;
  int iop = 0;                  // the op whose items the warp issues next
  uint32_t ik = 0, ipc = 0;     // its unit (k-th of the warp's) and piece
  uint32_t acc = 0;
  // Lane 0 fills the warp's free slots with its items up to the last op it may fetch.
  const auto issue = [&](int consuming) {
    const int last = last_fetchable(table, n_ops, total, consuming, barriers, ahead);
    while (issued < consumed + kWarpSlots && iop <= last) {
      const Op& o = table[iop % n_ops];
      const Layout l = layout_of<kWarpSlotBytes>(o);
      if (ik >= units_of_warp(l, gw, contiguous)) {
        ++iop, ik = 0, ipc = 0;
        continue;
      }
      const uint32_t r0 = unit_of_warp(l, gw, ik, contiguous) * l.unit_rows, nr = min(l.unit_rows, o.rows - r0);
      const uint32_t bytes = l.pieces == 1 ? nr * o.row_bytes : l.piece_bytes;
      const uint64_t src = o.offset + uint64_t{r0} * o.row_bytes + ipc * l.piece_bytes + (o.flags & kRouted ? route_shift : 0);
      const int slot = static_cast<int>(issued % kWarpSlots);
      if (lane == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(&full[warp][slot])), "r"(bytes));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_u32(my_ring + slot * kWarpSlotBytes)),
                     "l"(weights + src), "r"(bytes), "r"(smem_u32(&full[warp][slot]))
                     : "memory");
      }
      ++issued;
      if (++ipc == l.pieces) ipc = 0, ++ik;
    }
  };
  uint32_t staged = 0;
  bool staged_normed = false;
  for (int op = 0; op < total; ++op) {
    const Op& o = table[op % n_ops];
    if (dots && ((o.flags & kRouted) || o.x_floats)) {
      __syncthreads();  // every warp is done with the last activations
      if ((o.flags & kRouted) && warp == 0) {
        const uint32_t shift = route_shift_of(y + o.router_y);
        if (lane == 0) route_shift = shift;
      }
      if (o.x_floats) {
        staged = o.x_floats, staged_normed = o.flags & kNormed;
        float4* x4 = reinterpret_cast<float4*>(xs);
        stage_activations(x4, staged, true, staged_normed, red);
        __syncthreads();
        zc::stage_run_sums(x4, static_cast<int>(staged / o.in), static_cast<int>(o.in / 32), xsum);
      }
      __syncthreads();
    }
    const Layout l = layout_of<kWarpSlotBytes>(o);
    const uint32_t mine = units_of_warp(l, gw, contiguous);
    for (uint32_t k = 0; k < mine; ++k) {
      float carry = 0;
      const uint32_t r0 = unit_of_warp(l, gw, k, contiguous) * l.unit_rows, nr = min(l.unit_rows, o.rows - r0);
      for (uint32_t pc = 0; pc < l.pieces; ++pc) {
        issue(op);
        const int slot = static_cast<int>(consumed % kWarpSlots);
        const unsigned parity = static_cast<unsigned>(consumed / kWarpSlots) & 1;
        asm volatile("{ .reg .pred p; w: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra w; }" ::"r"(
                         smem_u32(&full[warp][slot])),
                     "r"(parity)
                     : "memory");
        const uint8_t* chunk = my_ring + slot * kWarpSlotBytes;
        const uint32_t bytes = l.pieces == 1 ? nr * o.row_bytes : l.piece_bytes;
        if (dots) {
          const bool piece = l.pieces > 1;
          const float4* x4 = reinterpret_cast<const float4*>(xs);
          const uint32_t e0 = pc * l.piece_elems;
          float part = 0;
          switch (o.type) {
            case DType::Q8_0: part = warp_item<DType::Q8_0>(o, chunk, r0, nr, l.piece_elems, e0, piece, x4, xsum, staged, y); break;
            case DType::Q4_K: part = warp_item<DType::Q4_K>(o, chunk, r0, nr, l.piece_elems, e0, piece, x4, xsum, staged, y); break;
            case DType::Q5_K: part = warp_item<DType::Q5_K>(o, chunk, r0, nr, l.piece_elems, e0, piece, x4, xsum, staged, y); break;
            case DType::Q6_K: part = warp_item<DType::Q6_K>(o, chunk, r0, nr, l.piece_elems, e0, piece, x4, xsum, staged, y); break;
            default: part = warp_item<DType::F32>(o, chunk, r0, nr, l.piece_elems, e0, piece, x4, xsum, staged, y); break;
          }
          carry += part;
          if (piece && pc + 1 == l.pieces && lane == 0) y[o.y + r0] = carry;
          if (o.flags & kWriteBack) {
            uint4* back = reinterpret_cast<uint4*>(weights + o.offset + uint64_t{r0} * o.row_bytes + pc * l.piece_bytes);
            for (uint32_t i = lane; i < bytes / 16; i += 32) back[i] = reinterpret_cast<const uint4*>(chunk)[i];
          }
        } else {
          for (uint32_t i = lane; i < bytes / 16; i += 32) {
            const uint4 v = reinterpret_cast<const uint4*>(chunk)[i];
            acc ^= v.x + v.y + v.z + v.w;
          }
        }
        __syncwarp();  // the slot is free again
        ++consumed;
      }
    }
    issue(op);  // the next ops' items, before the barrier
    if (o.flags & kJoinNext) continue;
    if (barriers == kSplit) {
      __syncthreads();
      target += gridDim.x;
      if (threadIdx.x == 0) grid_arrive(), grid_wait(target);
      __syncthreads();
    }
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;
}

__global__ void fill_kernel(uint8_t* w, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(i >> 32) * 40503u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    w[i] = static_cast<uint8_t>(h % 60);  // every byte pair a finite f16 below 1, every float finite
  }
}

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// The flagship's decode step at depth 0 (qwen35moe.md, the benchmark file's types):
// per layer the mixer's input projections, the GDN state (read as rows, written back)
// or attention (no KV bytes at depth 0), the output projection, the router with the
// shared expert's gate/up, the 8 routed experts' gate/up, their down with the shared
// down; then the LM head and the argmax. Six barriers per layer. zero_rows: the same
// ops without rows (the barriers, the staging, the norms).
std::vector<Op> flagship_step(bool zero_rows) {
  std::vector<Op> list;
  uint64_t at = 0;
  uint32_t y = 0;
  const auto row_bytes = [](DType t, uint32_t in) {
    switch (t) {
      case DType::Q8_0: return in / 32 * 34;
      case DType::Q4_K: return in / 256 * 144;
      case DType::Q5_K: return in / 256 * 176;
      case DType::Q6_K: return in / 256 * 210;
      default: return in * 4;
    }
  };
  const auto add = [&](DType t, uint32_t rows, uint32_t in, uint32_t x_floats, uint8_t flags,
                       uint32_t x_rows = 0) -> Op& {
    Op op{};
    op.offset = at, op.rows = zero_rows ? 0 : rows, op.row_bytes = row_bytes(t, in), op.in = in;
    op.bytes = op.rows * op.row_bytes, op.y = y, op.x_floats = x_floats, op.x_rows = x_rows;
    op.type = t, op.flags = flags;
    at += (uint64_t{rows} * op.row_bytes + 255) / 256 * 256 + 256;  // routed copies may shift by 256
    y += rows;
    list.push_back(op);
    return list.back();
  };
  for (int layer = 0; layer < 40; ++layer) {
    if ((layer + 1) % 4 == 0) {
      add(DType::Q8_0, 8192 + 2 * 512, 2048, 2048, kPrefetch | kNormed);  // q|gate, k, v
      add(DType::F32, 0, 256, 4096, kPrefetch);                           // q/k norm, rope, attention
    } else {
      add(DType::Q8_0, 8192 + 4096, 2048, 2048, kPrefetch | kNormed | kJoinNext);  // qkv, z
      add(DType::F32, 64, 2048, 0, kPrefetch);                                     // alpha, beta
      add(DType::F32, 32 * 128, 128, 256, kPrefetch | kWriteBack);                 // the delta-rule state
    }
    add(DType::Q8_0, 2048, 4096, 4096, kPrefetch);                                   // output projection
    const uint32_t router = y;
    add(DType::F32, 256, 2048, 2048, kPrefetch | kNormed | kJoinNext);               // router
    add(DType::Q8_0, 2 * 512, 2048, 0, kPrefetch);                                   // shared gate/up
    add(DType::Q4_K, 8 * 2 * 512, 2048, 2048, kRouted).router_y = router;            // routed gate/up
    add(DType::Q5_K, 8 * 2048, 512, 8 * 512, kPrefetch | kJoinNext, 2048);           // routed down
    add(DType::Q8_0, 2048, 512, 512, kPrefetch);                                     // shared down
  }
  add(DType::Q6_K, 248320, 2048, 2048, kPrefetch | kNormed);  // LM head
  add(DType::F32, 0, 256, 0, kPrefetch);                      // argmax
  return list;
}

double total_bytes(const std::vector<Op>& list) {
  double b = 0;
  for (const Op& op : list) b += op.bytes;
  return b;
}

// Session 16's list: one op per barrier, bytes as 16-byte rows.
std::vector<Op> session16_step() {
  const double q8 = 34.0 / 32, q4k = 144.0 / 256, q5k = 176.0 / 256, q6k = 210.0 / 256;
  std::vector<Op> list;
  uint64_t at = 0;
  const auto add = [&](double bytes, bool prefetch) {
    Op op{};
    op.bytes = static_cast<uint32_t>(bytes) / 16 * 16, op.rows = op.bytes / 16, op.row_bytes = 16, op.in = 4;
    op.offset = at, op.type = DType::F32, op.flags = prefetch ? kPrefetch : 0;
    list.push_back(op);
    at += (op.bytes + 255) / 256 * 256;
  };
  for (int layer = 0; layer < 40; ++layer) {
    if ((layer + 1) % 4 == 0) {
      add(2048.0 * (8192 + 2 * 512) * q8, true);
      add(0, true);
    } else {
      add(2048.0 * (8192 + 4096) * q8 + 2048.0 * 64 * 4, true);
      add(32.0 * 128 * 128 * 4, true);
    }
    add(4096.0 * 2048 * q8, true);
    add(2048.0 * 256 * 4 + 2.0 * 2048 * 512 * q8, true);
    add(8 * 2.0 * 2048 * 512 * q4k, false);
    add(8 * 512.0 * 2048 * q5k + 512.0 * 2048 * q8, true);
  }
  add(2048.0 * 248320 * q6k, true);
  add(0, true);
  return list;
}

// The same ops as 16-byte rows: each op's bytes split evenly over the blocks (session
// 16's layout), to tell row granularity apart from the rest.
std::vector<Op> as_byte_rows(std::vector<Op> list) {
  for (Op& op : list) op.rows = op.bytes / 16, op.row_bytes = 16, op.in = 4, op.type = DType::F32;
  return list;
}

int barrier_count_of(const std::vector<Op>& list) {
  int n = 0;
  for (const Op& op : list) n += !(op.flags & kJoinNext);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const bool warps_only = argc > 1 && std::string(argv[1]) == "warps";
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  const int blocks = prop.multiProcessorCount, steps = 10;
  std::printf("%s, %d SMs; %d blocks of %d threads, a ring of %d KB\n", prop.name, blocks, blocks, kThreads,
              kRingBytes / 1024);
  const std::vector<Op> step = flagship_step(false), bare = flagship_step(true);
  const uint64_t span = step.back().offset + step.back().bytes + 512;
  const uint32_t outputs = step.back().y + step.back().rows + 256;
  uint8_t* weights = nullptr;
  unsigned* sink = nullptr;
  float *y = nullptr, *y_ref = nullptr;
  if (!ok(cudaMalloc(&weights, span), "cudaMalloc") || !ok(cudaMalloc(&sink, 4096), "cudaMalloc") ||
      !ok(cudaMalloc(&y, outputs * 4), "cudaMalloc") || !ok(cudaMalloc(&y_ref, outputs * 4), "cudaMalloc"))
    return 1;
  fill_kernel<<<4 * blocks, 256>>>(weights, span);
  cudaMemset(y, 0, outputs * 4);
  std::vector<float> act(kMaxStaged);
  for (int i = 0; i < kMaxStaged; ++i) act[i] = 0.5f * std::sin(0.37f * i) + 0.01f * (i % 7);
  cudaMemcpyToSymbol(activations, act.data(), act.size() * sizeof(float));
  const int kSmem = kRingBytes + kMaxStaged * 4 + static_cast<int>(step.size() * sizeof(Op));
  cudaEvent_t a, z;
  cudaEventCreate(&a), cudaEventCreate(&z);
  const auto run = [&](const void* kernel, const std::vector<Op>& list, int barriers, int ahead, int dots,
                       int n_steps) {
    cudaMemcpyToSymbol(ops, list.data(), list.size() * sizeof(Op));
    const unsigned zero = 0;
    cudaMemcpyToSymbol(arrivals, &zero, sizeof zero);
    int n_ops = static_cast<int>(list.size());
    void* args[] = {&weights, &n_ops, &n_steps, &barriers, &ahead, &dots, &y, &sink};
    cudaEventRecord(a);
    const bool launched =
        ok(cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(kThreads), args, kSmem, nullptr),
           "launch");
    cudaEventRecord(z);
    if (!launched || !ok(cudaEventSynchronize(z), "run")) return -1.0;
    float ms = 0;
    cudaEventElapsedTime(&ms, a, z);
    return static_cast<double>(ms) / n_steps;
  };
  const int n = barrier_count_of(step);
  const double bytes = total_bytes(step);
  std::printf("the step: %zu ops, %d barriers, %.3f GB (3x llama.cpp needs 1.51 ms per token on an H100, 1.44 on an H200)\n",
              step.size(), n, bytes / 1e9);
  const void* kernels[] = {reinterpret_cast<const void*>(step_kernel<4>), reinterpret_cast<const void*>(step_kernel<8>)};
  const int slots[] = {4, 8};
  for (int k = 0; k < 2; ++k) {
    if (!ok(cudaFuncSetAttribute(kernels[k], cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem), "smem")) return 1;
  }
  std::vector<Op> ref_ops = step;  // an op that keeps the last op's activations, with their staging
  for (size_t i = 1; i < ref_ops.size(); ++i)
    if (ref_ops[i].x_floats == 0)
      ref_ops[i].x_floats = ref_ops[i - 1].x_floats,
      ref_ops[i].flags = static_cast<uint8_t>((ref_ops[i].flags & ~kNormed) | (ref_ops[i - 1].flags & kNormed));
  // One step's outputs (split barriers, 1 op ahead) against one warp per row from
  // global memory: op outputs that differ, and the worst error of an op's largest.
  const auto check = [&](const auto& runner, int mode, double& worst) {
    int bad = 0;
    cudaMemset(y, 0, outputs * 4);
    runner(step, kSplit, 1, mode, 1);
    for (size_t i = 0; i < step.size(); ++i) {
      const Op& op = ref_ops[i];
      if (op.rows == 0) continue;
      reference_kernel<<<(op.rows + 7) / 8, 256>>>(op, weights, y_ref);
      if (!ok(cudaDeviceSynchronize(), "reference")) return 1000;
      std::vector<float> got(op.rows), want(op.rows);
      cudaMemcpy(got.data(), y + op.y, op.rows * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(want.data(), y_ref + op.y, op.rows * 4, cudaMemcpyDeviceToHost);
      double scale = 1e-30, err = 0;
      uint32_t first_bad = op.rows;
      for (uint32_t r = 0; r < op.rows; ++r) scale = std::fmax(scale, std::fabs(want[r]));
      for (uint32_t r = 0; r < op.rows; ++r) {
        const double e = std::isfinite(got[r]) ? std::fabs(got[r] - want[r]) : INFINITY;
        const double tol = mode == 2 && op.type == DType::Q8_0 ? 1e-2 : 1e-4;
        if (e / scale >= tol && first_bad == op.rows) first_bad = r;
        err = std::fmax(err, e);
      }
      worst = std::fmax(worst, err / scale);
      if (first_bad < op.rows && bad++ < 4)
        std::printf("  mode %d: op %zu (type %u, %u rows of %u, flags %u) row %u: %g, want %g\n", mode, i,
                    static_cast<unsigned>(op.type), op.rows, op.in, op.flags, first_bad, got[first_bad], want[first_bad]);
    }
    return bad;
  };
  int warp_bad = 0;
  for (const int config : {0, 1, 2, 3}) {
    int warp_slots = config < 2 ? 4 : 2, contiguous = config % 2;
    const void* wk = warp_slots == 4 ? reinterpret_cast<const void*>(warp_step_kernel<4>)
                                     : reinterpret_cast<const void*>(warp_step_kernel<2>);
    const int warp_smem = kWarpRing + kMaxStaged * 4 + static_cast<int>(step.size() * sizeof(Op));
    if (!ok(cudaFuncSetAttribute(wk, cudaFuncAttributeMaxDynamicSharedMemorySize, warp_smem), "smem")) return 1;
    const auto wrun = [&](const std::vector<Op>& list, int barriers, int ahead, int dots, int n_steps) {
      cudaMemcpyToSymbol(ops, list.data(), list.size() * sizeof(Op));
      const unsigned zero = 0;
      cudaMemcpyToSymbol(arrivals, &zero, sizeof zero);
      int n_ops = static_cast<int>(list.size());
      void* args[] = {&weights, &n_ops, &n_steps, &barriers, &ahead, &dots, &y, &sink, &contiguous};
      cudaEventRecord(a);
      const bool launched =
          ok(cudaLaunchCooperativeKernel(wk, dim3(blocks), dim3(kThreads), args, warp_smem, nullptr), "launch");
      cudaEventRecord(z);
      if (!launched || !ok(cudaEventSynchronize(z), "run")) return -1.0;
      float ms = 0;
      cudaEventElapsedTime(&ms, a, z);
      return static_cast<double>(ms) / n_steps;
    };
    std::printf("-- warps: each warp its own ring of %d slots of %d bytes (%d KB a block), its units %s\n", warp_slots,
                kWarpRing / kWarps / warp_slots, kWarpRing / 1024, contiguous ? "contiguous" : "round robin");
    wrun(step, kSplit, 1, 0, 1);  // warm-up
    const double stream_ms = wrun(step, kNone, 0, 0, steps);
    std::printf("bytes alone (no barriers):        %.3f ms per step, %.2f TB/s\n", stream_ms, bytes / (stream_ms * 1e9));
    for (const int ahead : {0, 1, 2}) {
      const double ms = wrun(step, kSplit, ahead, 0, steps);
      std::printf("bytes, split, %d ops ahead:        %.3f ms per step, %.2f TB/s\n", ahead, ms, bytes / (ms * 1e9));
    }
    for (const DType t : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F32}) {
      std::vector<Op> of_type;
      for (const Op& op : ref_ops)
        if (op.type == t && op.rows > 0) of_type.push_back(op), of_type.back().flags &= ~kRouted;
      const double b = total_bytes(of_type), ms = wrun(of_type, kNone, 0, 1, steps);
      std::printf("type %2u dots, no barriers: %3zu ops, %.3f GB in %.3f ms, %.2f TB/s (bytes alone: %.3f ms)\n",
                  static_cast<unsigned>(t), of_type.size(), b / 1e9, ms, b / (ms * 1e9), wrun(of_type, kNone, 0, 0, steps));
    }
    const double alone = wrun(step, kNone, 0, 1, steps);
    std::printf("bytes + dots, no barriers:        %.3f ms per step, %.2f TB/s\n", alone, bytes / (alone * 1e9));
    const double bare_ms = wrun(bare, kSplit, 0, 1, steps);
    std::printf("split barriers + staging + norms + routing, no rows: %.3f ms per step (%.2f us per barrier)\n",
                bare_ms, bare_ms * 1e3 / n);
    for (const int ahead : {0, 1, 2}) {
      const double ms = wrun(step, kSplit, ahead, 1, steps);
      std::printf("everything, split, %d ops ahead:  %.3f ms per step, %.2f TB/s\n", ahead, ms, bytes / (ms * 1e9));
    }
    double worst = 0;
    const int bad = check(wrun, 1, worst);
    warp_bad += bad;
    std::printf("warps: outputs against the reference: %d op outputs differ (worst %.2e of the op's largest)\n", bad,
                worst);
  }
  if (warps_only) return ok(cudaGetLastError(), "launches") && warp_bad == 0 ? 0 : 1;
  std::printf("-- bytes only, 4 slots of 48 KB\n");
  run(kernels[0], step, kSplit, 1, 0, 1);  // warm-up
  const double stream_ms = run(kernels[0], step, kNone, 0, 0, steps);
  std::printf("bytes alone (no barriers):        %.3f ms per step, %.2f TB/s\n", stream_ms, bytes / (stream_ms * 1e9));
  for (const int ahead : {0, 1, 2}) {
    const double ms = run(kernels[0], step, kSplit, ahead, 0, steps);
    std::printf("split     , fetching %3d ops ahead: %.3f ms per step, %.2f TB/s\n", ahead, ms, bytes / (ms * 1e9));
  }
  const std::vector<Op> byte_rows = as_byte_rows(step);
  for (const int ahead : {0, 1, 2}) {
    const double ms = run(kernels[0], byte_rows, kSplit, ahead, 0, steps);
    std::printf("split, 16-byte rows, %d ops ahead: %.3f ms per step, %.2f TB/s\n", ahead, ms, bytes / (ms * 1e9));
  }
  const std::vector<Op> old_list = session16_step();
  for (const int ahead : {0, 1, 2}) {
    const double ms = run(kernels[0], old_list, kSplit, ahead, 0, steps);
    std::printf("split, session 16's list, %d ahead: %.3f ms per step, %.2f TB/s\n", ahead, ms, total_bytes(old_list) / (ms * 1e9));
  }
  {
    const double ms = run(kernels[0], byte_rows, kNone, 0, 0, steps);
    std::printf("16-byte rows, no barriers:        %.3f ms per step, %.2f TB/s\n", ms, bytes / (ms * 1e9));
  }
  std::printf("-- the dot products alone, no barriers, by weight type (the step's ops of that type)\n");
  for (const DType t : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F32}) {
    std::vector<Op> of_type;
    for (const Op& op : ref_ops)
      if (op.type == t && op.rows > 0) of_type.push_back(op), of_type.back().flags &= ~kRouted;
    const double b = total_bytes(of_type), ms = run(kernels[0], of_type, kNone, 0, 1, steps);
    std::printf("type %2u: %3zu ops, %.3f GB in %.3f ms, %.2f TB/s (bytes alone: %.3f ms)\n", static_cast<unsigned>(t),
                of_type.size(), b / 1e9, ms, b / (ms * 1e9), run(kernels[0], of_type, kNone, 0, 0, steps));
    if (t == DType::Q8_0) {
      const double ms8 = run(kernels[0], of_type, kNone, 0, 2, steps);
      std::printf("type  8 in int8 (DP4A):  %.3f ms, %.2f TB/s\n", ms8, b / (ms8 * 1e9));
    }
  }
  for (int k = 0; k < 2; ++k) {
    std::printf("-- with the dot products, %d slots of %d KB\n", slots[k], kRingBytes / slots[k] / 1024);
    const double alone = run(kernels[k], step, kNone, 0, 1, steps);
    std::printf("bytes + dots, no barriers:        %.3f ms per step, %.2f TB/s\n", alone, bytes / (alone * 1e9));
    const double bare_ms = run(kernels[k], bare, kSplit, 0, 1, steps);
    std::printf("split barriers + staging + norms + routing, no rows: %.3f ms per step (%.2f us per barrier)\n",
                bare_ms, bare_ms * 1e3 / n);
    for (const int ahead : {0, 1, 2, 3}) {
      const double ms = run(kernels[k], step, kSplit, ahead, 1, steps);
      std::printf("split     , fetching %3d ops ahead: %.3f ms per step, %.2f TB/s\n", ahead, ms, bytes / (ms * 1e9));
    }
  }
  std::printf("-- Q8_0 rows in int8 (DP4A), the rest as above, 4 slots of 48 KB\n");
  {
    const double alone = run(kernels[0], step, kNone, 0, 2, steps);
    std::printf("bytes + dots, no barriers:        %.3f ms per step, %.2f TB/s\n", alone, bytes / (alone * 1e9));
    for (const int ahead : {0, 1, 2}) {
      const double ms = run(kernels[0], step, kSplit, ahead, 2, steps);
      std::printf("split     , fetching %3d ops ahead: %.3f ms per step, %.2f TB/s\n", ahead, ms, bytes / (ms * 1e9));
    }
  }
  // Each kernel's outputs against the reference. The int8 run (4 slots) is held to 1e-2
  // on its Q8_0 ops: its activations carry int8's rounding (about 0.4% of each
  // 32-element block's largest).
  int bad = 0;
  double worst[2] = {0, 0};
  for (int k = 0; k < 3; ++k) {
    const int mode = k < 2 ? 1 : 2;
    const auto runner = [&](const std::vector<Op>& list, int barriers, int ahead, int dots, int n_steps) {
      return run(kernels[k % 2], list, barriers, ahead, dots, n_steps);
    };
    bad += check(runner, mode, worst[mode - 1]);
  }
  std::printf("outputs against the reference, both rings and int8: %d op outputs differ (worst %.2e of the op's "
              "largest in f32, %.2e with int8)\n", bad, worst[0], worst[1]);
  return ok(cudaGetLastError(), "launches") && bad == 0 ? 0 : 1;
}
