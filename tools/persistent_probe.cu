// Could a persistent decode kernel reach issue 4's bar (3x llama.cpp: 1.51 ms per token
// on an H100, 1.44 ms on an H200)? Not part of the build; results in PERFORMANCE.md,
// session 16, and docs/logs/persistent-probe-session16.log.
//
// One launch, one block per SM, streams the bytes of the flagship's decode step
// (qwen35moe 35B-A3B benchmark file, depth 0: 2.68 GB in 242 dependent ops) op by op,
// as a persistent kernel would. A block's share of each op goes through a ring of
// shared-memory slots filled by bulk copies and is read once by every thread (the
// stand-in for the dot products); a grid-wide barrier separates dependent ops. A block
// may fetch up to `ahead` ops past the one it consumes before the barriers in between,
// except the routed experts' gate/up, whose addresses only the router gives.
//
// Barriers compared: a generation flag flipped by the last arrival (a returned atomic,
// then a flag write the others poll); one counter that only grows (release add, acquire
// polls); the same with the next op's copies issued between the arrival and the wait
// ("split": a release issued after the copies may wait for them). Prints per step the
// bytes alone (no barriers), each barrier alone, and both for 0, 1, 2 and all ops ahead,
// for rings of 4 and 8 slots.
//   nvcc -arch=sm_90a -O3 -o /tmp/persistent_probe tools/persistent_probe.cu && /tmp/persistent_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kThreads = 256, kRingBytes = 192 * 1024, kMaxOps = 256;

struct Op {
  uint64_t offset;  // into the weight buffer
  uint32_t bytes;   // a multiple of 16
  bool prefetch;    // its bytes may be fetched before the barrier in front of it
};
__constant__ Op ops[kMaxOps];

__device__ unsigned barrier_count, barrier_generation, arrivals;

__device__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Every block of the grid arrives before any leaves (all blocks are resident: the
// launch is cooperative).
__device__ void grid_barrier() {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned generation = *static_cast<volatile unsigned*>(&barrier_generation);
    __threadfence();
    if (atomicAdd(&barrier_count, 1) == gridDim.x - 1) {
      barrier_count = 0;
      __threadfence();
      atomicAdd(&barrier_generation, 1);
    } else {
      while (*static_cast<volatile unsigned*>(&barrier_generation) == generation) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

// The same with one counter that only grows: a block adds its arrival (a release,
// fire and forget) and waits until the counter reaches the barrier's multiple of the
// grid (acquire loads). One trip to L2 instead of a returned atomic, a flag write and
// the flag's trip back. `arrivals` is zeroed before each launch.
__device__ void counting_barrier(unsigned& target) {
  __syncthreads();
  target += gridDim.x;
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&arrivals) : "memory");
    unsigned seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(&arrivals) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

enum Barrier { kNone = 0, kGeneration = 1, kCounting = 2, kSplit = 3 };

// This block's share of op i: [start, start + len).
__device__ void share(int i, uint64_t& start, uint32_t& len) {
  const Op& op = ops[i];
  const uint32_t per = (op.bytes / gridDim.x + 15) / 16 * 16;
  const uint64_t begin = static_cast<uint64_t>(per) * blockIdx.x;
  start = op.offset + begin;
  len = begin >= op.bytes ? 0 : static_cast<uint32_t>(op.bytes - begin < per ? op.bytes - begin : per);
}

template <int kSlots>
__global__ void __launch_bounds__(kThreads, 1)
    step_kernel(const uint8_t* weights, int n_ops, int steps, int barriers, int ahead, unsigned* sink) {
  constexpr int kSlotBytes = kRingBytes / kSlots;
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ uint64_t full[kSlots];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  const int total = n_ops * steps;
  unsigned target = 0;            // the counting barrier's next multiple of the grid
  long issued = 0, consumed = 0;  // chunks, over the whole launch
  int issue_op = 0;               // thread 0: the op whose chunks it issues next, from issue_pos
  uint32_t issue_pos = 0;
  // Thread 0 fills free slots with chunks up to the last op it may fetch now.
  const auto issue = [&](int consuming) {
    int last = barriers ? consuming : total - 1;
    while (last + 1 < total && last + 1 - consuming <= ahead && ops[(last + 1) % n_ops].prefetch) ++last;
    while (issued < consumed + kSlots && issue_op <= last) {
      uint64_t start;
      uint32_t len;
      share(issue_op % n_ops, start, len);
      if (issue_pos >= len) {
        ++issue_op, issue_pos = 0;
        continue;
      }
      const uint32_t n = len - issue_pos < kSlotBytes ? len - issue_pos : kSlotBytes;
      const int slot = static_cast<int>(issued % kSlots);
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(&full[slot])), "r"(n));
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_u32(ring + slot * kSlotBytes)),
                   "l"(weights + start + issue_pos), "r"(n), "r"(smem_u32(&full[slot]))
                   : "memory");
      issue_pos += n, ++issued;
    }
  };
  uint32_t acc = 0;
  for (int op = 0; op < total; ++op) {
    uint64_t start;
    uint32_t len;
    share(op % n_ops, start, len);
    for (uint32_t pos = 0; pos < len; pos += kSlotBytes) {
      if (threadIdx.x == 0) issue(op);
      const int slot = static_cast<int>(consumed % kSlots);
      const unsigned parity = static_cast<unsigned>(consumed / kSlots) & 1;
      asm volatile("{ .reg .pred p; w: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra w; }" ::"r"(
                       smem_u32(&full[slot])),
                   "r"(parity)
                   : "memory");
      const uint32_t n = len - pos < kSlotBytes ? len - pos : kSlotBytes;
      const uint4* chunk = reinterpret_cast<const uint4*>(ring + slot * kSlotBytes);
      for (uint32_t i = threadIdx.x; i < n / 16; i += kThreads) {
        const uint4 v = chunk[i];
        acc ^= v.x + v.y + v.z + v.w;
      }
      __syncthreads();  // the slot is free again
      ++consumed;
    }
    if (barriers == kSplit) {
      // The counting barrier in two halves with the next op's copies between them: a
      // release issued after the copies might wait for them.
      __syncthreads();
      target += gridDim.x;
      if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&arrivals) : "memory");
        issue(op);
        unsigned seen;
        do {
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(&arrivals) : "memory");
        } while (seen < target);
      }
      __syncthreads();
      continue;
    }
    if (threadIdx.x == 0) issue(op);  // the next op's first copies, where allowed, before the barrier
    if (barriers == kGeneration) grid_barrier();
    if (barriers == kCounting) counting_barrier(target);
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;  // keeps the reads
}

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

// The flagship's decode step at depth 0 (qwen35moe.md, the benchmark file's types):
// per layer the mixer's input projections, the GDN state (read; its write-back is not
// modelled) or attention (no KV bytes at depth 0), the output projection, the router
// with the shared expert's gate/up, the 8 routed experts' gate/up, their down with the
// shared down; then the LM head and the argmax.
std::vector<Op> flagship_step(bool zero_bytes) {
  const double q8 = 34.0 / 32, q4k = 144.0 / 256, q5k = 176.0 / 256, q6k = 210.0 / 256;
  std::vector<Op> list;
  uint64_t at = 0;
  const auto add = [&](double bytes, bool prefetch) {
    const uint32_t b = zero_bytes ? 0 : static_cast<uint32_t>(bytes) / 16 * 16;
    list.push_back({at, b, prefetch});
    at += (b + 255) / 256 * 256;
  };
  for (int layer = 0; layer < 40; ++layer) {
    const bool attention = (layer + 1) % 4 == 0;
    if (attention) {
      add(2048.0 * (8192 + 2 * 512) * q8, true);  // q|gate, k, v
      add(0, true);                               // q/k norm, rope, attention
    } else {
      add(2048.0 * (8192 + 4096) * q8 + 2048.0 * 64 * 4, true);  // qkv, z, alpha, beta
      add(32.0 * 128 * 128 * 4, true);                           // the delta-rule state
    }
    add(4096.0 * 2048 * q8, true);                               // output projection
    add(2048.0 * 256 * 4 + 2.0 * 2048 * 512 * q8, true);         // router, shared gate/up
    add(8 * 2.0 * 2048 * 512 * q4k, false);                      // routed gate/up: after routing
    add(8 * 512.0 * 2048 * q5k + 512.0 * 2048 * q8, true);       // routed down, shared down
  }
  add(2048.0 * 248320 * q6k, true);  // LM head
  add(0, true);                      // argmax
  return list;
}

double total_bytes(const std::vector<Op>& list) {
  double b = 0;
  for (const Op& op : list) b += op.bytes;
  return b;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  const int blocks = prop.multiProcessorCount, steps = 10;
  std::printf("%s, %d SMs; %d blocks of %d threads, a ring of %d KB\n", prop.name, blocks, blocks, kThreads,
              kRingBytes / 1024);
  const std::vector<Op> step = flagship_step(false), bare = flagship_step(true);
  const uint64_t span = step.back().offset + step.back().bytes + 256;
  uint8_t* weights = nullptr;
  unsigned* sink = nullptr;
  if (!ok(cudaMalloc(&weights, span), "cudaMalloc") || !ok(cudaMalloc(&sink, 4096), "cudaMalloc")) return 1;
  cudaMemset(weights, 1, span);
  cudaEvent_t a, z;
  cudaEventCreate(&a), cudaEventCreate(&z);
  const auto run = [&](const void* kernel, const std::vector<Op>& list, int barriers, int ahead, int n_steps) {
    cudaMemcpyToSymbol(ops, list.data(), list.size() * sizeof(Op));
    const unsigned zero = 0;
    cudaMemcpyToSymbol(arrivals, &zero, sizeof zero);
    int n_ops = static_cast<int>(list.size());
    void* args[] = {&weights, &n_ops, &n_steps, &barriers, &ahead, &sink};
    cudaEventRecord(a);
    const bool launched = ok(
        cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(kThreads), args, kRingBytes, nullptr), "launch");
    cudaEventRecord(z);
    if (!launched || !ok(cudaEventSynchronize(z), "run")) return -1.0;
    float ms = 0;
    cudaEventElapsedTime(&ms, a, z);
    return static_cast<double>(ms) / n_steps;
  };
  const int n = static_cast<int>(step.size());
  const double bytes = total_bytes(step);
  std::printf("the step: %d ops, %.3f GB (3x llama.cpp needs 1.51 ms per token on an H100, 1.44 on an H200)\n", n, bytes / 1e9);
  const void* kernels[] = {reinterpret_cast<const void*>(step_kernel<4>), reinterpret_cast<const void*>(step_kernel<8>)};
  const int slots[] = {4, 8};
  for (int k = 0; k < 2; ++k) {
    if (!ok(cudaFuncSetAttribute(kernels[k], cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes), "smem"))
      return 1;
    std::printf("-- %d slots of %d KB\n", slots[k], kRingBytes / slots[k] / 1024);
    run(kernels[k], step, kCounting, 1, 1);  // warm-up
    const double stream_ms = run(kernels[k], step, kNone, 0, steps);
    std::printf("bytes alone (no barriers):        %.3f ms per step, %.2f TB/s\n", stream_ms, bytes / (stream_ms * 1e9));
    for (const int barrier : {kGeneration, kCounting, kSplit}) {
      const char* names[] = {"", "generation", "counting", "split"};
      const char* name = names[barrier];
      const double bare_ms = run(kernels[k], bare, barrier, 0, steps);
      std::printf("%-10s barriers alone:        %.3f ms per step, %.2f us per barrier\n", name, bare_ms,
                  bare_ms * 1e3 / n);
      for (const int ahead : {0, 1, 2, kMaxOps}) {
        const double ms = run(kernels[k], step, barrier, ahead, steps);
        std::printf("%-10s, fetching %3d ops ahead: %.3f ms per step, %.2f TB/s\n", name, ahead, ms,
                    bytes / (ms * 1e9));
      }
    }
  }
  return ok(cudaGetLastError(), "launches") ? 0 : 1;
}
