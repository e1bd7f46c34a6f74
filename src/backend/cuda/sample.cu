// sample_rows: the sampler chain without DRY (penalise_row and draw_from_row in
// sample/sampler.h) for each row of logits, on the device, so that a sampled step
// reads back one id instead of the row. Two launches: blocks that each penalise and
// keep the row's top-k of a slice of it, then one block per row that takes the
// top-k of the slices' lists and a warp that truncates and draws in double
// precision, in the host's order of operations.
//
// Neither sorts everything it reads: a lower bound on the k-th best key (the k-th
// best of the threads' maxima in a slice; the best of the slices' k-th keys in the
// pick) admits few candidates besides the top-k, and only those are sorted.
//
// With top-k off the candidates are the row's kMaxRowTopK best; each slice also
// leaves its maximum and Σ exp(logit - maximum) (double), from which the pick forms
// top-p's normaliser over the whole row, and a row whose survivors may lie beyond
// the candidates is declined (id -1, row_draw_declined in sample/sampler.h).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 512, kPerThread = 8;
constexpr int kPassKeys = kThreads * kPerThread;  // logits a slice block holds at once
constexpr int kMaxSlices = 64;
// Candidates sorted at once: a pass's and the best so far (slice), or every list's (pick).
constexpr int kListKeys = 2 * kPassKeys;
static_assert(kListKeys >= kPassKeys + kMaxRowTopK && kListKeys >= kMaxSlices * kMaxRowTopK);
constexpr size_t kListSmem = kListKeys * sizeof(uint64_t);
// A slice's words in partials: its top-k keys, then its maximum and its sum of
// exp(logit - maximum) as doubles (top-k off with top-p on).
constexpr int kSliceWords = kMaxRowTopK + 2;

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

// The row's candidates: its top-k clamped to [1, min(kMaxRowTopK, V)], that bound
// when top-k is off.
__device__ __forceinline__ int row_top_k(const RowSampling& s, int64_t V) {
  const int limit = V < kMaxRowTopK ? static_cast<int>(V) : kMaxRowTopK;
  return s.top_k < 1 || s.top_k > limit ? limit : s.top_k;
}
// Whether the pick needs the slices' sums: top-p over the whole row.
__device__ __forceinline__ bool needs_row_sum(const RowSampling& s) { return s.top_k < 1 && s.top_p < 1; }

__device__ __forceinline__ uint64_t block_max_key(uint64_t v, uint64_t* shared) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < kThreads / 32; ++w) v = max(v, shared[w]);
  return v;
}

// Pads list[n, n2) with 0 (n2 the power of two at least n) and sorts list[0, n2).
__device__ void sort_candidates(uint64_t* list, int n) {
  int n2 = 2;
  while (n2 < n) n2 <<= 1;
  for (int i = n + threadIdx.x; i < n2; i += blockDim.x) list[i] = 0;
  __syncthreads();
  sort_desc(list, n2);
}

// apply_penalties on the row's logits in [begin, end), in place, by one block: each
// distinct token of the window once, with its count, in the host's float operations
// (no contraction into fused multiply-adds). The block reads its slice after this.
__device__ void penalise_slice(float* l, int64_t begin, int64_t end, const RowSampling& s, int32_t id,
                               int32_t* window) {
  const int n = s.n_recent < 0 ? 0 : (s.n_recent > kMaxRowRecent ? kMaxRowRecent : s.n_recent);
  const int total = n + (s.recent_then_id ? 1 : 0);
  for (int j = threadIdx.x; j < n; j += blockDim.x) window[j] = s.recent[j];
  if (threadIdx.x == 0 && s.recent_then_id) window[n] = id;
  __syncthreads();
  for (int j = threadIdx.x; j < total; j += blockDim.x) {
    const int32_t t = window[j];
    if (t < begin || t >= end) continue;
    int count = 0;
    bool first = true;
    for (int m = 0; m < total; ++m)
      if (window[m] == t) ++count, first = first && m >= j;
    if (!first) continue;
    float x = l[t];
    x = x > 0 ? __fdiv_rn(x, s.repeat_penalty) : __fmul_rn(x, s.repeat_penalty);
    l[t] = __fsub_rn(x, __fadd_rn(__fmul_rn(static_cast<float>(count), s.frequency_penalty), s.presence_penalty));
  }
  __syncthreads();
}

// grid (slices, rows): block b penalises its slice b of the row, then leaves the
// row's top-k keys of that slice, sorted, in partials {kSliceWords, slices, rows} (0
// after them), and when needs_row_sum() the slice's maximum and sum.
__global__ void __launch_bounds__(kThreads) sample_slice_kernel(float* logits, int64_t V, int64_t slice,
                                                                const RowSampling* params, const int32_t* ids,
                                                                uint64_t* partials) {
  pdl_begin();
  extern __shared__ uint64_t list[];  // kListKeys: the best so far, then this pass's candidates
  __shared__ uint64_t maxima[kThreads];
  __shared__ int count;
  const RowSampling& s = params[blockIdx.y];
  const int k = row_top_k(s, V);
  float* l = logits + static_cast<int64_t>(blockIdx.y) * V;
  const int64_t begin = blockIdx.x * slice, end = begin + slice < V ? begin + slice : V;
  if (s.n_recent > 0 || s.recent_then_id) {
    // The window shares the list's memory, which the passes below fill afterwards.
    penalise_slice(l, begin, end, s, ids[blockIdx.y], reinterpret_cast<int32_t*>(list));
  }
  int kept = 0;  // list[0, kept): the best so far, sorted
  for (int64_t from = begin; from < end; from += kPassKeys) {
    uint64_t key[kPerThread], best = 0;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t i = from + j * kThreads + threadIdx.x;
      key[j] = i < end ? make_key(l[i], i) : 0;
      best = max(best, key[j]);
    }
    maxima[threadIdx.x] = best;
    if (threadIdx.x == 0) count = kept;
    __syncthreads();
    sort_desc(maxima, kThreads);
    // The k best maxima are k keys of this pass: its k-th best is at least the k-th of
    // them, and the k-th best of all so far at least that and the kept k-th.
    uint64_t bound = max(maxima[k - 1], kept >= k ? list[k - 1] : 0);
    bound = max(bound, uint64_t{1});  // padding never enters
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      if (key[j] >= bound) list[atomicAdd(&count, 1)] = key[j];
    __syncthreads();
    const int n = count;
    sort_candidates(list, n);
    kept = n < k ? n : k;
  }
  uint64_t* out = partials + (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kSliceWords;
  for (int i = threadIdx.x; i < kMaxRowTopK; i += blockDim.x) out[i] = i < kept ? list[i] : 0;
  if (!needs_row_sum(s)) return;
  // The slice's maximum is its best key's logit; Σ exp(logit - maximum) by the block.
  const double mx = kept > 0 ? static_cast<double>(key_logit(list[0])) : -INFINITY;
  double sum = 0;
  if (mx != -INFINITY)
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) sum += exp(static_cast<double>(l[i]) - mx);
  __shared__ double sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += sums[w];
    out[kMaxRowTopK] = static_cast<uint64_t>(__double_as_longlong(mx));
    out[kMaxRowTopK + 1] = static_cast<uint64_t>(__double_as_longlong(total));
  }
}

// One block per row: the row's top-k from its slices' lists, then draw_from_row's
// truncation and draw on those k by one warp (exp and division per lane, sums in
// order by lane 0).
__global__ void __launch_bounds__(kThreads) sample_pick_kernel(const uint64_t* partials, int64_t V, int slices,
                                                               const RowSampling* params, int32_t* ids) {
  pdl_begin();
  extern __shared__ uint64_t list[];  // kListKeys
  __shared__ uint64_t warp_max[kThreads / 32];
  __shared__ double e[kMaxRowTopK];
  __shared__ int count;
  // The draw's parameters, not the penalty window (the slice blocks applied it).
  const RowSampling& row = params[blockIdx.x];
  const double uniform = row.uniform, log_min_p = row.log_min_p;
  const float top_p = row.top_p, temperature = row.temperature;
  const int k = row_top_k(row, V);
  const bool off = row.top_k < 1;  // top-k off: k is the candidates' bound
  const uint64_t* p = partials + static_cast<int64_t>(blockIdx.x) * slices * kSliceWords;
  // Each list's k-th key bounds the row's k-th best from below.
  uint64_t bound = 0;
  for (int b = threadIdx.x; b < slices; b += blockDim.x) bound = max(bound, p[b * kSliceWords + k - 1]);
  if (threadIdx.x == 0) count = 0;
  bound = max(block_max_key(bound, warp_max), uint64_t{1});
  for (int i = threadIdx.x; i < slices * k; i += blockDim.x) {
    const uint64_t key = p[(i / k) * kSliceWords + i % k];
    if (key >= bound) list[atomicAdd(&count, 1)] = key;
  }
  __syncthreads();
  sort_candidates(list, count);
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const double best = key_logit(list[0]);
  // Lane 0's sum of e[0, n) in order.
  const auto ordered_sum = [&](int n) {
    double sum = 0;
    if (lane == 0)
      for (int i = 0; i < n; ++i) sum += e[i];
    return __shfl_sync(0xffffffffu, sum, 0);
  };
  int keep = k;
  bool reached = false;  // top-p's prefix ends among the k
  // keep_top_p: probabilities at temperature 1 over the k, or with top-k off over the
  // whole row (the slices' sums, each taken to the row's maximum, in slice order).
  if (top_p < 1 && k > 1) {
    for (int i = lane; i < k; i += 32) e[i] = exp(static_cast<double>(key_logit(list[i])) - best);
    __syncwarp();
    double sum = 0;
    if (needs_row_sum(row)) {  // the slices left their sums
      if (lane == 0)
        for (int b = 0; b < slices; ++b) {
          const double mx = __longlong_as_double(static_cast<long long>(p[b * kSliceWords + kMaxRowTopK]));
          const double s = __longlong_as_double(static_cast<long long>(p[b * kSliceWords + kMaxRowTopK + 1]));
          if (mx != -INFINITY) sum += s * exp(mx - best);
        }
      sum = __shfl_sync(0xffffffffu, sum, 0);
    } else {
      sum = ordered_sum(k);
    }
    for (int i = lane; i < k; i += 32) e[i] /= sum;
    __syncwarp();
    if (lane == 0) {
      double cumulative = 0;
      for (int i = 0; i < k; ++i) {
        cumulative += e[i];
        if (cumulative >= top_p) {
          keep = i + 1;
          reached = true;
          break;
        }
      }
    }
    keep = __shfl_sync(0xffffffffu, keep, 0);
    reached = __shfl_sync(0xffffffffu, reached, 0);
  }
  // min-p's cut: the first candidate below it.
  if (log_min_p != -INFINITY) {
    const double threshold = best + log_min_p;
    int cut = keep;
    for (int i = 1 + lane; i < keep; i += 32)
      if (!(key_logit(list[i]) >= threshold)) cut = min(cut, i);
    for (int o = 16; o > 0; o >>= 1) cut = min(cut, __shfl_xor_sync(0xffffffffu, cut, o));
    keep = cut;
  }
  // Top-k off: survivors beyond the k (neither cut ended among them) are the host's.
  if (off && k < V && !reached && keep == k) {
    if (lane == 0) ids[blockIdx.x] = -1;
    return;
  }
  // softmax(logit / T) and draw_index.
  __syncwarp();
  for (int i = lane; i < keep; i += 32) e[i] = exp((static_cast<double>(key_logit(list[i])) - best) / temperature);
  __syncwarp();
  const double sum = ordered_sum(keep);
  for (int i = lane; i < keep; i += 32) e[i] /= sum;
  __syncwarp();
  if (lane != 0) return;
  double total = 0;
  for (int i = 0; i < keep; ++i) total += e[i];
  const double target = uniform * total;
  double cumulative = 0;
  int pick = keep - 1;
  for (int i = 0; i < keep; ++i) {
    cumulative += e[i];
    if (target < cumulative) {
      pick = i;
      break;
    }
  }
  ids[blockIdx.x] = key_id(list[pick]);
}

int64_t slice_len(int64_t V) {
  return std::max<int64_t>(kPassKeys, ceil_div(V, kMaxSlices));
}

}  // namespace

size_t sample_rows_partials(int64_t V, int64_t rows) {
  return static_cast<size_t>(ceil_div(V, slice_len(V)) * rows) * kSliceWords;
}

void sample_rows(float* logits, int64_t V, int64_t rows, const RowSampling* params, int32_t* ids,
                 uint64_t* partials, cudaStream_t s) {
  const int64_t slice = slice_len(V);
  const int slices = static_cast<int>(ceil_div(V, slice));
  allow_smem<sample_slice_kernel>(kListSmem);
  launch_pdl_smem(sample_slice_kernel, dim3(slices, static_cast<unsigned>(rows)), kThreads, kListSmem, s, logits, V,
                  slice, params, static_cast<const int32_t*>(ids), partials);
  ZINC_CUDA_LAUNCHED("sample_slice");
  allow_smem<sample_pick_kernel>(kListSmem);
  launch_pdl_smem(sample_pick_kernel, static_cast<unsigned>(rows), kThreads, kListSmem, s, partials, V, slices,
                  params, ids);
  ZINC_CUDA_LAUNCHED("sample_pick");
}

}  // namespace zinc::cuda
