// sample_rows: the sampler chain without penalties (draw_from_row in
// sample/sampler.h) for each row of logits, on the device, so that a sampled step
// reads back one id instead of the row. Two launches: blocks that each keep the
// best kMaxRowTopK of a slice of the row, then one block per row that sorts the
// slices' top-k and a warp that truncates and draws in double precision, in the
// host's order of operations.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kSortKeys = 4096;                        // keys a slice block sorts at once
constexpr int kPassKeys = kSortKeys - kMaxRowTopK;     // new logits per sort: the best so far stay in front
constexpr int kMaxSlices = 64;
constexpr int kPickKeys = kMaxSlices * kMaxRowTopK;    // the pick block's keys at most
constexpr size_t kPickSmem = kPickKeys * sizeof(uint64_t);

// A logit and its id as one key ordered as the host's by_logit_desc: larger logit,
// then lower id. 0 is below every key (padding).
__device__ __forceinline__ uint64_t make_key(float logit, int64_t id) {
  uint32_t b = __float_as_uint(logit == 0.0f ? 0.0f : logit);  // -0 ties +0, as compared on the host
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (uint64_t{b} << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ float key_logit(uint64_t key) {
  uint32_t b = static_cast<uint32_t>(key >> 32);
  b = (b & 0x80000000u) ? (b & 0x7fffffffu) : ~b;
  return __uint_as_float(b);
}
__device__ __forceinline__ int32_t key_id(uint64_t key) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key));
}

// Bitonic sort of keys[0, n), n a power of two, largest first; the whole block calls it.
__device__ void sort_desc(uint64_t* keys, int n) {
  for (int size = 2; size <= n; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const uint64_t a = keys[lo], b = keys[hi];
        if ((a < b) == ((lo & size) == 0)) keys[lo] = b, keys[hi] = a;
      }
      __syncthreads();
    }
}

// grid (slices, rows): block b leaves the best kMaxRowTopK keys of the row's slice b,
// sorted, in partials {kMaxRowTopK, slices, rows}.
__global__ void __launch_bounds__(kThreads) sample_slice_kernel(const float* logits, int64_t V, int64_t slice,
                                                                uint64_t* partials) {
  pdl_begin();
  __shared__ uint64_t keys[kSortKeys];
  const float* l = logits + static_cast<int64_t>(blockIdx.y) * V;
  const int64_t begin = blockIdx.x * slice, end = begin + slice < V ? begin + slice : V;
  for (int i = threadIdx.x; i < kMaxRowTopK; i += blockDim.x) keys[i] = 0;
  for (int64_t from = begin; from < end; from += kPassKeys) {
    for (int i = threadIdx.x; i < kPassKeys; i += blockDim.x)
      keys[kMaxRowTopK + i] = from + i < end ? make_key(l[from + i], from + i) : 0;
    __syncthreads();
    sort_desc(keys, kSortKeys);
  }
  uint64_t* out = partials + (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kMaxRowTopK;
  for (int i = threadIdx.x; i < kMaxRowTopK; i += blockDim.x) out[i] = keys[i];
}

// One block per row: the row's top-k from its slices' lists, then draw_from_row's
// truncation and draw on those k by one warp (exp per lane, sums in order by lane 0).
__global__ void __launch_bounds__(kThreads) sample_pick_kernel(const uint64_t* partials, int64_t V, int slices,
                                                               const RowSampling* params, int32_t* ids) {
  pdl_begin();
  extern __shared__ uint64_t keys[];  // kPickKeys
  __shared__ double e[kMaxRowTopK];
  const RowSampling s = params[blockIdx.x];
  const int limit = V < kMaxRowTopK ? static_cast<int>(V) : kMaxRowTopK;
  const int k = s.top_k < 1 ? 1 : (s.top_k > limit ? limit : s.top_k), n = slices * k;
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  const uint64_t* p = partials + static_cast<int64_t>(blockIdx.x) * slices * kMaxRowTopK;
  for (int i = threadIdx.x; i < n2; i += blockDim.x) keys[i] = i < n ? p[(i / k) * kMaxRowTopK + i % k] : 0;
  __syncthreads();
  sort_desc(keys, n2);
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const double best = key_logit(keys[0]);
  int keep = k;
  // keep_top_p: probabilities at temperature 1 over the k.
  if (s.top_p < 1 && k > 1) {
    for (int i = lane; i < k; i += 32) e[i] = exp(static_cast<double>(key_logit(keys[i])) - best);
    __syncwarp();
    if (lane == 0) {
      double sum = 0, cumulative = 0;
      for (int i = 0; i < k; ++i) sum += e[i];
      for (int i = 0; i < k; ++i) {
        cumulative += e[i] / sum;
        if (cumulative >= s.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    keep = __shfl_sync(0xffffffffu, keep, 0);
    __syncwarp();
  }
  // min-p's cut.
  if (s.log_min_p != -INFINITY) {
    const double threshold = best + s.log_min_p;
    int cut = keep;
    for (int i = 1 + lane; i < keep; i += 32)
      if (!(key_logit(keys[i]) >= threshold)) cut = min(cut, i);
    for (int o = 16; o > 0; o >>= 1) cut = min(cut, __shfl_xor_sync(0xffffffffu, cut, o));
    keep = cut;
  }
  // softmax(logit / T) and draw_index.
  for (int i = lane; i < keep; i += 32) e[i] = exp((static_cast<double>(key_logit(keys[i])) - best) / s.temperature);
  __syncwarp();
  if (lane != 0) return;
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += e[i];
  double total = 0;
  for (int i = 0; i < keep; ++i) total += e[i] / sum;
  const double target = s.uniform * total;
  double cumulative = 0;
  int pick = keep - 1;
  for (int i = 0; i < keep; ++i) {
    cumulative += e[i] / sum;
    if (target < cumulative) {
      pick = i;
      break;
    }
  }
  ids[blockIdx.x] = key_id(keys[pick]);
}

int64_t slice_len(int64_t V) {
  return std::max<int64_t>(kPassKeys, ceil_div(V, kMaxSlices));
}

}  // namespace

size_t sample_rows_partials(int64_t V, int64_t rows) {
  return static_cast<size_t>(ceil_div(V, slice_len(V)) * rows) * kMaxRowTopK;
}

void sample_rows(const float* logits, int64_t V, int64_t rows, const RowSampling* params, int32_t* ids,
                 uint64_t* partials, cudaStream_t s) {
  const int64_t slice = slice_len(V);
  const int slices = static_cast<int>(ceil_div(V, slice));
  launch_pdl(sample_slice_kernel, dim3(slices, static_cast<unsigned>(rows)), kThreads, s, logits, V, slice, partials);
  ZINC_CUDA_LAUNCHED("sample_slice");
  allow_smem<sample_pick_kernel>(kPickSmem);
  launch_pdl_smem(sample_pick_kernel, static_cast<unsigned>(rows), kThreads, kPickSmem, s, partials, V, slices,
                  params, ids);
  ZINC_CUDA_LAUNCHED("sample_pick");
}

}  // namespace zinc::cuda
