// A warp's own pipeline of contiguous global spans (weight rows) into a ring of
// kStages shared-memory slots: the warp works on item i while items i + 1 ..
// i + kStages - 1 arrive, and no other warp waits for it. On Hopper each span is
// one bulk copy (the copy engine, issued by lane 0) completed on its slot's
// mbarrier, so a warp keeps kilobytes in flight for one instruction; on older
// GPUs the lanes issue 16-byte cp.async copies.
#pragma once

#include "backend/cuda/cuda_common.cuh"

namespace zinc::cuda {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if __CUDA_ARCH__ >= 900
// Bulk copies (the copy engine) into shared memory, counted on an mbarrier: one
// thread announces the bytes and issues the copies; waiters spin on the phase.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbarrier_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}
// dst, src and bytes multiples of 16.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_address(dst)),
               "l"(src), "r"(bytes), "r"(smem_address(bar))
               : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n wait_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n}" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
}
#endif

template <int kStages>
class WarpStream {
 public:
  // slots: kStages · slot_bytes of shared memory, 16-byte aligned; bars: kStages
  // mbarriers of shared memory.
  __device__ WarpStream(uint8_t* slots, int slot_bytes, uint64_t* bars)
      : slots_(slots), slot_bytes_(slot_bytes), bars_(bars) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x % 32 == 0)
      for (int s = 0; s < kStages; ++s) mbarrier_init(bars_ + s);
    __syncwarp();
#endif
  }

  // Starts copying item i's span (bytes a multiple of 16, both ends 16-byte
  // aligned) into its slot; src null: no item (keeps the pipeline's count).
  __device__ void issue(int i, const uint8_t* src, int bytes) {
    uint8_t* dst = slots_ + i % kStages * slot_bytes_;
#if __CUDA_ARCH__ >= 900
    if (src && threadIdx.x % 32 == 0) {
      mbarrier_expect(bars_ + i % kStages, bytes);
      bulk_copy(dst, src, bytes, bars_ + i % kStages);
    }
#else
    if (src)
      for (int v = threadIdx.x % 32; v < bytes / 16; v += 32) cp_async16(dst + 16 * v, src + 16 * v);
    cp_async_commit();
    ++issued_;
#endif
  }

  // issue() for a span (src not null) at any address (rows of formats whose blocks
  // are not 16-byte multiples, such as Q8_0's 34 bytes): the copy starts at the
  // 16-byte boundary below src, and wait() returns the slot that many bytes in. The
  // slot needs 15 bytes more than the span.
  __device__ void issue_unaligned(int i, const uint8_t* src, int bytes) {
    const uint32_t shift = reinterpret_cast<uintptr_t>(src) % 16, at = 4 * (i % kStages);
    shifts_ = (shifts_ & ~(15u << at)) | shift << at;
    issue(i, src - shift, static_cast<int>((shift + bytes + 15) / 16 * 16));
  }

  // Waits for item i (issued) and returns where its span starts in its slot.
  __device__ const uint8_t* wait(int i) {
#if __CUDA_ARCH__ >= 900
    mbarrier_wait(bars_ + i % kStages, i / kStages % 2);
#else
    wait_newer<kStages - 1>(issued_ - 1 - i);  // all but the items issued after i
    __syncwarp();
#endif
    return slots_ + i % kStages * slot_bytes_ + (shifts_ >> 4 * (i % kStages) & 15);
  }

  // The warp is done reading item i's slot, which the next issue refills.
  __device__ void release() { __syncwarp(); }

 private:
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
  uint32_t shifts_ = 0;  // each slot's span offset from its copy's start, 4 bits a slot
  int issued_ = 0;
  static_assert(kStages <= 8, "a slot's offset is 4 bits of shifts_");
};

}  // namespace zinc::cuda
