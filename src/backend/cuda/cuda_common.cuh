// Device helpers shared by the CUDA kernels: warp and block reductions, fp16 /
// bf16 widening, activations. Host launchers check every launch (cuda_check.h).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace zinc::cuda {

// Programmatic dependent launch. Kernels launched with launch_pdl() may be started
// while the kernel before them on the stream is still finishing, which hides the
// launch gap between dependent kernels (a decode step is hundreds of small ones).
// Such a kernel calls pdl_begin() first: it lets the next kernel start launching,
// so that the next one's weight copies (issued before its own wait) start as soon
// as blocks leave the SMs, then waits until the previous grid has completed with
// its writes visible. Kernels whose first work does not depend on the previous
// kernel (weight loads) issue it first and call pdl_begin() before reading
// activations. Since each kernel completes only after its wait, a kernel past its
// wait sees every earlier kernel's writes; before its wait it may read nothing but
// weights and state no earlier kernel of the step writes (moe.cu has the one
// exception, and waits first to allow it), and write no global memory: a pass gives
// each layer's scratch to the next (Backend::scratch_rewind), so the kernels still
// running ahead of it may be reading the memory it writes.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_begin() {
  pdl_launch_dependents();
  pdl_wait();
}

// Asynchronous 16-byte copies global -> shared (both 16-byte aligned), completed
// by cp_async_wait<N>() (all but the N most recent committed groups) + a barrier.
__device__ __forceinline__ void cp_async16(void* shared_dst, const void* global_src) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(global_src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
template <class... Params, class... Args>
void launch_pdl_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_smem, cudaStream_t s,
                     Args&&... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = dynamic_smem;
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), "cudaLaunchKernelEx");
}
// Raises the dynamic shared memory limit of `Kernel` to `bytes` (needed above 48 KB),
// once per kernel: the first call's bytes stand.
template <auto Kernel>
void allow_smem(size_t bytes) {
  static const bool done =
      (check_cuda(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                  "cudaFuncSetAttribute"),
       true);
  (void)done;
}

// The device's multiprocessors, asked once (the backend uses one device; moe_stream
// sizes every launch by it).
inline int sm_count() {
  static const int sms = [] {
    int device = 0, n = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    return n;
  }();
  return sms;
}

// Whether the device is a Hopper or later (compute capability 9+): bulk copies and
// thread block clusters. Older GPUs take the kernels' other paths.
inline bool hopper_or_later() {
  static const bool yes = [] {
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
  }();
  return yes;
}

// Blocks of `Kernel` that fit on the whole GPU at once (one wave), with `dynamic_smem`
// bytes of dynamic shared memory each, which the kernel is allowed to take.
template <auto Kernel>
int resident_blocks(int threads, size_t dynamic_smem) {
  allow_smem<Kernel>(dynamic_smem);
  int per_sm = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, dynamic_smem),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int sms = sm_count();
  return sms * per_sm > 1 ? sms * per_sm : 1;
}
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t s, Args&&... args) {
  launch_pdl_smem(kernel, grid, block, 0, s, std::forward<Args>(args)...);
}

// backend.h's KV cache rows: position p lives in row p % rows, so a sliding window's
// ring wraps; a whole cache never does and takes no division.
__device__ __forceinline__ int kv_row(int position, int rows) { return position < rows ? position : position % rows; }
// The row `ahead` (< rows) positions after row `row` of a ring of `rows`.
__device__ __forceinline__ int kv_row_after(int row, int ahead, int rows) {
  const int r = row + ahead;
  return r < rows ? r : r - rows;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every
// thread gets the total. `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float t = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(t);
}

// Maximum over a block, as block_sum.
__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? shared[lane] : -3.402823466e38f);
}

__device__ __forceinline__ float half_to_float(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ float bf16_to_float(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// Rope's inverse frequency for pair j of n_rot rotated dims, formed in double as the
// CPU reference does; freq_factors ({n_rot / 2} divisors) may be null.
__device__ __forceinline__ float rope_inv_freq(double theta, double freq_scale, const float* freq_factors, int j,
                                               int n_rot) {
  double f = pow(theta, -2.0 * j / n_rot) * freq_scale;
  if (freq_factors) f /= freq_factors[j];
  return static_cast<float>(f);
}
// Rope's sine and cosine for pair j at `position` (the angle in f32).
__device__ __forceinline__ void rope_sincos(double theta, double freq_scale, const float* freq_factors, int j,
                                            int n_rot, int position, float& sn, float& cs) {
  sincosf(static_cast<float>(position) * rope_inv_freq(theta, freq_scale, freq_factors, j, n_rot), &sn, &cs);
}

// The two dims rope turns together as pair j of half = n_rot / 2: j and j + half (the
// NeoX layout) or 2j and 2j + 1.
__device__ __forceinline__ int2 rope_dims(bool neox, int j, int half) {
  return make_int2(neox ? j : 2 * j, neox ? j + half : 2 * j + 1);
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

// |x| as bits: as unsigned integers they order like |x|, infinity above every finite
// value and a NaN above infinity, so a max taken on them keeps a NaN (fmaxf passes
// over one) and a quantization scale made from it shows the NaN or infinity.
__device__ __forceinline__ uint32_t abs_bits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

// The max of m (abs_bits) over each aligned group of kLanes lanes, as a float; every
// lane of the warp takes part.
template <int kLanes>
__device__ __forceinline__ float lanes_abs_max(uint32_t m) {
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  return __uint_as_float(m);
}

// v · inv (each within ±127) as two int8 terms, hi + lo / 254: hi rounded, lo the
// remainder in 254ths (within 1/64516 of 127 / inv); returns Σ (254 hi + lo). The
// matvec's Q6_K LM head and matmul_few's one-token K-quant slices (few_int8.cuh) take x so.
__device__ __forceinline__ int int8_terms8(const float (&v)[8], float inv, int (&hi)[8], int (&lo)[8]) {
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float t = v[j] * inv, r = rintf(t);
    hi[j] = static_cast<int>(r);
    lo[j] = __float2int_rn((t - r) * 254.0f);  // t - r in [-0.5, 0.5], exactly
    sum += 254 * hi[j] + lo[j];
  }
  return sum;
}
// The low bytes of q[0..3] as one word, q[0]'s lowest.
__device__ __forceinline__ uint32_t pack_bytes4(const int* q) {
  return __byte_perm(__byte_perm(q[0], q[1], 0x0040), __byte_perm(q[2], q[3], 0x0040), 0x5410);
}

// x clamped to f16's range, a NaN kept (fminf / fmaxf would turn it into -65504):
// max.NaN / min.NaN, one FMNMX each as before.
__device__ __forceinline__ float clamp_to_f16_range(float x) {
  constexpr float kMax = 65504.0f;
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(-kMax));
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(r), "f"(kMax));
  return r;
}

// Two floats as an f16 pair (first in the low half), clamped to f16's range so that
// an outlier saturates instead of becoming infinite; a NaN stays NaN.
__device__ __forceinline__ uint32_t pack_f16_clamped(float first, float second) {
  const __half2 v = __floats2half2_rn(clamp_to_f16_range(first), clamp_to_f16_range(second));
  return *reinterpret_cast<const uint32_t*>(&v);
}

}  // namespace zinc::cuda
