// A warp's own pipeline of contiguous global spans (weight rows) into a ring of
// kStages shared-memory slots: the warp works on item i while items i + 1 ..
// i + kStages - 1 arrive, and no other warp waits for it. On Hopper each span is
// one bulk copy (the copy engine, issued by lane 0) completed on its slot's
// mbarrier, so a warp keeps kilobytes in flight for one instruction; on older
// GPUs the lanes issue 16-byte cp.async copies.
#pragma once

#include "backend/cuda/cuda_common.cuh"

namespace zinc::cuda {

template <int kStages>
class WarpStream {
 public:
  // slots: kStages · slot_bytes of shared memory, 16-byte aligned; bars: kStages
  // mbarriers of shared memory.
  __device__ WarpStream(uint8_t* slots, int slot_bytes, uint64_t* bars)
      : slots_(slots), slot_bytes_(slot_bytes), bars_(bars) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x % 32 == 0) {
      for (int s = 0; s < kStages; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bars_ + s)) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
#endif
  }

  // Starts copying item i's span (bytes a multiple of 16, both ends 16-byte
  // aligned) into its slot; src null: no item (keeps the pipeline's count).
  __device__ void issue(int i, const uint8_t* src, int bytes) {
    uint8_t* dst = slots_ + i % kStages * slot_bytes_;
#if __CUDA_ARCH__ >= 900
    if (src && threadIdx.x % 32 == 0) {
      const uint32_t bar = smem_address(bars_ + i % kStages);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_address(dst)),
                   "l"(src), "r"(bytes), "r"(bar)
                   : "memory");
    }
#else
    if (src)
      for (int v = threadIdx.x % 32; v < bytes / 16; v += 32) cp_async16(dst + 16 * v, src + 16 * v);
    cp_async_commit();
    ++issued_;
#endif
  }

  // Waits for item i (issued) and returns its slot.
  __device__ const uint8_t* wait(int i) {
#if __CUDA_ARCH__ >= 900
    const uint32_t bar = smem_address(bars_ + i % kStages), parity = i / kStages % 2;
    asm volatile(
        "{\n .reg .pred done;\n wait_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra wait_%=;\n}" ::"r"(bar),
        "r"(parity)
        : "memory");
#else
    wait_newer<kStages - 1>(issued_ - 1 - i);  // all but the items issued after i
    __syncwarp();
#endif
    return slots_ + i % kStages * slot_bytes_;
  }

  // The warp is done reading item i's slot, which the next issue refills.
  __device__ void release() { __syncwarp(); }

 private:
  static __device__ uint32_t smem_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
  }
  // cp.async groups are waited for by count: at most `newer` may stay pending.
  template <int kMax>
  static __device__ void wait_newer(int newer) {
    if constexpr (kMax > 0) {
      if (newer < kMax) return wait_newer<kMax - 1>(newer);
    }
    cp_async_wait<kMax>();
  }
  uint8_t* slots_;
  int slot_bytes_;
  uint64_t* bars_;
  int issued_ = 0;
};

}  // namespace zinc::cuda
