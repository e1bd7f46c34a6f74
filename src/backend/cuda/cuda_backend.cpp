// CudaBackend: the ops of backend.h on one CUDA stream, plus transparent graph
// replay of repeated forward passes (graph_replay.h) and a scratch arena per forward
// pass (scratch_arena.h, with device_memory.h's chunks).
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <map>
#include <stdexcept>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_gemm.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/graph_replay.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_profile.h"
#include "backend/scratch_arena.h"
#include "gguf/gguf.h"

namespace zinc {
namespace {

void check(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("cuda ") + op + ": " + what);
}
void check_f32(const Tensor& t, const char* op) { check(t.type == DType::F32, op, "expected an F32 tensor"); }
// An optional F32 tensor's data, or null.
const float* floats_or_null(const Tensor* t) { return t ? t->as<const float>() : nullptr; }

enum class OpId : uint64_t {
  Zero = 1, Copy, Embed, Matmul, RmsNorm, L2Norm, RmsNormGated, Rope, Add, Swiglu, MulSigmoid, SliceCols,
  GdnGates, CausalConv, DeltaRule, KvStore, Attention, MoeRoute, MoeFfn, Argmax,
  MatmulMany, AddRmsNorm, GdnPrepare, SharedExpertAdd, GdnCore, AttentionPrepare, AttentionGated,
  MoeBlock, SampleRows, Geglu, Scale, TokenLogprobs, AddRmsNormMatmulMany,
};
// For zinc bench --profile: names in OpId order (extend both together).
const char* op_name(uint64_t id) {
  static const char* const names[] = {"?", "zero", "copy", "embed", "matmul", "rms_norm", "l2_norm",
      "rms_norm_gated", "rope", "add", "swiglu", "mul_sigmoid", "slice_cols", "gdn_gates", "causal_conv",
      "delta_rule", "kv_store", "attention", "moe_route", "moe_ffn", "argmax", "matmul_many", "add_rms_norm",
      "gdn_prepare", "shared_expert_add", "gdn_core", "attention_prepare",
      "attention_gated", "moe_block", "sample_rows", "geglu", "scale", "token_logprobs",
      "add_rms_norm_matmul_many"};
  return id < std::size(names) ? names[id] : "?";
}

using cuda::Key;
using cuda::Launch;
using cuda::device_malloc;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& opt)
      : profiler_(opt.profile ? std::make_unique<cuda::OpProfiler>() : nullptr) {
    ZINC_CUDA_CHECK(cudaSetDevice(opt.device));
    ZINC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    replay_ = std::make_unique<cuda::GraphReplay>(opt.graphs && !opt.profile, stream_);
    dense_ = std::make_unique<cuda::DenseGemm>();  // after cudaSetDevice: its handle binds to the device
    route_words_ = static_cast<unsigned long long*>(device_alloc(kRouteWordsBytes));
    ZINC_CUDA_CHECK(unpublish_picks(route_words_, stream_));
    for (auto& s : staging_) {
      ZINC_CUDA_CHECK(cudaHostAlloc(&s.host, kStagingBytes, cudaHostAllocDefault));
      ZINC_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    }
    for (auto* ring : {&small_writes_, &small_reads_})
      for (auto& s : *ring) {
        ZINC_CUDA_CHECK(cudaHostAlloc(&s.host, kSmallBytes, cudaHostAllocMapped));
        ZINC_CUDA_CHECK(cudaHostGetDevicePointer(&s.device, s.host, 0));
        ZINC_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
      }
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    replay_.reset();
    for (auto& s : staging_) {
      cudaFreeHost(s.host);
      cudaEventDestroy(s.done);
    }
    for (auto* ring : {&small_writes_, &small_reads_})
      for (auto& s : *ring) {
        cudaFreeHost(s.host);
        cudaEventDestroy(s.done);
      }
    for (void* p : allocations_) cudaFree(p);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::vector<CudaOpTime> take_profile() {
    check(profiler_ != nullptr, "take_profile", "the backend was made without CudaOptions::profile");
    finish_segment();
    return profiler_->take(stream_);
  }

  // ---- memory ----------------------------------------------------------------
  Tensor upload_weight(const gguf::TensorInfo& info) override {
    Tensor t;
    t.type = info.type;
    for (size_t i = 0; i < 4; ++i) t.ne[i] = info.dim(i);
    check(t.nbytes() == info.nbytes, "upload_weight", "byte size differs from the shape");
    t.data = device_alloc(info.nbytes);
    if (profiler_) profiler_->name_weight(t.data, info.name);
    // The mapped file is pageable: copy through two pinned buffers so the page
    // faults of one chunk overlap the transfer of the other.
    for (size_t off = 0, i = 0; off < info.nbytes; off += kStagingBytes, ++i) {
      Staging& s = staging_[i % 2];
      const size_t len = std::min(kStagingBytes, info.nbytes - off);
      ZINC_CUDA_CHECK(cudaEventSynchronize(s.done));
      std::memcpy(s.host, info.data + off, len);
      ZINC_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(t.data) + off, s.host, len, cudaMemcpyHostToDevice, stream_));
      ZINC_CUDA_CHECK(cudaEventRecord(s.done, stream_));
    }
    return t;
  }
  Tensor alloc_persistent(DType type, std::initializer_list<int64_t> dims) override {
    Tensor t = Tensor::make(type, dims);
    t.data = device_alloc(t.nbytes());
    ZINC_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
    return t;
  }
  Tensor scratch(DType type, std::initializer_list<int64_t> dims) override {
    Tensor t = Tensor::make(type, dims);
    t.data = arena_.take(t.nbytes());
    return t;
  }
  void scratch_reset() override {
    replay_->finish_segment();
    replay_->begin_segment(arena_.reset());
  }
  ScratchMark scratch_mark() const override { return arena_.mark(); }
  void scratch_rewind(const ScratchMark& mark) override { arena_.rewind(mark); }
  size_t scratch_bytes() const override { return arena_.held_bytes(); }
  void write(const Tensor& dst, const void* host, size_t bytes, size_t offset) override {
    check(offset + bytes <= dst.nbytes(), "write", "out of bounds");
    replay_->flush();  // deferred ops must run before this copy
    char* to = static_cast<char*>(dst.data) + offset;
    // host_alloc memory may still be filling from a read_to_host_alloc queued on the
    // stream: its copies stay on the stream too, never read by the host at once.
    if (bytes <= kSmallBytes && !in_host_alloc(host)) {
      // Through a pinned slot: a copy from pageable memory may wait for the stream,
      // and a step's token ids and positions must not wait for the step before.
      SmallCopy& s = small_writes_[next_write_++ % small_writes_.size()];
      ZINC_CUDA_CHECK(cudaEventSynchronize(s.done));  // the slot's last copy has left
      std::memcpy(s.host, host, bytes);
      cuda::small_copy(to, s.device, bytes, stream_);
      ZINC_CUDA_CHECK(cudaEventRecord(s.done, stream_));
      return;
    }
    ZINC_CUDA_CHECK(cudaMemcpyAsync(to, host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  uint64_t read_async(const Tensor& src, void* host, size_t bytes) override {
    check(bytes <= src.nbytes(), "read_async", "out of bounds");
    if (bytes > kSmallBytes) {
      read(src, host, bytes, 0);
      return 0;
    }
    finish_segment();
    SmallCopy& s = small_reads_[next_read_ % small_reads_.size()];
    if (s.ticket != 0) wait_read(s.ticket);  // the slot comes round again: deliver its bytes first
    cuda::small_copy(s.device, src.data, bytes, stream_);
    ZINC_CUDA_CHECK(cudaEventRecord(s.done, stream_));
    s.dst = host;
    s.bytes = bytes;
    s.ticket = ++next_read_;
    return s.ticket;
  }
  void wait_read(uint64_t ticket) override {
    if (ticket == 0) return;
    SmallCopy& s = small_reads_[(ticket - 1) % small_reads_.size()];
    if (s.ticket != ticket) return;  // delivered already
    ZINC_CUDA_CHECK(cudaEventSynchronize(s.done));
    std::memcpy(s.dst, s.host, s.bytes);
    s.ticket = 0;
  }
  void read(const Tensor& src, void* host, size_t bytes, size_t offset) override {
    check(offset + bytes <= src.nbytes(), "read", "out of bounds");
    finish_segment();
    ZINC_CUDA_CHECK(
        cudaMemcpyAsync(host, static_cast<const char*>(src.data) + offset, bytes, cudaMemcpyDeviceToHost, stream_));
    ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // Page-locked: on an H200 host 66 MB came back in 2.0 ms into such memory and in
  // 51 ms into fresh pageable memory; allocating it costs about 30 ms, so callers keep
  // and reuse it (PERFORMANCE.md, session 46).
  void* host_alloc(size_t bytes) override {
    void* p = nullptr;
    ZINC_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    host_allocs_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void host_free(void* p) override {
    host_allocs_.erase(static_cast<const char*>(p));
    (void)cudaFreeHost(p);  // unchecked like ~CudaBackend's: callers are destructors
  }
  void read_to_host_alloc(const Tensor& src, void* host, size_t bytes, size_t offset) override {
    check(offset + bytes <= src.nbytes(), "read_to_host_alloc", "out of bounds");
    finish_segment();
    ZINC_CUDA_CHECK(cudaMemcpyAsync(host, static_cast<const char*>(src.data) + offset, bytes,
                                    cudaMemcpyDeviceToHost, stream_));
  }
  void zero(const Tensor& t) override {
    submit(Key(OpId::Zero) << t, [t](cudaStream_t s) { ZINC_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), s)); });
  }
  void copy(const Tensor& src, const Tensor& dst) override {
    check(src.nbytes() == dst.nbytes(), "copy", "sizes differ");
    submit(Key(OpId::Copy) << src << dst, [src, dst](cudaStream_t s) {
      ZINC_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, s));
    });
  }
  void sync() override {
    finish_segment();
    ZINC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // ---- ops -----------------------------------------------------------------------
  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    check_f32(out, "embed");
    check(ids.type == DType::I32, "embed", "ids must be I32");
    check(out.ne[0] == table.ne[0] && out.rows() == ids.ne[0] && table.ne[0] % 8 == 0, "embed", "shape mismatch");
    submit(Key(OpId::Embed) << table << ids << out,
           [=](cudaStream_t s) { cuda::embed(table, ids, out, s); });
  }

  void matmul(const Tensor& w, const Tensor& x, const Tensor& y) override {
    check_f32(x, "matmul");
    check_f32(y, "matmul");
    check(x.ne[0] == w.ne[0] && w.ne[0] % 8 == 0, "matmul",
          "x row length differs from the weight's (or not a multiple of 8)");
    check(y.ne[0] == w.rows() && y.rows() == x.rows(), "matmul", "y shape mismatch");
    const bool batch = cuda::matmul_batched_takes({&w, 1}, x.rows());
    void* xb = batch ? arena_.take(cuda::matmul_batched_scratch_bytes({&w, 1}, x)) : nullptr;
    submit(Key(OpId::Matmul) << w << x << y, [=, dense = dense_.get()](cudaStream_t s) {
      if (batch) cuda::matmul_batched({&w, 1}, x, {&y, 1}, xb, *dense, s);
      else cuda::matvec(w, x, y, s);
    });
  }

  void rms_norm(const Tensor& x, const Tensor* w, float eps, const Tensor& y) override {
    check_f32(x, "rms_norm");
    check(!w || (w->ne[0] == x.ne[0] && w->type == DType::F32), "rms_norm", "weight shape/type");
    check(y.n_elements() == x.n_elements(), "rms_norm", "y shape");
    const float* wp = floats_or_null(w);
    submit(Key(OpId::RmsNorm) << x << w << eps << y, [=](cudaStream_t s) {
      cuda::row_norm(cuda::NormKind::Rms, x.as<const float>(), wp, nullptr, eps, y.as<float>(), x.ne[0], x.rows(), s);
    });
  }
  void l2_norm(const Tensor& x, float eps, const Tensor& y) override {
    check_f32(x, "l2_norm");
    check(y.n_elements() == x.n_elements(), "l2_norm", "y shape");
    submit(Key(OpId::L2Norm) << x << eps << y, [=](cudaStream_t s) {
      cuda::row_norm(cuda::NormKind::L2, x.as<const float>(), nullptr, nullptr, eps, y.as<float>(), x.ne[0], x.rows(),
                     s);
    });
  }
  void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& y) override {
    check_f32(x, "rms_norm_gated");
    check(w.ne[0] == x.ne[0] && w.type == DType::F32, "rms_norm_gated", "weight shape/type");
    check(z.n_elements() == x.n_elements() && y.n_elements() == x.n_elements(), "rms_norm_gated", "z/y shape");
    submit(Key(OpId::RmsNormGated) << x << w << z << eps << y, [=](cudaStream_t s) {
      cuda::row_norm(cuda::NormKind::Rms, x.as<const float>(), w.as<const float>(), z.as<const float>(), eps,
                     y.as<float>(), x.ne[0], x.rows(), s);
    });
  }
  void rope(const Tensor& x, const Tensor& pos, const RopeParams& rp) override {
    check_f32(x, "rope");
    const int64_t hd = x.ne[0], heads = x.ne[1], n = x.ne[2];
    check(rp.n_rot % 2 == 0 && rp.n_rot <= hd && pos.ne[0] == n && pos.type == DType::I32, "rope", "shape");
    check(!rp.freq_factors || rp.freq_factors->ne[0] == rp.n_rot / 2, "rope", "freq_factors shape");
    submit(Key(OpId::Rope) << x << pos << int64_t{rp.n_rot} << rp.theta << int64_t{rp.neox} << rp.freq_scale
                           << rp.freq_factors,
           [=, args = cuda::RopeArgs{rp.n_rot, rp.theta, rp.freq_scale, rp.neox,
                                     floats_or_null(rp.freq_factors)}](cudaStream_t s) {
             cuda::rope(x.as<float>(), pos.as<const int32_t>(), hd, heads, n, args, s);
           });
  }

  void add(const Tensor& a, const Tensor& b, const Tensor& y) override {
    const bool bias = b.n_elements() == a.ne[0];
    check((bias || a.n_elements() == b.n_elements()) && a.n_elements() == y.n_elements(), "add", "shapes differ");
    submit(Key(OpId::Add) << a << b << y, [=](cudaStream_t s) {
      cuda::add(a.as<const float>(), b.as<const float>(), y.as<float>(), y.n_elements(), b.n_elements(), s);
    });
  }
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    check(gate.n_elements() == up.n_elements() && y.n_elements() == up.n_elements(), "swiglu", "shapes differ");
    submit(Key(OpId::Swiglu) << gate << up << y, [=](cudaStream_t s) {
      cuda::swiglu(gate.as<const float>(), up.as<const float>(), y.as<float>(), y.n_elements(), s);
    });
  }
  void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    check(gate.n_elements() == up.n_elements() && y.n_elements() == up.n_elements(), "geglu", "shapes differ");
    submit(Key(OpId::Geglu) << gate << up << y, [=](cudaStream_t s) {
      cuda::geglu(gate.as<const float>(), up.as<const float>(), y.as<float>(), y.n_elements(), s);
    });
  }
  void scale(const Tensor& x, float f, const Tensor& y) override {
    check(x.n_elements() == y.n_elements(), "scale", "shapes differ");
    submit(Key(OpId::Scale) << x << f << y, [=](cudaStream_t s) {
      cuda::scale(x.as<const float>(), f, y.as<float>(), y.n_elements(), s);
    });
  }
  void mul_sigmoid(const Tensor& x, const Tensor& g, const Tensor& y) override {
    check(y.n_elements() == x.n_elements(), "mul_sigmoid", "y shape");
    const bool per_row = g.n_elements() != x.n_elements();
    check(!per_row || (g.ne[0] == 1 && g.rows() == x.rows()), "mul_sigmoid", "gate shape");
    submit(Key(OpId::MulSigmoid) << x << g << y, [=](cudaStream_t s) {
      cuda::mul_sigmoid(x.as<const float>(), g.as<const float>(), y.as<float>(), x.n_elements(), x.ne[0], per_row, s);
    });
  }
  void slice_cols(const Tensor& x, int64_t offset, int64_t len, const Tensor& y) override {
    check(offset >= 0 && offset + len <= x.ne[0] && y.ne[0] == len && y.rows() == x.rows(), "slice_cols", "shape");
    submit(Key(OpId::SliceCols) << x << offset << len << y, [=](cudaStream_t s) {
      cuda::slice_cols(x.as<const float>(), y.as<float>(), x.ne[0], offset, len, x.rows(), s);
    });
  }

  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, const Tensor& g,
                 const Tensor& beta) override {
    const int64_t H = a.ne[0];
    check(dt_bias.ne[0] == H && a_neg.ne[0] == H && b.n_elements() == a.n_elements(), "gdn_gates", "shape");
    check(g.n_elements() == a.n_elements() && beta.n_elements() == a.n_elements(), "gdn_gates", "g/beta shape");
    submit(Key(OpId::GdnGates) << a << b << dt_bias << a_neg << g << beta, [=](cudaStream_t s) {
      cuda::gdn_gates(a.as<const float>(), b.as<const float>(), dt_bias.as<const float>(), a_neg.as<const float>(),
                      g.as<float>(), beta.as<float>(), H, a.n_elements(), s);
    });
  }
  void causal_conv_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& y) override {
    const int64_t C = x.ne[0], n = x.rows(), K = w.ne[0];
    check(w.ne[1] == C && w.type == DType::F32, "causal_conv_silu", "weight shape/type");
    check(state.ne[0] == C && state.ne[1] == K - 1 && y.n_elements() == x.n_elements(), "causal_conv_silu",
          "state/y shape");
    submit(Key(OpId::CausalConv) << x << w << state << y, [=](cudaStream_t s) {
      cuda::causal_conv_silu(x.as<const float>(), w.as<const float>(), state.as<float>(), y.as<float>(), C, n, K, s);
    });
  }
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& state, const Tensor& y) override {
    const cuda::DeltaRuleShape sh{q.ne[2], v.ne[1], q.ne[1], q.ne[0], v.ne[0]};
    check(k.n_elements() == q.n_elements() && v.ne[2] == sh.n_tokens && sh.n_heads % sh.n_k_heads == 0,
          "gated_delta_rule", "q/k/v shape");
    check(g.ne[0] == sh.n_heads && beta.ne[0] == sh.n_heads && state.n_elements() == sh.n_heads * sh.dk * sh.dv &&
              state.type == DType::F32,
          "gated_delta_rule", "g/beta/state shape");
    // Prefill takes the chunked form (like the CPU backend), decode the recurrence.
    const bool chunked = sh.n_tokens >= cuda::kDeltaRuleChunkedMinTokens && cuda::delta_rule_chunked_supported(sh);
    float* scratch =
        chunked ? static_cast<float*>(arena_.take(cuda::delta_rule_chunked_scratch_floats(sh) * sizeof(float)))
                : nullptr;
    submit(Key(OpId::DeltaRule) << q << k << v << g << beta << state << y, [=](cudaStream_t s) {
      if (chunked)
        cuda::gated_delta_rule_chunked(sh, q.as<const float>(), k.as<const float>(), v.as<const float>(),
                                       g.as<const float>(), beta.as<const float>(), state.as<float>(), y.as<float>(),
                                       scratch, s);
      else
        cuda::gated_delta_rule(sh, q.as<const float>(), k.as<const float>(), v.as<const float>(), g.as<const float>(),
                               beta.as<const float>(), state.as<float>(), y.as<float>(), s);
    });
  }

  void kv_store(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                const Tensor& pos) override {
    const int64_t row = k.ne[0] * k.ne[1], n = k.ne[2];
    check(k_cache.ne[0] * k_cache.ne[1] == row && v.n_elements() == k.n_elements() && pos.ne[0] == n, "kv_store",
          "shape");
    check(k_cache.type == DType::F16 && v_cache.type == DType::F16, "kv_store", "the caches are F16");
    submit(Key(OpId::KvStore) << k << v << k_cache << v_cache << pos, [=](cudaStream_t s) {
      cuda::kv_store(k.as<const float>(), v.as<const float>(), k_cache.as<uint16_t>(), v_cache.as<uint16_t>(),
                     pos.as<const int32_t>(), row, n, k_cache.ne[2], s);
    });
  }
  void attention(const Tensor& q, std::span<const Tensor> k_caches, std::span<const Tensor> v_caches,
                 const Tensor& pos, float scale, int window, const Tensor* sinks, const Tensor& y) override {
    check(!sinks || (sinks->type == DType::F32 && sinks->n_elements() == q.ne[1]), "attention", "sinks shape");
    enqueue_attention(OpId::Attention, q, k_caches, v_caches, pos, scale, window, nullptr, sinks, y);
  }

  void moe_route(const Tensor& logits, int k, bool renormalize, const Tensor& ids, const Tensor& weights) override {
    const int64_t E = logits.ne[0], n = logits.rows();
    check(k > 0 && k <= E && ids.ne[0] == k && weights.ne[0] == k && ids.rows() == n, "moe_route", "shape");
    submit(Key(OpId::MoeRoute) << logits << int64_t{k} << int64_t{renormalize} << ids << weights,
           [=](cudaStream_t s) {
             cuda::moe_route(logits.as<const float>(), E, n, k, renormalize, ids.as<int32_t>(), weights.as<float>(),
                             s);
           });
  }
  void moe_ffn(const Tensor& x, const ExpertWeights& ex, const Tensor& ids, const Tensor& weights,
               const Tensor& y) override {
    const int64_t d = x.ne[0], n = x.rows(), k = ids.ne[0], E = ex.gate.ne[2], ff = ex.down.ne[0];
    check_experts(ex, d, "moe_ffn");
    check(ids.rows() == n && y.ne[0] == d && y.rows() == n, "moe_ffn", "ids/y shape");
    const Key key = experts_key(Key(OpId::MoeFfn) << x << ids << weights << y, ex);
    if (n > cuda::kExpertDecodeMaxTokens) {  // batches: experts as grouped tensor-core products
      void* scratch = arena_.take(cuda::moe_grouped_scratch_bytes(d, ff, n, k, E));
      submit(key,
             [=](cudaStream_t s) { cuda::moe_ffn_grouped(x, ex, ids, weights, y, scratch, nullptr, nullptr, s); });
      return;
    }
    float* act = static_cast<float*>(arena_.take(cuda::moe_ffn_scratch_floats(ff, n, k) * sizeof(float)));
    submit(key, [=](cudaStream_t s) { cuda::moe_ffn(x, ex, ids, weights, y, act, s); });
  }

  void argmax(const Tensor& logits, const Tensor& ids) override {
    check_f32(logits, "argmax");
    check(ids.type == DType::I32 && ids.n_elements() == logits.rows(), "argmax", "ids shape");
    float* partials =
        static_cast<float*>(arena_.take(cuda::argmax_partials(logits.ne[0], logits.rows()) * sizeof(float)));
    submit(Key(OpId::Argmax) << logits << ids, [=](cudaStream_t s) {
      cuda::argmax(logits.as<const float>(), logits.ne[0], logits.rows(), ids.as<int32_t>(), partials, s);
    });
  }
  // The ids are on the device, so their range is not checked here: the caller's to keep.
  void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& out) override {
    check_f32(logits, "token_logprobs");
    const int64_t n = logits.rows(), m = n > 0 ? ids.n_elements() / n : 0;
    check(ids.type == DType::I32 && ids.ne[0] == n && ids.n_elements() == n * m && out.type == DType::F32 &&
              out.n_elements() == n * m,
          "token_logprobs", "ids and out must be {n, m}");
    submit(Key(OpId::TokenLogprobs) << logits << ids << out, [=](cudaStream_t s) {
      cuda::token_logprobs(logits.as<const float>(), logits.ne[0], n, ids.as<const int32_t>(), static_cast<int>(m),
                           out.as<float>(), s);
    });
  }
  // The rows' parameters are on the device (written just before the pass), so their
  // top-k is not checked here: the kernel clamps it to [1, min(kMaxRowTopK, V)].
  void sample_rows(const Tensor& logits, const Tensor& params, const Tensor& ids) override {
    check_f32(logits, "sample_rows");
    check(params.type == DType::I32 && params.ne[0] == kRowSamplingWords && params.rows() >= logits.rows(),
          "sample_rows",
          "params shape");
    check(ids.type == DType::I32 && ids.n_elements() == logits.rows(), "sample_rows", "ids shape");
    const size_t n = cuda::sample_rows_partials(logits.ne[0], logits.rows());
    auto* partials = static_cast<uint64_t*>(arena_.take(n * sizeof(uint64_t)));
    submit(Key(OpId::SampleRows) << logits << params << ids, [=](cudaStream_t s) {
      cuda::sample_rows(logits.as<float>(), logits.ne[0], logits.rows(), params.as<const RowSampling>(),
                        ids.as<int32_t>(), partials, s);
    });
  }

  // ---- fused ops (decode kernels in matvec.cu, gdn_decode.cu, gdn_core.cu, moe.cu) ------
  // matmul_many's operands (x F32, one F32 output {rows, n} per weight of x's row length),
  // checked and appended to key.
  static void check_and_key_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y,
                                 const char* op, Key& key) {
    check(w.size() == y.size(), op, "one output per weight");
    check_f32(x, op);
    for (size_t i = 0; i < w.size(); ++i) {
      check_f32(y[i], op);
      check(x.ne[0] == w[i].ne[0] && w[i].ne[0] % 8 == 0, op, "x row length differs from a weight's");
      check(y[i].ne[0] == w[i].rows() && y[i].rows() == x.rows(), op, "y shape mismatch");
      key << w[i] << y[i];
    }
  }
  void matmul_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y) override {
    Key key(OpId::MatmulMany);
    key << x;
    check_and_key_many(w, x, y, "matmul_many", key);
    const bool batch = cuda::matmul_batched_takes(w, x.rows());
    void* xb = batch ? arena_.take(cuda::matmul_batched_scratch_bytes(w, x)) : nullptr;
    submit(key, [=, dense = dense_.get(), ws = std::vector<Tensor>(w.begin(), w.end()),
                 ys = std::vector<Tensor>(y.begin(), y.end())](
                    cudaStream_t s) {
      if (batch) cuda::matmul_batched(ws, x, ys, xb, *dense, s);
      else cuda::matvec_many(ws, x, ys, s);
    });
  }

  void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor* b_bias, const Tensor* b_norm, const Tensor& w,
                    float eps, const Tensor& sum, const Tensor& y) override {
    check_f32(a, "add_rms_norm");
    check(b.n_elements() == a.n_elements() && sum.n_elements() == a.n_elements() && y.n_elements() == a.n_elements(),
          "add_rms_norm", "shapes differ");
    check(w.ne[0] == a.ne[0] && w.type == DType::F32, "add_rms_norm", "weight shape/type");
    for (const Tensor* t : {b_bias, b_norm})
      check(!t || (t->ne[0] == a.ne[0] && t->n_elements() == a.ne[0] && t->type == DType::F32), "add_rms_norm",
            "b_bias / b_norm shape/type");
    const float* bb = floats_or_null(b_bias);
    const float* bw = floats_or_null(b_norm);
    submit(Key(OpId::AddRmsNorm) << a << b << b_bias << b_norm << w << eps << sum << y, [=](cudaStream_t s) {
      cuda::add_rms_norm(a.as<const float>(), b.as<const float>(), bb, bw, w.as<const float>(), eps, sum.as<float>(),
                         y.as<float>(), a.ne[0], a.rows(), s);
    });
  }

  void add_rms_norm_matmul_many(const Tensor& a, const Tensor& b, const Tensor& norm_w, float eps, const Tensor& sum,
                                const Tensor& h, std::span<const Tensor> w, std::span<const Tensor> y) override {
    if (!cuda::matvec_norm_takes(w, a)) {
      add_rms_norm(a, b, nullptr, nullptr, norm_w, eps, sum, h);
      matmul_many(w, h, y);
      return;
    }
    check(b.n_elements() == a.n_elements() && sum.n_elements() == a.n_elements() && h.n_elements() == a.n_elements(),
          "add_rms_norm_matmul_many", "shapes differ");
    check(norm_w.ne[0] == a.ne[0] && norm_w.type == DType::F32, "add_rms_norm_matmul_many", "norm weight shape/type");
    check(sum.data != a.data && sum.data != b.data, "add_rms_norm_matmul_many", "sum aliases an input");
    Key key(OpId::AddRmsNormMatmulMany);
    key << a << b << norm_w << eps << sum << h;
    check_and_key_many(w, a, y, "add_rms_norm_matmul_many", key);
    submit(key, [=, ws = std::vector<Tensor>(w.begin(), w.end()), ys = std::vector<Tensor>(y.begin(), y.end())](
                    cudaStream_t s) { cuda::add_rms_norm_matvec_many(a, b, norm_w, eps, sum, h, ws, ys, s); });
  }

  void gdn_prepare(const Tensor& qkv, const Tensor& conv_w, const Tensor& conv_state, const Tensor& a,
                   const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, float l2_eps, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta) override {
    const cuda::GdnPrepareShape sh{qkv.rows(), v.ne[1], q.ne[1], q.ne[0], v.ne[0], conv_w.ne[0]};
    const int64_t C = qkv.ne[0], n = sh.n_tokens, qk = sh.n_k_heads * sh.dk;
    check(C == 2 * qk + sh.n_heads * sh.dv && k.n_elements() == q.n_elements() && q.ne[2] == n && v.ne[2] == n,
          "gdn_prepare", "q/k/v shape");
    check(conv_w.ne[1] == C && conv_w.type == DType::F32 && conv_state.ne[0] == C &&
              conv_state.ne[1] == sh.conv_kernel - 1,
          "gdn_prepare", "conv weight/state shape");
    check(a.ne[0] == sh.n_heads && a.rows() == n && b.n_elements() == a.n_elements() &&
              g.n_elements() == a.n_elements() && beta.n_elements() == a.n_elements() && dt_bias.ne[0] == sh.n_heads &&
              a_neg.ne[0] == sh.n_heads,
          "gdn_prepare", "gate shapes");
    // Longer batches (prefill) run the standalone kernels over a conv buffer.
    float* conv = n > cuda::kGdnPrepareMaxTokens ? static_cast<float*>(arena_.take(C * n * sizeof(float))) : nullptr;
    submit(Key(OpId::GdnPrepare) << qkv << conv_w << conv_state << a << b << dt_bias << a_neg << l2_eps << q << k << v
                                 << g << beta,
           [=](cudaStream_t s) {
             if (!conv) {
               cuda::gdn_prepare(sh, qkv.as<const float>(), conv_w.as<const float>(), conv_state.as<float>(),
                                 a.as<const float>(), b.as<const float>(), dt_bias.as<const float>(),
                                 a_neg.as<const float>(), l2_eps, q.as<float>(), k.as<float>(), v.as<float>(),
                                 g.as<float>(), beta.as<float>(), s);
               return;
             }
             cuda::causal_conv_silu(qkv.as<const float>(), conv_w.as<const float>(), conv_state.as<float>(), conv, C,
                                    n, sh.conv_kernel, s);
             cuda::slice_cols(conv, q.as<float>(), C, 0, qk, n, s);
             cuda::slice_cols(conv, k.as<float>(), C, qk, qk, n, s);
             cuda::slice_cols(conv, v.as<float>(), C, 2 * qk, sh.n_heads * sh.dv, n, s);
             cuda::row_norm(cuda::NormKind::L2, q.as<const float>(), nullptr, nullptr, l2_eps, q.as<float>(), sh.dk,
                            sh.n_k_heads * n, s);
             cuda::row_norm(cuda::NormKind::L2, k.as<const float>(), nullptr, nullptr, l2_eps, k.as<float>(), sh.dk,
                            sh.n_k_heads * n, s);
             cuda::gdn_gates(a.as<const float>(), b.as<const float>(), dt_bias.as<const float>(),
                             a_neg.as<const float>(), g.as<float>(), beta.as<float>(), sh.n_heads, a.n_elements(), s);
           });
  }

  void gated_delta_net_core(const Tensor& qkv, const Tensor& conv_w, std::span<const Tensor> conv_states,
                            const Tensor& a, const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, float l2_eps,
                            std::span<const Tensor> states, const Tensor& z, const Tensor& norm_w, float norm_eps,
                            const Tensor& y) override {
    const int64_t n = qkv.rows(), C = qkv.ne[0], dv = y.ne[0], H = y.ne[1];
    check(one_or_per_token(conv_states, states, n), "gated_delta_net_core", "one state, or one per token");
    const int64_t dk = states[0].ne[1], Hk = dk > 0 ? (C - H * dv) / (2 * dk) : 0;
    check(Hk > 0 && C == 2 * Hk * dk + H * dv && y.ne[2] == n && z.n_elements() == y.n_elements(),
          "gated_delta_net_core", "qkv/z/y shape");
    for (const Tensor& st : states)
      check(st.ne[0] == dv && st.ne[1] == dk && st.ne[2] == H && st.type == DType::F32, "gated_delta_net_core",
            "state shape");
    const int n_seqs = static_cast<int>(states.size());
    const cuda::GdnCoreShape sh{n, H, Hk, dk, dv, conv_w.ne[0]};
    cuda::GdnCoreShape per_block = sh;
    if (n_seqs > 1) per_block.n_tokens = 1;
    if (!cuda::gdn_core_supported(per_block)) {
      // Prefill and other shapes: the composition, a sequence at a time.
      for (int i = 0; i < n_seqs; ++i) {
        const SeqSlice tok{n_seqs, i, 1};
        const int64_t m = n_seqs == 1 ? n : 1;
        const Tensor q = scratch(DType::F32, {dk, Hk, m}), k = scratch(DType::F32, {dk, Hk, m});
        const Tensor v = scratch(DType::F32, {dv, H, m}), g = scratch(DType::F32, {H, m});
        const Tensor beta = scratch(DType::F32, {H, m});
        const Tensor yi = tok(y, 2);
        gdn_prepare(tok(qkv, 1), conv_w, conv_states[i], tok(a, 1), tok(b, 1), dt_bias, a_neg, l2_eps, q, k, v, g,
                    beta);
        gated_delta_rule(q, k, v, g, beta, states[i], yi);
        rms_norm_gated(yi, norm_w, tok(z, 2), norm_eps, yi);
      }
      return;
    }
    for (const Tensor& cs : conv_states)
      check(cs.ne[0] == C && cs.ne[1] == sh.conv_kernel - 1 && cs.type == DType::F32, "gated_delta_net_core",
            "conv state shape");
    check(conv_w.ne[1] == C && conv_w.type == DType::F32, "gated_delta_net_core", "conv weight shape");
    check(a.ne[0] == H && a.rows() == n && b.n_elements() == a.n_elements() && dt_bias.ne[0] == H &&
              a_neg.ne[0] == H && norm_w.ne[0] == dv && norm_w.type == DType::F32,
          "gated_delta_net_core", "gate/norm shapes");
    by_launch(n_seqs, cuda::kGdnCoreMaxSeqs, [&](const SeqSlice& tok) {
      const int first = tok.first, m = tok.count;
      const Tensor qkv_i = tok(qkv, 1), a_i = tok(a, 1), b_i = tok(b, 1), z_i = tok(z, 2), y_i = tok(y, 2);
      cuda::GdnCoreShape sh_i = sh;
      if (n_seqs > 1) sh_i.n_tokens = m;
      Key key(OpId::GdnCore);
      key << qkv_i << conv_w << a_i << b_i << dt_bias << a_neg << l2_eps << z_i << norm_w << norm_eps << y_i;
      const std::vector<float*> conv_ptrs = pointers<float>(conv_states, first, m, key);
      const std::vector<float*> state_ptrs = pointers<float>(states, first, m, key);
      submit(key, [=](cudaStream_t s) {
        cuda::gdn_core(sh_i, qkv_i.as<const float>(), conv_w.as<const float>(), conv_ptrs.data(),
                       a_i.as<const float>(), b_i.as<const float>(), dt_bias.as<const float>(),
                       a_neg.as<const float>(), l2_eps, state_ptrs.data(), m, z_i.as<const float>(),
                       norm_w.as<const float>(), norm_eps, y_i.as<float>(), s);
      });
    });
  }

  void attention_prepare(const Tensor& qp, const Tensor& k, const Tensor& v, const QkvBias& bias,
                         const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& pos,
                         const RopeParams& rp, const Tensor& q, const Tensor* gate, std::span<const Tensor> k_caches,
                         std::span<const Tensor> v_caches) override {
    const int n_seqs = check_caches(k_caches, v_caches, q.ne[2], "attention_prepare");
    const cuda::AttentionShape sh{q.ne[0], q.ne[1], k.ne[1], q.ne[2], k_caches[0].ne[2]};
    check_f32(qp, "attention_prepare");
    check(qp.n_elements() == (gate ? 2 : 1) * q.n_elements() && (!gate || gate->n_elements() == q.n_elements()) &&
              k.ne[0] == sh.head_dim && k.ne[2] == sh.n_tokens && v.n_elements() == k.n_elements() &&
              pos.ne[0] == sh.n_tokens,
          "attention_prepare", "q/gate/k/v shape");
    for (const Tensor* w : {q_norm, k_norm})
      check(!w || (w->ne[0] == sh.head_dim && w->type == DType::F32), "attention_prepare", "norm weight shape/type");
    check(!bias.q || (bias.q->n_elements() == qp.ne[0] * qp.ne[1] && bias.q->type == DType::F32), "attention_prepare",
          "q bias shape/type");
    for (const Tensor* b : {bias.k, bias.v})
      check(!b || (b->n_elements() == k.ne[0] * k.ne[1] && b->type == DType::F32), "attention_prepare",
            "k/v bias shape/type");
    const cuda::QkvBias biases{floats_or_null(bias.q), floats_or_null(bias.k), floats_or_null(bias.v)};
    check(rp.n_rot % 2 == 0 && rp.n_rot <= sh.head_dim && (!rp.freq_factors || rp.freq_factors->ne[0] == rp.n_rot / 2),
          "attention_prepare", "rope shape");
    // Pointers resolved now: the Tensor* arguments may not outlive a deferred launch.
    const cuda::RopeArgs args{rp.n_rot, rp.theta, rp.freq_scale, rp.neox,
                              floats_or_null(rp.freq_factors)};
    const float* qn = floats_or_null(q_norm);
    const float* kn = floats_or_null(k_norm);
    by_launch(n_seqs, cuda::kAttentionMaxSeqs, [&](const SeqSlice& tok) {
      const int first = tok.first, m = tok.count;
      const Tensor qp_i = tok(qp, 2), k_i = tok(k, 2), v_i = tok(v, 2), q_i = tok(q, 2), pos_i = tok(pos, 0);
      const Tensor gate_i = gate ? tok(*gate, 2) : Tensor{};
      float* g = gate ? gate_i.as<float>() : nullptr;
      cuda::AttentionShape sh_i = sh;
      if (n_seqs > 1) sh_i.n_tokens = m;
      Key key(OpId::AttentionPrepare);
      key << qp_i << k_i << v_i << bias.q << bias.k << bias.v << q_norm << k_norm << eps << pos_i << int64_t{rp.n_rot}
          << rp.theta
          << int64_t{rp.neox} << rp.freq_scale << rp.freq_factors << q_i << (gate ? &gate_i : nullptr);
      const std::vector<uint16_t*> kcs = pointers<uint16_t>(k_caches, first, m, key);
      const std::vector<uint16_t*> vcs = pointers<uint16_t>(v_caches, first, m, key);
      submit(key, [=](cudaStream_t s) {
        cuda::attention_prepare(sh_i, qp_i.as<const float>(), k_i.as<const float>(), v_i.as<const float>(), biases,
                                qn, kn, eps, pos_i.as<const int32_t>(), args, q_i.as<float>(), g, kcs.data(),
                                vcs.data(), static_cast<int>(kcs.size()), s);
      });
    });
  }

  // One sequence's caches (F16 {D, Hkv, n_ctx}), or one per token, all of one shape;
  // returns how many.
  int check_caches(std::span<const Tensor> k_caches, std::span<const Tensor> v_caches, int64_t n, const char* op) {
    check(one_or_per_token(k_caches, v_caches, n), op, "one sequence's caches, or one per token");
    for (size_t i = 0; i < k_caches.size(); ++i)
      check(k_caches[i].type == DType::F16 && v_caches[i].type == DType::F16 &&
                k_caches[i].ne == k_caches[0].ne && v_caches[i].ne == k_caches[0].ne,
            op, "the caches are F16 {D, Hkv, n_ctx}, all of one shape");
    return static_cast<int>(k_caches.size());
  }
  // Sequences [first, first + count) of a call over n_seqs one-token sequences: a
  // tensor's slice along its token dimension (one sequence's tokens: the whole tensor).
  struct SeqSlice {
    int n_seqs, first, count;
    Tensor operator()(const Tensor& t, int dim) const { return n_seqs == 1 ? t : t.slice(dim, first, count); }
  };
  // A call over several one-token sequences runs as launches of at most `max` of them
  // (their states' pointers ride in the kernel's parameters): f(SeqSlice) each; one
  // sequence's tokens: one launch.
  template <class F>
  static void by_launch(int n_seqs, int max, F&& f) {
    const int per_launch = n_seqs == 1 ? 1 : max;
    for (int first = 0; first < n_seqs; first += per_launch)
      f(SeqSlice{n_seqs, first, std::min(per_launch, n_seqs - first)});
  }
  // The data of tensors [first, first + m) (one launch's sequences' states), each also
  // added to the launch's key.
  template <class T>
  static std::vector<T*> pointers(std::span<const Tensor> ts, int first, int m, Key& key) {
    std::vector<T*> out;
    for (int i = first; i < first + m; ++i) {
      key << ts[i];
      out.push_back(ts[i].as<T>());
    }
    return out;
  }

  void attention_gated(const Tensor& q, std::span<const Tensor> k_caches, std::span<const Tensor> v_caches,
                       const Tensor& pos, float scale, int window, const Tensor& gate, const Tensor& y) override {
    check(gate.n_elements() == y.n_elements() && gate.type == DType::F32, "attention_gated", "gate shape");
    enqueue_attention(OpId::AttentionGated, q, k_caches, v_caches, pos, scale, window, &gate, nullptr, y);
  }

  void shared_expert_add(const Tensor& g, const Tensor& u, const Tensor& down, const Tensor* gate_logit,
                         const Tensor& y) override {
    const int64_t n = g.rows(), d = down.rows();
    check_shared({g, u, down, gate_logit}, d, n, "shared_expert_add");
    check(y.ne[0] == d && y.rows() == n, "shared_expert_add", "y shape");
    const float* gl = floats_or_null(gate_logit);
    // Longer batches: the batched down projection, then the gate and add.
    const bool fused = n <= cuda::kExpertDecodeMaxTokens;
    const SharedDownBatch batch = fused ? SharedDownBatch{} : shared_down_batch(down, n);
    submit(Key(OpId::SharedExpertAdd) << g << u << down << gate_logit << y, [=, dense = dense_.get()](cudaStream_t s) {
      if (fused) {
        cuda::shared_expert_add(g, u, down, gl, y, false, nullptr, 0, s);
        return;
      }
      batch.enqueue(g, u, down, *dense, s);
      float* out = batch.out.as<float>();
      if (gl) cuda::mul_sigmoid(out, gl, out, d * n, d, true, s);
      cuda::add(y.as<const float>(), out, y.as<float>(), d * n, d * n, s);
    });
  }

  void moe_block(const Tensor& x, const Tensor& logits, int k, bool renormalize, const ExpertWeights& ex,
                 const SharedExpert* shared, const Tensor& y) override {
    const int64_t n = x.rows();
    if (n > cuda::kExpertDecodeMaxTokens) {  // batches: routing, the shared expert, the grouped experts
      const Tensor ids = scratch(DType::I32, {k, n}), weights = scratch(DType::F32, {k, n});
      moe_route(logits, k, renormalize, ids, weights);
      if (shared) moe_grouped_with_shared(x, ex, ids, weights, *shared, y);
      else moe_ffn(x, ex, ids, weights, y);
      return;
    }
    const int64_t d = x.ne[0], E = ex.gate.ne[2], ff = ex.down.ne[0];
    check_f32(logits, "moe_block");
    check(logits.ne[0] == E && logits.rows() == n && k > 0 && k <= E, "moe_block", "logits shape");
    check_experts(ex, d, "moe_block");
    check(y.ne[0] == d && y.rows() == n, "moe_block", "y shape");
    if (shared) check_shared(*shared, d, n, "moe_block");
    float* act = static_cast<float*>(arena_.take(cuda::moe_ffn_scratch_floats(ff, n, k) * sizeof(float)));
    // The routed experts' parts (moe_down_part): the shared expert's add sums them, or
    // without one, moe_ffn_routed's own launch.
    const cuda::ExpertParts parts{static_cast<float*>(arena_.take(static_cast<size_t>(d * n * k) * sizeof(float))),
                                  static_cast<float*>(arena_.take(static_cast<size_t>(n * k) * sizeof(float))),
                                  n == 1 && k <= cuda::kMaxRouted ? route_words_ : nullptr};
    Key key = experts_key(Key(OpId::MoeBlock) << x << logits << int64_t{k} << int64_t{renormalize} << y, ex);
    if (shared) key << shared->g << shared->u << shared->down << shared->gate_logit;
    SharedExpert se;  // its gate logit goes as `gl`
    if (shared) se = {shared->g, shared->u, shared->down, nullptr};
    const float* gl = floats_or_null(shared ? shared->gate_logit : nullptr);
    int32_t* ids = nullptr;  // moe_ffn_routed's routing from kRouteOnceMinTokens
    float* weights = nullptr;
    if (n >= cuda::kRouteOnceMinTokens) {
      ids = static_cast<int32_t*>(arena_.take(static_cast<size_t>(n * k) * sizeof(int32_t)));
      weights = static_cast<float*>(arena_.take(static_cast<size_t>(n * k) * sizeof(float)));
    }
    submit(key, [=](cudaStream_t s) {
      const bool with_shared = !se.down.empty();
      try {
        cuda::moe_ffn_routed(x, logits, k, renormalize, ex, y, act, &parts, !with_shared, ids, weights, s);
        if (with_shared) cuda::shared_expert_add(se.g, se.u, se.down, gl, y, true, &parts, k, s);
      } catch (...) {
        // gate_up may have published picks that no add will set back; the next layer's
        // down_part would read them.
        if (parts.route) (void)unpublish_picks(parts.route, s);  // the error to report is the first
        throw;
      }
    });
  }

 private:
  // moe_block's batches with a shared expert: its SwiGLU and down projection first, then
  // the grouped experts, whose combine adds its gated output (two launches fewer than
  // a gate and an add after the combine).
  void moe_grouped_with_shared(const Tensor& x, const ExpertWeights& ex, const Tensor& ids, const Tensor& weights,
                               const SharedExpert& shared, const Tensor& y) {
    const int64_t d = x.ne[0], n = x.rows(), k = ids.ne[0], E = ex.gate.ne[2], ff = ex.down.ne[0];
    check_experts(ex, d, "moe_block");
    check_shared(shared, d, n, "moe_block");
    check(y.ne[0] == d && y.rows() == n, "moe_block", "y shape");
    const Tensor down = shared.down, g = shared.g, u = shared.u;
    const SharedDownBatch batch = shared_down_batch(down, n);
    void* scratch = arena_.take(cuda::moe_grouped_scratch_bytes(d, ff, n, k, E));
    const float* gl = floats_or_null(shared.gate_logit);
    Key key = experts_key(Key(OpId::MoeBlock) << x << ids << weights << y, ex);
    key << g << u << down << shared.gate_logit;
    submit(key, [=, dense = dense_.get()](cudaStream_t s) {
      batch.enqueue(g, u, down, *dense, s);
      cuda::moe_ffn_grouped(x, ex, ids, weights, y, scratch, batch.out.as<const float>(), gl, s);
    });
  }

  // A shared expert for n tokens of d (shared_expert_add, moe_block).
  static void check_shared(const SharedExpert& se, int64_t d, int64_t n, const char* op) {
    const int64_t ff = se.g.ne[0];
    check_f32(se.g, op);
    check(se.g.rows() == n && se.u.n_elements() == se.g.n_elements() && se.down.ne[0] == ff && ff % 32 == 0 &&
              se.down.rows() == d,
          op, "shared expert shape");
    check(!se.gate_logit || (se.gate_logit->n_elements() == n && se.gate_logit->type == DType::F32), op,
          "shared gate shape");
  }
  // A batch's shared expert without its gate, down(silu(g) · u), into `out` {d, n}, and
  // the scratch that takes (taken when the op is enqueued, for deterministic addresses).
  struct SharedDownBatch {
    Tensor act, out;
    void* scratch = nullptr;
    void enqueue(const Tensor& g, const Tensor& u, const Tensor& down, const cuda::DenseGemm& dense,
                 cudaStream_t s) const {
      cuda::swiglu(g.as<const float>(), u.as<const float>(), act.as<float>(), act.n_elements(), s);
      cuda::matmul_batched({&down, 1}, act, {&out, 1}, scratch, dense, s);
    }
  };
  SharedDownBatch shared_down_batch(const Tensor& down, int64_t n) {
    const int64_t ff = down.ne[0], d = down.rows();
    SharedDownBatch b;
    b.act = Tensor::make(DType::F32, {ff, n}, arena_.take(ff * n * sizeof(float)));
    b.out = Tensor::make(DType::F32, {d, n}, arena_.take(d * n * sizeof(float)));
    b.scratch = arena_.take(cuda::matmul_batched_scratch_bytes({&down, 1}, b.act));
    return b;
  }

  // The routed experts of moe_ffn / moe_block for inputs of d.
  static void check_experts(const ExpertWeights& ex, int64_t d, const char* op) {
    check(experts_fit(ex, d) && d % 8 == 0 && ex.down.ne[0] % 8 == 0, op, "expert shapes");
  }
  static Key experts_key(Key key, const ExpertWeights& ex) {
    key << ex.gate << ex.up << ex.down << ex.gate_bias << ex.up_bias << ex.down_bias << ex.alpha << ex.clamp;
    return key;
  }

  // Every route word back to cuda::kNoPick (each byte 0xff), in stream order.
  static cudaError_t unpublish_picks(unsigned long long* words, cudaStream_t s) {
    return cudaMemsetAsync(words, 0xff, kRouteWordsBytes, s);
  }

  void* device_alloc(size_t bytes) {
    // Whole 16-byte units: the expert kernels copy rows as the 16-byte chunks covering them.
    void* p = device_malloc(std::max<size_t>((bytes + 15) / 16 * 16, 256),
                            "the model and the requested context do not fit (try a smaller --ctx)");
    allocations_.push_back(p);
    return p;
  }

  // attention / attention_gated (gate null or {D, Hq, n}; sinks null or {Hq}).
  void enqueue_attention(OpId op, const Tensor& q, std::span<const Tensor> k_caches,
                         std::span<const Tensor> v_caches, const Tensor& pos, float scale, int window,
                         const Tensor* gate, const Tensor* sinks, const Tensor& y) {
    const float* sk = floats_or_null(sinks);
    const int n_seqs = check_caches(k_caches, v_caches, q.ne[2], "attention");
    const cuda::AttentionShape sh{q.ne[0], q.ne[1], k_caches[0].ne[1], q.ne[2], k_caches[0].ne[2]};
    check(k_caches[0].ne[0] == sh.head_dim && sh.n_head % sh.n_head_kv == 0 && pos.ne[0] == sh.n_tokens, "attention",
          "shape");
    check(y.n_elements() == q.n_elements(), "attention", "y shape");
    check(window >= 0, "attention", "negative window");
    if (n_seqs == 1 && cuda::attention_prefill_supported(sh)) {
      const Tensor &k_cache = k_caches[0], &v_cache = v_caches[0];
      const float* g = floats_or_null(gate);
      submit(Key(op) << q << k_cache << v_cache << pos << scale << int64_t{window} << gate << sinks << y,
             [=](cudaStream_t s) {
               cuda::attention_prefill(sh, q.as<const float>(), k_cache.as<const uint16_t>(),
                                       v_cache.as<const uint16_t>(), pos.as<const int32_t>(), scale, window, g, sk,
                                       y.as<float>(), s);
             });
      return;
    }
    check(cuda::attention_split_supported(sh), "attention", "head_dim must be 32, 64, 128 or 256");
    by_launch(n_seqs, cuda::kAttentionMaxSeqs, [&](const SeqSlice& tok) {
      const int first = tok.first, m = tok.count;
      const Tensor q_i = tok(q, 2), y_i = tok(y, 2), pos_i = tok(pos, 0);
      const Tensor gate_i = gate ? tok(*gate, 2) : Tensor{};
      const float* g = gate ? gate_i.as<const float>() : nullptr;
      cuda::AttentionShape sh_i = sh;
      if (n_seqs > 1) sh_i.n_tokens = m;
      float* partials = static_cast<float*>(arena_.take(cuda::attention_partials_floats(sh_i) * sizeof(float)));
      Key key(op);
      key << q_i << pos_i << scale << int64_t{window} << (gate ? &gate_i : nullptr) << sinks << y_i;
      const std::vector<const uint16_t*> kcs = pointers<const uint16_t>(k_caches, first, m, key);
      const std::vector<const uint16_t*> vcs = pointers<const uint16_t>(v_caches, first, m, key);
      submit(key, [=](cudaStream_t s) {
        cuda::attention(sh_i, q_i.as<const float>(), kcs.data(), vcs.data(), static_cast<int>(kcs.size()),
                        pos_i.as<const int32_t>(), scale, window, g, sk, partials, y_i.as<float>(), s);
      });
    });
  }

  // ---- graph replay (graph_replay.h) --------------------------------------------------
  void submit(const Key& key, Launch launch) {
    if (replay_->defer(key, launch)) return;
    if (profiler_) profiler_->run(op_name(key.words()[0]), key.words(), launch, stream_);
    else launch(stream_);
  }
  void finish_segment() { replay_->finish_segment(); }
  bool in_host_alloc(const void* p) const {
    const char* c = static_cast<const char*>(p);
    auto it = host_allocs_.upper_bound(c);
    return it != host_allocs_.begin() && c < std::prev(it)->first + std::prev(it)->second;
  }

  static constexpr size_t kStagingBytes = size_t{32} << 20;
  struct Staging {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
  };

  // Small copies between host and device through pinned slots, so that they
  // neither wait for the stream nor make it wait (write, read_async).
  static constexpr size_t kSmallBytes = 4096;
  struct SmallCopy {
    void* host = nullptr;
    void* device = nullptr;  // the device's view of host (the copies are kernels: cuda::small_copy)
    cudaEvent_t done = nullptr;
    void* dst = nullptr;  // reads: where wait_read delivers
    size_t bytes = 0;
    uint64_t ticket = 0;  // reads: undelivered ticket, or 0
  };
  std::array<SmallCopy, 8> small_writes_, small_reads_;
  uint64_t next_write_ = 0, next_read_ = 0;

  const std::unique_ptr<cuda::OpProfiler> profiler_;  // with CudaOptions::profile
  cudaStream_t stream_ = nullptr;
  Staging staging_[2];
  std::vector<void*> allocations_;  // weights and persistent tensors
  std::map<const char*, size_t> host_allocs_;  // host_alloc's, by start
  static constexpr size_t kRouteWordsBytes = cuda::kMaxRouted * sizeof(unsigned long long);
  unsigned long long* route_words_ = nullptr;  // one token's published picks (ExpertParts::route)
  ScratchArena<cuda::DeviceChunks> arena_{cuda::DeviceChunks{&stream_}};
  std::unique_ptr<cuda::DenseGemm> dense_;

  std::unique_ptr<cuda::GraphReplay> replay_;  // on stream_
};

}  // namespace

std::vector<CudaOpTime> cuda_take_profile(Backend& backend) {
  return dynamic_cast<CudaBackend&>(backend).take_profile();
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<CudaBackend>(options);
}
std::unique_ptr<Backend> make_cuda_backend(int device) { return make_cuda_backend(CudaOptions{device, true}); }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

CudaDeviceInfo cuda_device_info(int device) {
  cudaDeviceProp prop{};
  ZINC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int clock_khz = 0, bus_bits = 0;
  ZINC_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  ZINC_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  CudaDeviceInfo info;
  info.name = prop.name;
  info.memory_bytes = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  info.peak_bandwidth_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
  return info;
}

}  // namespace zinc
