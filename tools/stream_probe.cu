// How fast the one-token LM head's access pattern can stream its weights when nothing
// is computed (not part of the build; PERFORMANCE.md, session 42). The flagship's LM
// head reads 248320 Q6_K rows of 1680 bytes (417 MB) in 169 us a step, 2.47 TB/s; fewer
// instructions (session 40) and deeper rings (session 41) did not move it. Each form
// here moves the same bytes into shared memory or registers and only touches them:
//
//   ring   the matvec's layout (matvec.cu, warp_stream.cuh): blocks of 8 warps, each warp
//          a run of consecutive rows (or rows gw, gw + W, ... with "interleaved")
//          through its own ring of `slots` bulk-copy slots of `rows` rows each;
//   ldg    every thread 16-byte loads, 8 in flight, no shared memory;
//   slices moe_few's layout (moe_few.cu, few_tile.cuh; session 52): units of 16 rows,
//          each read as k-slices, one bulk copy a row a slice by lanes 0-15 into one of
//          the warp's two slots, units gw, gw + W, ... with their slices in turn. That
//          pattern (288-byte pieces 1152 bytes apart for Q4_K gate / up rows of 2048)
//          streamed 3.94 TB/s on an H200 with nothing computed, so it is not what holds
//          moe_few near 2.4 TB/s (its instruction stream is, ncu says).
//
//   nvcc -std=c++20 -arch=sm_90a -O3 -I src -o /tmp/stream_probe tools/stream_probe.cu && /tmp/stream_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "backend/cuda/warp_stream.cuh"

namespace {

namespace zc = zinc::cuda;

constexpr int kWarps = 8;
constexpr int kMaxSlots = 8;
constexpr size_t kRowBytes = 1680;  // 2048 Q6_K weights
constexpr int kRows = 248320;       // the flagship's vocabulary

// Bulk copies and their mbarriers as the engine issues them (warp_stream.cuh, which
// defines them for the device pass of sm_90 and later only).
__device__ void expect_copy(uint64_t* bar, void* dst, const void* src, uint32_t bytes) {
#if __CUDA_ARCH__ >= 900
  zc::mbarrier_expect(bar, bytes);
  zc::bulk_copy(dst, src, bytes, bar);
#endif
}

// A warp's ring: issue(i) (called by every lane) fills slot i % slots with item i;
// each item is waited for and touched in turn, and its slot refilled `slots` items on.
template <class Issue>
__device__ unsigned drain_ring(uint64_t* bars, const uint8_t* ring, int slot_bytes, int slots, int count, Issue issue) {
  unsigned acc = 0;
#if __CUDA_ARCH__ >= 900
  const int lane = threadIdx.x % 32;
  if (lane == 0)
    for (int s = 0; s < slots; ++s) zc::mbarrier_init(&bars[s]);
  __syncwarp();
  for (int i = 0; i < slots && i < count; ++i) issue(i);
  for (int i = 0; i < count; ++i) {
    const int s = i % slots;
    zc::mbarrier_wait(&bars[s], (i / slots) & 1);
    acc += reinterpret_cast<const unsigned*>(ring + s * slot_bytes)[lane];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (i + slots < count) issue(i + slots);
  }
#endif
  return acc;
}

// Units of `rows` consecutive rows; warp gw takes a run of them, or every W-th.
__global__ void ring_stream(const uint8_t* w, int units, int rows, int slots, bool interleaved, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  __shared__ uint64_t bars[kWarps][kMaxSlots];
#if __CUDA_ARCH__ >= 900
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int W = gridDim.x * kWarps, gw = blockIdx.x * kWarps + warp;
  const uint32_t unit_bytes = static_cast<uint32_t>(rows * kRowBytes);
  uint8_t* ring = sm + static_cast<size_t>(warp) * slots * unit_bytes;
  const int begin = static_cast<int>(static_cast<int64_t>(units) * gw / W);
  const int count = interleaved ? (units - gw + W - 1) / W : static_cast<int>(static_cast<int64_t>(units) * (gw + 1) / W) - begin;
  const auto unit = [&](int i) { return w + static_cast<size_t>(interleaved ? gw + i * W : begin + i) * unit_bytes; };
  const unsigned acc = drain_ring(bars[warp], ring, unit_bytes, slots, count, [&](int i) {
    if (lane == 0) expect_copy(&bars[warp][i % slots], ring + i % slots * unit_bytes, unit(i), unit_bytes);
  });
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;  // keeps the loads
#endif
}

// Units of `rows` rows of row_bytes, each in `slices` pieces a row; a slice's pieces
// land in one slot. Warp gw takes units gw, gw + W, ..., slices in turn (moe_few's
// order), `slots` slices in flight.
__global__ void slice_stream(const uint8_t* w, int units, int rows, int row_bytes, int slices, int slots,
                             unsigned* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  __shared__ uint64_t bars[kWarps][kMaxSlots];
#if __CUDA_ARCH__ >= 900
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int W = gridDim.x * kWarps, gw = blockIdx.x * kWarps + warp;
  const int piece = row_bytes / slices, slot_bytes = rows * piece;
  uint8_t* ring = sm + static_cast<size_t>(warp) * slots * slot_bytes;
  const int count = units > gw ? (units - gw + W - 1) / W * slices : 0;  // slices this warp reads
  const auto issue = [&](int i) {  // slice i % slices of unit gw + (i / slices) W into slot i % slots
    const int s = i % slots;
    if (lane == 0) zc::mbarrier_expect(&bars[warp][s], static_cast<uint32_t>(slot_bytes));
    __syncwarp();
    if (lane < rows) {
      const size_t unit = static_cast<size_t>(gw) + static_cast<size_t>(i / slices) * W;
      zc::bulk_copy(ring + s * slot_bytes + lane * piece,
                    w + (unit * rows + lane) * row_bytes + static_cast<size_t>(i % slices) * piece, piece,
                    &bars[warp][s]);
    }
  };
  const unsigned acc = drain_ring(bars[warp], ring, slot_bytes, slots, count, issue);
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
#endif
}

__global__ void ldg_stream(const uint4* w, size_t n16, unsigned* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = i + k * stride < n16 ? __ldcs(w + i + k * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc += v[k].x ^ v[k].w;
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

template <class Launch>
void time_it(const char* name, size_t bytes, Launch launch) {
  cudaEvent_t a, z;
  cudaEventCreate(&a), cudaEventCreate(&z);
  for (int i = 0; i < 3; ++i) launch();
  constexpr int kPasses = 20;
  cudaEventRecord(a);
  for (int i = 0; i < kPasses; ++i) launch();
  cudaEventRecord(z);
  cudaEventSynchronize(z);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, z);
  const double us = ms * 1e3 / kPasses;
  if (ok(cudaGetLastError(), name)) std::printf("%-52s %7.1f us a pass, %.2f TB/s\n", name, us, bytes / us / 1e6);
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const size_t bytes = kRowBytes * kRows;
  uint8_t* w = nullptr;
  unsigned* sink = nullptr;
  if (!ok(cudaMalloc(&w, bytes), "cudaMalloc") || !ok(cudaMalloc(&sink, 1 << 16), "cudaMalloc")) return 1;
  cudaMemset(w, 1, bytes);
  cudaFuncSetAttribute(ring_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024);

  struct Ring {
    int per_sm, slots, rows;
    bool interleaved;
  };
  for (const Ring& r : {Ring{2, 4, 1, false}, Ring{2, 8, 1, false}, Ring{2, 4, 2, false}, Ring{1, 4, 4, false},
                        Ring{4, 4, 1, false}, Ring{4, 2, 2, false}, Ring{2, 4, 1, true}, Ring{1, 8, 2, false}}) {
    const size_t smem = static_cast<size_t>(kWarps) * r.slots * r.rows * kRowBytes;
    char name[96];
    std::snprintf(name, sizeof name, "ring %d/SM, %d slots of %d row(s)%s (%zu KB)", r.per_sm, r.slots, r.rows,
                  r.interleaved ? ", interleaved" : "", smem / 1024);
    time_it(name, bytes, [&] {
      ring_stream<<<sms * r.per_sm, 32 * kWarps, smem>>>(w, kRows / r.rows, r.rows, r.slots, r.interleaved, sink);
    });
  }
  // moe_few's shapes: Q4_K gate / up rows of 2048 (1152 bytes) in 4 slices of 288,
  // Q5_K down rows of 512 (352 bytes) whole; 192 MB, about the 162 experts a 32-sequence
  // step reads. Then the same bytes in fewer, longer pieces.
  cudaFuncSetAttribute(slice_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024);
  struct Sliced {
    int per_sm, rows, row_bytes, slices, slots;
  };
  for (const Sliced& c : {Sliced{2, 16, 1152, 4, 2}, Sliced{3, 16, 1152, 4, 2}, Sliced{2, 16, 1152, 4, 3},
                          Sliced{2, 8, 1152, 2, 2}, Sliced{1, 16, 1152, 2, 2}, Sliced{1, 8, 1152, 1, 2},
                          Sliced{2, 16, 352, 1, 2}, Sliced{2, 16, 1152, 8, 4}}) {
    const size_t region = size_t{192} << 20;
    const int units = static_cast<int>(region / (static_cast<size_t>(c.rows) * c.row_bytes));
    const size_t smem = static_cast<size_t>(kWarps) * c.slots * c.rows * (c.row_bytes / c.slices);
    char name[96];
    std::snprintf(name, sizeof name, "slices %d/SM, %d rows of %d B in %d, %d slots (%zu KB)", c.per_sm, c.rows,
                  c.row_bytes, c.slices, c.slots, smem / 1024);
    time_it(name, static_cast<size_t>(units) * c.rows * c.row_bytes, [&] {
      slice_stream<<<sms * c.per_sm, 32 * kWarps, smem>>>(w, units, c.rows, c.row_bytes, c.slices, c.slots, sink);
    });
  }
  for (int per_sm : {2, 4, 8}) {
    char name[96];
    std::snprintf(name, sizeof name, "ldg %d x 256 threads/SM, 8 x 16 B in flight", per_sm);
    time_it(name, bytes, [&] { ldg_stream<<<sms * per_sm, 256>>>(reinterpret_cast<const uint4*>(w), bytes / 16, sink); });
  }
  return ok(cudaDeviceSynchronize(), "run") ? 0 : 1;
}
