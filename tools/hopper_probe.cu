// Two facts about the GPU that decide how a decode kernel can be laid out, measured
// directly (not part of the build; PERFORMANCE.md, session 13):
//
//   1. how many thread-block clusters of each size can be resident at once at one
//      block per SM (cudaOccupancyMaxActiveClusters), and
//   2. how fast N blocks (one per SM) move weights into shared memory with bulk
//      copies: steady state over many rounds, and one round per launch.
//
//   nvcc -arch=sm_90a -o /tmp/hopper_probe tools/hopper_probe.cu && /tmp/hopper_probe
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>

namespace {

__device__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__global__ void touch(int* out) {
  extern __shared__ int s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = s[5];
}

// Each round, block b copies `bytes` from its own span of region r into shared
// memory in `chunk`-byte bulk copies counted on one mbarrier, and waits for them.
__global__ void bulk_rounds(const uint8_t* src, size_t region, int bytes, int rounds, int chunk, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(&bar)), "r"(bytes));
      const uint8_t* s = src + static_cast<size_t>(r) * region + static_cast<size_t>(blockIdx.x) * bytes;
      for (int o = 0; o < bytes; o += chunk)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_u32(sm + o)),
                     "l"(s + o), "r"(min(chunk, bytes - o)), "r"(smem_u32(&bar))
                     : "memory");
    }
    asm volatile("{ .reg .pred p; w: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra w; }" ::"r"(
                     smem_u32(&bar)),
                 "r"(r & 1));
    __syncthreads();
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = sm[5];
}

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);

  cudaFuncSetAttribute(touch, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  for (int smem_kb : {64, 130, 200})
    for (int c : {2, 4, 8, 12, 14, 16}) {
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = c, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(16 * c), cfg.blockDim = dim3(256), cfg.dynamicSmemBytes = smem_kb * 1024;
      cfg.attrs = &attr, cfg.numAttrs = 1;
      int n = 0;
      if (ok(cudaOccupancyMaxActiveClusters(&n, touch, &cfg), "cudaOccupancyMaxActiveClusters"))
        std::printf("clusters of %2d, %3d KB shared each: %2d resident (%3d blocks)\n", c, smem_kb, n, n * c);
    }

  const size_t total = size_t{6} << 30;
  uint8_t* src = nullptr;
  unsigned* sink = nullptr;
  if (!ok(cudaMalloc(&src, total), "cudaMalloc") || !ok(cudaMalloc(&sink, 4096), "cudaMalloc")) return 1;
  cudaMemset(src, 1, total);
  const int smem = 220 * 1024;  // one block per SM
  cudaFuncSetAttribute(bulk_rounds, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t a, z;
  cudaEventCreate(&a), cudaEventCreate(&z);
  for (int kb : {60, 120, 216})
    for (int blocks : {16, 32, 64, 96, 120, 128, 132}) {
      const int bytes = kb * 1024, chunk = 16 * 1024;
      const size_t region = static_cast<size_t>(prop.multiProcessorCount) * bytes;
      const int rounds = static_cast<int>(total / region) - 1 < 100 ? static_cast<int>(total / region) - 1 : 100;
      bulk_rounds<<<blocks, 128, smem>>>(src, region, bytes, 1, chunk, sink);  // warm-up
      cudaEventRecord(a);
      bulk_rounds<<<blocks, 128, smem>>>(src, region, bytes, rounds, chunk, sink);
      cudaEventRecord(z);
      cudaEventSynchronize(z);
      float steady = 0;
      cudaEventElapsedTime(&steady, a, z);
      cudaEventRecord(a);
      for (int i = 0; i < 20; ++i)
        bulk_rounds<<<blocks, 128, smem>>>(src + static_cast<size_t>(i % 40) * region, region, bytes, 1, chunk, sink);
      cudaEventRecord(z);
      cudaEventSynchronize(z);
      float single = 0;
      cudaEventElapsedTime(&single, a, z);
      std::printf("%3d KB per block, %3d blocks: steady %4.0f GB/s (%.2f us per round, %.1f GB/s per SM); "
                  "one round per launch %.2f us\n",
                  kb, blocks, static_cast<double>(blocks) * bytes * rounds / (steady * 1e6), steady * 1e3 / rounds,
                  static_cast<double>(bytes) * rounds / (steady * 1e6), single * 1e3 / 20);
    }
  return ok(cudaGetLastError(), "launches") ? 0 : 1;
}
