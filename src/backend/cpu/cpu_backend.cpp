// The CPU backend: the executable specification of every op in backend.h.
// Straightforward loops, f32 activations with double accumulation where sums are
// long, threads over rows/heads/tokens. Correctness first; other backends are
// tested against this one.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/delta_rule.h"
#include "backend/cpu/row_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/scratch_arena.h"
#include "gguf/gguf.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "sample/sampler.h"

namespace zinc {
namespace {

void check(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("cpu ") + op + ": " + what);
}
void check_f32(const Tensor& t, const char* op) { check(t.type == DType::F32, op, "expected an F32 tensor"); }

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float gelu_tanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Buffer = std::unique_ptr<std::byte[], AlignedFree>;

// Host chunks for the scratch arena, doubling from 1 MiB.
struct HostChunks {
  static constexpr size_t kAlign = 64;
  void* allocate(size_t bytes) { return ::operator new[](bytes, std::align_val_t{kAlign}); }
  void release(void* p) { ::operator delete[](p, std::align_val_t{kAlign}); }
  size_t chunk_size(size_t need, size_t last) { return std::max(need, last ? 2 * last : size_t{1} << 20); }
  void before_fold() {}
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads)
      : pool_(n_threads > 0 ? n_threads : std::max(1u, std::thread::hardware_concurrency())) {}

  std::string name() const override { return "cpu"; }

  Tensor upload_weight(const gguf::TensorInfo& info) override {
    Tensor t;
    t.type = info.type;
    for (size_t i = 0; i < 4; ++i) t.ne[i] = info.dim(i);
    t.data = const_cast<uint8_t*>(info.data);  // read-only by contract: ops never write weights
    return t;
  }
  Tensor alloc_persistent(DType type, std::initializer_list<int64_t> dims) override {
    Tensor t = Tensor::make(type, dims);
    persistent_.emplace_back(new (std::align_val_t{64}) std::byte[t.nbytes()]);
    t.data = persistent_.back().get();
    std::memset(t.data, 0, t.nbytes());
    return t;
  }
  Tensor scratch(DType type, std::initializer_list<int64_t> dims) override {
    Tensor t = Tensor::make(type, dims);
    t.data = arena_.take(t.nbytes());
    return t;
  }
  void scratch_reset() override { arena_.reset(); }
  ScratchMark scratch_mark() const override { return arena_.mark(); }
  void scratch_rewind(const ScratchMark& mark) override { arena_.rewind(mark); }
  size_t scratch_bytes() const override { return arena_.held_bytes(); }
  void write(const Tensor& dst, const void* host, size_t bytes, size_t offset) override {
    check(offset + bytes <= dst.nbytes(), "write", "out of bounds");
    std::memcpy(static_cast<char*>(dst.data) + offset, host, bytes);
  }
  void read(const Tensor& src, void* host, size_t bytes, size_t offset) override {
    check(offset + bytes <= src.nbytes(), "read", "out of bounds");
    std::memcpy(host, static_cast<const char*>(src.data) + offset, bytes);
  }
  void zero(const Tensor& t) override { std::memset(t.data, 0, t.nbytes()); }
  void copy(const Tensor& src, const Tensor& dst) override {
    check(src.nbytes() == dst.nbytes(), "copy", "sizes differ");
    std::memmove(dst.data, src.data, src.nbytes());
  }
  void sync() override {}

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    check_f32(out, "embed");
    const int64_t d = table.ne[0], n = ids.ne[0];
    check(out.ne[0] == d && out.rows() == n, "embed", "shape mismatch");
    const auto* id = ids.as<const int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      check(id[i] >= 0 && id[i] < table.rows(), "embed", "token id out of range");
      dequantize_row(table.type, static_cast<const char*>(table.data) + table.row_bytes() * id[i],
                     out.as<float>() + i * d, d);
    }
  }

  void matmul(const Tensor& w, const Tensor& x, const Tensor& y) override {
    check_f32(x, "matmul");
    check_f32(y, "matmul");
    const int64_t in = w.ne[0], out = w.rows(), n = x.rows();
    check(x.ne[0] == in, "matmul", "x row length differs from the weight's");
    check(y.ne[0] == out && y.rows() == n, "matmul", "y shape mismatch");
    const size_t wrow = w.row_bytes();
    const auto* xs = x.as<const float>();
    auto* ys = y.as<float>();
    // Many tokens go in tiles of kTokens, each dotted with kRows rows in turn, so that
    // the tile's x stays in cache for those rows and the rows' weights for every tile
    // (one row's pass over all of x streamed it from memory for every row). A token's
    // result does not depend on its tile: row_dot's lanes are per token.
    constexpr int64_t kTokens = 32, kRows = 64;
    pool_.parallel_for(out, 4, [&](int64_t r0, int64_t r1, int) {
      for (int64_t rb = r0; rb < r1; rb += kRows)
        for (int64_t t = 0; t < n; t += kTokens)
          for (int64_t r = rb; r < std::min(r1, rb + kRows); ++r)
            cpu::row_dot(w.type, static_cast<const char*>(w.data) + wrow * r, xs + t * in, in,
                         std::min(kTokens, n - t), in, ys + t * out + r, out);
    });
  }

  void rms_norm(const Tensor& x, const Tensor* w, float eps, const Tensor& y) override {
    check_f32(x, "rms_norm");
    const int64_t d = x.ne[0];
    check(!w || (w->ne[0] == d && w->type == DType::F32), "rms_norm", "weight shape/type");
    check(y.n_elements() == x.n_elements(), "rms_norm", "y shape");
    const float* wp = w ? w->as<const float>() : nullptr;
    pool_.parallel_for(x.rows(), 16, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x.as<const float>() + r * d;
        float* yr = y.as<float>() + r * d;
        const float inv = static_cast<float>(1.0 / std::sqrt(cpu::lane_dot(xr, xr, d) / d + eps));
        for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * (wp ? wp[i] : 1.0f);
      }
    });
  }

  void l2_norm(const Tensor& x, float eps, const Tensor& y) override {
    check_f32(x, "l2_norm");
    const int64_t d = x.ne[0];
    check(y.n_elements() == x.n_elements(), "l2_norm", "y shape");
    for (int64_t r = 0; r < x.rows(); ++r) {
      const float* xr = x.as<const float>() + r * d;
      float* yr = y.as<float>() + r * d;
      const float inv = static_cast<float>(1.0 / std::sqrt(cpu::lane_dot(xr, xr, d) + eps));
      for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv;
    }
  }

  void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& y) override {
    rms_norm(x, &w, eps, y);
    check(z.n_elements() == x.n_elements(), "rms_norm_gated", "z shape");
    const auto* zs = z.as<const float>();
    auto* ys = y.as<float>();
    for (int64_t i = 0; i < y.n_elements(); ++i) ys[i] *= silu(zs[i]);
  }

  void rope(const Tensor& x, const Tensor& pos, const RopeParams& rp) override {
    check_f32(x, "rope");
    const int64_t hd = x.ne[0], heads = x.ne[1], n = x.ne[2];
    check(rp.n_rot % 2 == 0 && rp.n_rot <= hd && pos.ne[0] == n, "rope", "shape");
    const int half = rp.n_rot / 2;
    check(!rp.freq_factors || rp.freq_factors->ne[0] == half, "rope", "freq_factors shape");
    std::vector<float> inv_freq(half);
    for (int j = 0; j < half; ++j) {
      double f = std::pow(static_cast<double>(rp.theta), -2.0 * j / rp.n_rot) * rp.freq_scale;
      if (rp.freq_factors) f /= rp.freq_factors->as<const float>()[j];
      inv_freq[j] = static_cast<float>(f);
    }
    const auto* p = pos.as<const int32_t>();
    for (int64_t t = 0; t < n; ++t)
      for (int j = 0; j < half; ++j) {
        // f32 angle, as the reference implementations compute position · inv_freq.
        const float ang = static_cast<float>(p[t]) * inv_freq[j];
        const float c = std::cos(ang), s = std::sin(ang);
        const int64_t i0 = rp.neox ? j : 2 * j, i1 = rp.neox ? j + half : 2 * j + 1;
        for (int64_t h = 0; h < heads; ++h) {
          float* xh = x.as<float>() + (t * heads + h) * hd;
          const float a = xh[i0], b = xh[i1];
          xh[i0] = a * c - b * s;
          xh[i1] = a * s + b * c;
        }
      }
  }

  void add(const Tensor& a, const Tensor& b, const Tensor& y) override {
    const bool bias = b.n_elements() == a.ne[0] && a.n_elements() != a.ne[0];
    check((bias || a.n_elements() == b.n_elements()) && a.n_elements() == y.n_elements(), "add", "shapes differ");
    const int64_t d = a.ne[0];
    for (int64_t i = 0; i < y.n_elements(); ++i)
      y.as<float>()[i] = a.as<const float>()[i] + b.as<const float>()[bias ? i % d : i];
  }

  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    check(gate.n_elements() == up.n_elements() && y.n_elements() == up.n_elements(), "swiglu", "shapes differ");
    for (int64_t i = 0; i < y.n_elements(); ++i)
      y.as<float>()[i] = silu(gate.as<const float>()[i]) * up.as<const float>()[i];
  }

  void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) override {
    check(gate.n_elements() == up.n_elements() && y.n_elements() == up.n_elements(), "geglu", "shapes differ");
    for (int64_t i = 0; i < y.n_elements(); ++i)
      y.as<float>()[i] = gelu_tanh(gate.as<const float>()[i]) * up.as<const float>()[i];
  }

  void scale(const Tensor& x, float s, const Tensor& y) override {
    check(x.n_elements() == y.n_elements(), "scale", "shapes differ");
    for (int64_t i = 0; i < y.n_elements(); ++i) y.as<float>()[i] = x.as<const float>()[i] * s;
  }

  void mul_sigmoid(const Tensor& x, const Tensor& g, const Tensor& y) override {
    check(y.n_elements() == x.n_elements(), "mul_sigmoid", "y shape");
    const int64_t d = x.ne[0];
    const bool per_row = g.n_elements() != x.n_elements();
    check(!per_row || (g.ne[0] == 1 && g.rows() == x.rows()), "mul_sigmoid", "gate shape");
    for (int64_t i = 0; i < x.n_elements(); ++i)
      y.as<float>()[i] = x.as<const float>()[i] * sigmoid(g.as<const float>()[per_row ? i / d : i]);
  }

  void slice_cols(const Tensor& x, int64_t offset, int64_t len, const Tensor& y) override {
    const int64_t w = x.ne[0];
    check(offset >= 0 && offset + len <= w && y.ne[0] == len && y.rows() == x.rows(), "slice_cols", "shape");
    for (int64_t r = 0; r < x.rows(); ++r)
      std::memcpy(y.as<float>() + r * len, x.as<const float>() + r * w + offset, len * sizeof(float));
  }

  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, const Tensor& g,
                 const Tensor& beta) override {
    const int64_t H = a.ne[0];
    check(dt_bias.ne[0] == H && a_neg.ne[0] == H && b.n_elements() == a.n_elements(), "gdn_gates", "shape");
    for (int64_t i = 0; i < a.n_elements(); ++i) {
      const float x = a.as<const float>()[i] + dt_bias.as<const float>()[i % H];
      const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));  // torch's threshold
      g.as<float>()[i] = softplus * a_neg.as<const float>()[i % H];
      beta.as<float>()[i] = sigmoid(b.as<const float>()[i]);
    }
  }

  void causal_conv_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& y) override {
    const int64_t C = x.ne[0], n = x.rows(), K = w.ne[0];
    check(w.ne[1] == C && w.type == DType::F32, "causal_conv_silu", "weight shape/type");
    check(state.ne[0] == C && state.ne[1] == K - 1 && y.n_elements() == x.n_elements(), "causal_conv_silu",
          "state/y shape");
    // Window = K-1 remembered inputs followed by the n new ones.
    std::vector<float> win((K - 1 + n) * C);
    std::memcpy(win.data(), state.data, (K - 1) * C * sizeof(float));
    std::memcpy(win.data() + (K - 1) * C, x.data, n * C * sizeof(float));
    const auto* wp = w.as<const float>();
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += wp[c * K + k] * win[(t + k) * C + c];
        y.as<float>()[t * C + c] = silu(acc);
      }
    std::memcpy(state.data, win.data() + n * C, (K - 1) * C * sizeof(float));
  }

  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& state, const Tensor& y) override {
    cpu::DeltaRuleShape s{q.ne[2], v.ne[1], q.ne[1], q.ne[0], v.ne[0]};
    check(k.n_elements() == q.n_elements() && v.ne[2] == s.n_tokens && s.n_heads % s.n_k_heads == 0,
          "gated_delta_rule", "q/k/v shape");
    check(g.ne[0] == s.n_heads && beta.ne[0] == s.n_heads && state.n_elements() == s.n_heads * s.dk * s.dv,
          "gated_delta_rule", "g/beta/state shape");
    // Prefill uses the chunked form, decode the recurrence; they agree (tests/backend).
    constexpr int64_t kChunk = 64;
    pool_.parallel_for(s.n_heads, 1, [&](int64_t h0, int64_t h1, int) {
      if (s.n_tokens >= 16)
        cpu::delta_rule_chunked(s, kChunk, q.as<const float>(), k.as<const float>(), v.as<const float>(),
                                g.as<const float>(), beta.as<const float>(), state.as<float>(), y.as<float>(), h0, h1);
      else
        cpu::delta_rule_recurrent(s, q.as<const float>(), k.as<const float>(), v.as<const float>(),
                                  g.as<const float>(), beta.as<const float>(), state.as<float>(), y.as<float>(), h0,
                                  h1);
    });
  }

  void kv_store(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                const Tensor& pos) override {
    const int64_t row = k.ne[0] * k.ne[1], n = k.ne[2];
    check(k_cache.ne[0] * k_cache.ne[1] == row && v.n_elements() == k.n_elements() && pos.ne[0] == n, "kv_store",
          "shape");
    check(k_cache.type == DType::F16 && v_cache.type == DType::F16, "kv_store", "the caches are F16");
    for (int64_t i = 0; i < n; ++i) {
      const int32_t p = pos.as<const int32_t>()[i];
      check(p >= 0, "kv_store", "negative position");
      const int64_t at = p % k_cache.ne[2] * row;
      for (int64_t j = 0; j < row; ++j) {
        k_cache.as<uint16_t>()[at + j] = float_to_half_bits(k.as<const float>()[i * row + j]);
        v_cache.as<uint16_t>()[at + j] = float_to_half_bits(v.as<const float>()[i * row + j]);
      }
    }
  }

  void attention(const Tensor& q, std::span<const Tensor> k_caches, std::span<const Tensor> v_caches,
                 const Tensor& pos, float scale, int window, const Tensor* sinks, const Tensor& y) override {
    check(one_or_per_token(k_caches, v_caches, q.ne[2]), "attention", "one sequence's caches, or one per token");
    check(window >= 0, "attention", "negative window");
    check(!sinks || (sinks->type == DType::F32 && sinks->n_elements() == q.ne[1]), "attention", "sinks shape");
    if (k_caches.size() == 1) return attention_one(q, k_caches[0], v_caches[0], pos, scale, window, sinks, y);
    for (int64_t t = 0; t < q.ne[2]; ++t) {
      const size_t i = static_cast<size_t>(t);
      attention_one(q.slice(2, t, 1), k_caches[i], v_caches[i], pos.slice(0, t, 1), scale, window, sinks,
                    y.slice(2, t, 1));
    }
  }

  void moe_route(const Tensor& logits, int k, bool renormalize, const Tensor& ids, const Tensor& weights) override {
    const int64_t E = logits.ne[0], n = logits.rows();
    check(k > 0 && k <= E && ids.ne[0] == k && weights.ne[0] == k && ids.rows() == n, "moe_route", "shape");
    std::vector<double> p(E);
    std::vector<int32_t> order(E);
    for (int64_t t = 0; t < n; ++t) {
      const float* l = logits.as<const float>() + t * E;
      const double mx = *std::max_element(l, l + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - mx));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return p[a] > p[b] || (p[a] == p[b] && a < b);
      });
      double chosen = 0;
      for (int j = 0; j < k; ++j) chosen += p[order[j]];
      for (int j = 0; j < k; ++j) {
        ids.as<int32_t>()[t * k + j] = order[j];
        weights.as<float>()[t * k + j] = static_cast<float>(p[order[j]] / (renormalize ? chosen : sum));
      }
    }
  }

  void moe_ffn(const Tensor& x, const ExpertWeights& ex, const Tensor& ids, const Tensor& weights,
               const Tensor& y) override {
    const Tensor &gate = ex.gate, &up = ex.up, &down = ex.down;
    const int64_t d = x.ne[0], n = x.rows(), k = ids.ne[0], E = gate.ne[2];
    const int64_t ff = down.ne[0];
    check(experts_fit(ex, d), "moe_ffn", "expert shapes");
    check(ids.rows() == n && y.ne[0] == d && y.rows() == n, "moe_ffn", "ids/y shape");
    std::vector<float> out(n * d, 0.0f);
    // Group the tokens by expert so each expert's weights are read once per call.
    std::vector<std::vector<std::pair<int64_t, float>>> routed(E);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = ids.as<const int32_t>()[t * k + j];
        check(e >= 0 && e < E, "moe_ffn", "expert id out of range");
        routed[e].push_back({t, weights.as<const float>()[t * k + j]});
      }
    for (int64_t e = 0; e < E; ++e) {
      const int64_t m = static_cast<int64_t>(routed[e].size());
      if (m == 0) continue;
      std::vector<float> xe(m * d), ge(m * ff), ue(m * ff), de(m * d);
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(&xe[i * d], x.as<const float>() + routed[e][i].first * d, d * sizeof(float));
      Tensor xt = Tensor::make(DType::F32, {d, m}, xe.data());
      Tensor gt = Tensor::make(DType::F32, {ff, m}, ge.data());
      Tensor ut = Tensor::make(DType::F32, {ff, m}, ue.data());
      Tensor dt = Tensor::make(DType::F32, {d, m}, de.data());
      matmul(gate.slice(2, e, 1), xt, gt);
      matmul(up.slice(2, e, 1), xt, ut);
      if (!ex.gate_bias.empty()) add(gt, ex.gate_bias.slice(1, e, 1), gt);
      if (!ex.up_bias.empty()) add(ut, ex.up_bias.slice(1, e, 1), ut);
      if (ex.clamp > 0) {
        for (int64_t i = 0; i < m * ff; ++i) {
          const float g = std::min(ge[i], ex.clamp), u = std::clamp(ue[i], -ex.clamp, ex.clamp);
          ge[i] = g * sigmoid(ex.alpha * g) * (u + 1.0f);
        }
      } else {
        swiglu(gt, ut, gt);
      }
      matmul(down.slice(2, e, 1), gt, dt);
      if (!ex.down_bias.empty()) add(dt, ex.down_bias.slice(1, e, 1), dt);
      for (int64_t i = 0; i < m; ++i) {
        const auto [t, wgt] = routed[e][i];
        for (int64_t c = 0; c < d; ++c) out[t * d + c] += wgt * de[i * d + c];
      }
    }
    std::memcpy(y.data, out.data(), out.size() * sizeof(float));
  }

  void argmax(const Tensor& logits, const Tensor& ids) override {
    const int64_t V = logits.ne[0];
    for (int64_t t = 0; t < logits.rows(); ++t) {
      const float* l = logits.as<const float>() + t * V;
      ids.as<int32_t>()[t] = static_cast<int32_t>(std::max_element(l, l + V) - l);
    }
  }
  void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& out) override {
    check_f32(logits, "token_logprobs");
    const int64_t V = logits.ne[0], n = logits.rows(), m = ids.n_elements() / std::max<int64_t>(n, 1);
    check(ids.type == DType::I32 && ids.ne[0] == n && ids.n_elements() == n * m && out.type == DType::F32 &&
              out.n_elements() == n * m,
          "token_logprobs", "ids and out must be {n, m}");
    for (int64_t t = 0; t < n; ++t) {
      const std::span<const float> row(logits.as<const float>() + t * V, static_cast<size_t>(V));
      const double log_z = row_log_z(row);
      for (int64_t j = 0; j < m; ++j) {
        const int32_t id = ids.as<const int32_t>()[j * n + t];
        check(id >= 0 && id < V, "token_logprobs", "id out of range");
        out.as<float>()[j * n + t] = static_cast<float>(row[static_cast<size_t>(id)] - log_z);
      }
    }
  }
  void sample_rows(const Tensor& logits, const Tensor& params, const Tensor& ids) override {
    const int64_t V = logits.ne[0], n = logits.rows();
    check_f32(logits, "sample_rows");
    check(params.type == DType::I32 && params.ne[0] == kRowSamplingWords && params.rows() >= n, "sample_rows",
          "params shape");
    check(ids.type == DType::I32 && ids.n_elements() == n, "sample_rows", "ids shape");
    for (int64_t t = 0; t < n; ++t) {
      RowSampling s;
      std::memcpy(static_cast<void*>(&s), params.as<const int32_t>() + kRowSamplingWords * t, sizeof(s));
      check(s.top_k >= 0 && s.top_k <= kMaxRowTopK && s.top_k < V, "sample_rows", "top-k out of range");
      const std::span row(logits.as<float>() + t * V, static_cast<size_t>(V));
      penalise_row(row, s, ids.as<const int32_t>()[t]);
      ids.as<int32_t>()[t] = row_draw_declined(row, s) ? -1 : draw_from_row(row, s);
    }
  }

  // ---- fused ops: the compositions backend.h defines them as ----------------------
  void matmul_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y) override {
    check(w.size() == y.size(), "matmul_many", "one output per weight");
    for (size_t i = 0; i < w.size(); ++i) matmul(w[i], x, y[i]);
  }

  void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor* b_bias, const Tensor* b_norm, const Tensor& w,
                    float eps, const Tensor& sum, const Tensor& y) override {
    std::vector<float> biased(b_bias ? b.n_elements() : 0), normed(b_norm ? b.n_elements() : 0);
    Tensor bb = b;
    if (b_bias) {
      bb = Tensor::make(DType::F32, {b.ne[0], b.rows()}, biased.data());
      add(b, *b_bias, bb);
    }
    if (b_norm) {
      const Tensor nb = Tensor::make(DType::F32, {b.ne[0], b.rows()}, normed.data());
      rms_norm(bb, b_norm, eps, nb);
      bb = nb;
    }
    add(a, bb, sum);
    rms_norm(sum, &w, eps, y);
  }

  void add_rms_norm_matmul_many(const Tensor& a, const Tensor& b, const Tensor& norm_w, float eps, const Tensor& sum,
                                const Tensor& h, std::span<const Tensor> w, std::span<const Tensor> y) override {
    add_rms_norm(a, b, nullptr, nullptr, norm_w, eps, sum, h);
    matmul_many(w, h, y);
  }

  void gdn_prepare(const Tensor& qkv, const Tensor& conv_w, const Tensor& conv_state, const Tensor& a,
                   const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, float l2_eps, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta) override {
    const int64_t C = qkv.ne[0], n = qkv.rows(), dk = q.ne[0], Hk = q.ne[1], dv = v.ne[0], H = v.ne[1];
    check(C == 2 * Hk * dk + H * dv && k.n_elements() == q.n_elements() && q.ne[2] == n && v.ne[2] == n,
          "gdn_prepare", "q/k/v shape");
    std::vector<float> conv(C * n);
    const Tensor c = Tensor::make(DType::F32, {C, n}, conv.data());
    causal_conv_silu(qkv, conv_w, conv_state, c);
    slice_cols(c, 0, Hk * dk, q.reshape({Hk * dk, n}));
    slice_cols(c, Hk * dk, Hk * dk, k.reshape({Hk * dk, n}));
    slice_cols(c, 2 * Hk * dk, H * dv, v.reshape({H * dv, n}));
    l2_norm(q, l2_eps, q);
    l2_norm(k, l2_eps, k);
    gdn_gates(a, b, dt_bias, a_neg, g, beta);
  }

  void attention_prepare(const Tensor& qp, const Tensor& k, const Tensor& v, const QkvBias& bias,
                         const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& pos,
                         const RopeParams& rope_params, const Tensor& q, const Tensor* gate,
                         std::span<const Tensor> k_caches, std::span<const Tensor> v_caches) override {
    check(one_or_per_token(k_caches, v_caches, q.ne[2]), "attention_prepare",
          "one sequence's caches, or one per token");
    if (bias.q || bias.k || bias.v) {  // the biased projections in buffers of their own: the inputs are only read
      std::vector<float> qb, kb, vb;
      const auto biased = [&](const Tensor& x, const Tensor* b, std::vector<float>& buf) {
        if (!b) return x;
        const int64_t row = x.ne[0] * x.ne[1], n = x.ne[2];
        check(b->n_elements() == row && b->type == DType::F32, "attention_prepare", "bias shape/type");
        buf.resize(static_cast<size_t>(row * n));
        const Tensor y = Tensor::make(DType::F32, {x.ne[0], x.ne[1], n}, buf.data());
        add(x.reshape({row, n}), *b, y.reshape({row, n}));
        return y;
      };
      return attention_prepare(biased(qp, bias.q, qb), biased(k, bias.k, kb), biased(v, bias.v, vb), {}, q_norm,
                               k_norm, eps, pos, rope_params, q, gate, k_caches, v_caches);
    }
    if (k_caches.size() == 1)
      return attention_prepare_one(qp, k, v, q_norm, k_norm, eps, pos, rope_params, q, gate, k_caches[0],
                                   v_caches[0]);
    for (int64_t t = 0; t < q.ne[2]; ++t) {
      const size_t i = static_cast<size_t>(t);
      const Tensor gate_t = gate ? gate->slice(2, t, 1) : Tensor{};
      attention_prepare_one(qp.slice(2, t, 1), k.slice(2, t, 1), v.slice(2, t, 1), q_norm, k_norm, eps,
                            pos.slice(0, t, 1), rope_params, q.slice(2, t, 1), gate ? &gate_t : nullptr, k_caches[i],
                            v_caches[i]);
    }
  }

  void attention_gated(const Tensor& q, std::span<const Tensor> k_caches, std::span<const Tensor> v_caches,
                       const Tensor& pos, float scale, int window, const Tensor& gate, const Tensor& y) override {
    check(gate.n_elements() == y.n_elements(), "attention_gated", "gate shape");
    attention(q, k_caches, v_caches, pos, scale, window, nullptr, y);
    mul_sigmoid(y, gate, y);
  }

  void gated_delta_net_core(const Tensor& qkv, const Tensor& conv_w, std::span<const Tensor> conv_states,
                            const Tensor& a, const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, float l2_eps,
                            std::span<const Tensor> states, const Tensor& z, const Tensor& norm_w, float norm_eps,
                            const Tensor& y) override {
    check(one_or_per_token(conv_states, states, qkv.rows()), "gated_delta_net_core", "one state, or one per token");
    if (states.size() == 1)
      return gdn_core_one(qkv, conv_w, conv_states[0], a, b, dt_bias, a_neg, l2_eps, states[0], z, norm_w, norm_eps, y);
    for (int64_t t = 0; t < qkv.rows(); ++t) {
      const size_t i = static_cast<size_t>(t);
      gdn_core_one(qkv.slice(1, t, 1), conv_w, conv_states[i], a.slice(1, t, 1), b.slice(1, t, 1), dt_bias, a_neg,
                   l2_eps, states[i], z.slice(2, t, 1), norm_w, norm_eps, y.slice(2, t, 1));
    }
  }

  void shared_expert_add(const Tensor& g, const Tensor& u, const Tensor& down, const Tensor* gate_logit,
                         const Tensor& y) override {
    const int64_t ff = g.ne[0], n = g.rows(), d = down.rows();
    check(u.n_elements() == g.n_elements() && down.ne[0] == ff && y.ne[0] == d && y.rows() == n,
          "shared_expert_add", "shape");
    std::vector<float> act(ff * n), out(d * n);
    const Tensor at = Tensor::make(DType::F32, {ff, n}, act.data()), ot = Tensor::make(DType::F32, {d, n}, out.data());
    swiglu(g, u, at);
    matmul(down, at, ot);
    if (gate_logit) mul_sigmoid(ot, *gate_logit, ot);
    add(y, ot, y);
  }

  void moe_block(const Tensor& x, const Tensor& logits, int k, bool renormalize, const ExpertWeights& experts,
                 const SharedExpert* shared, const Tensor& y) override {
    const int64_t n = logits.rows();
    std::vector<int32_t> id_buf(k * n);
    std::vector<float> weight_buf(k * n);
    const Tensor ids = Tensor::make(DType::I32, {k, n}, id_buf.data());
    const Tensor weights = Tensor::make(DType::F32, {k, n}, weight_buf.data());
    moe_route(logits, k, renormalize, ids, weights);
    moe_ffn(x, experts, ids, weights, y);
    if (shared) shared_expert_add(shared->g, shared->u, shared->down, shared->gate_logit, y);
  }

 private:
  // attention for one sequence's queries.
  void attention_one(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& pos, float scale,
                     int window, const Tensor* sinks, const Tensor& y) {
    const int64_t D = q.ne[0], Hq = q.ne[1], n = q.ne[2], Hkv = k_cache.ne[1];
    check(k_cache.ne[0] == D && Hq % Hkv == 0 && pos.ne[0] == n, "attention", "shape");
    check(k_cache.type == DType::F16 && v_cache.type == DType::F16, "attention", "the caches are F16");
    const int64_t group = Hq / Hkv, row = Hkv * D;
    // Query t sees cache rows [first(t), pos[t]].
    const auto first = [&](int64_t t) {
      return window > 0 ? std::max<int64_t>(0, pos.as<const int32_t>()[t] + 1 - window) : int64_t{0};
    };
    int64_t lo = std::numeric_limits<int64_t>::max(), rows = 0;  // positions [lo, rows) some query sees
    for (int64_t t = 0; t < n; ++t) {
      const int64_t len = pos.as<const int32_t>()[t] + 1;
      check(len >= 1, "attention", "negative position");
      rows = std::max(rows, len);
      lo = std::min(lo, first(t));
    }
    const int64_t C = k_cache.ne[2];  // position s lives in cache row s % C
    check(rows - lo <= C, "attention", "the positions one call reads do not fit in the cache");
    // Those rows widened to f32 once, rather than once per query head (position s at s - lo).
    // In the scratch arena: a vector this size was mapped, zeroed and unmapped on every
    // call, which cost a long context's decode more than the widening itself.
    const ScratchMark mark = arena_.mark();
    float* kf = static_cast<float*>(arena_.take(sizeof(float) * (rows - lo) * row));
    float* vf = static_cast<float*>(arena_.take(sizeof(float) * (rows - lo) * row));
    pool_.parallel_for(rows - lo, 64, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint16_t* kc = k_cache.as<const uint16_t>() + (lo + r) % C * row;
        const uint16_t* vc = v_cache.as<const uint16_t>() + (lo + r) % C * row;
        for (int64_t j = 0; j < row; ++j) {
          kf[r * row + j] = half_bits_to_float(kc[j]);
          vf[r * row + j] = half_bits_to_float(vc[j]);
        }
      }
    });
    pool_.parallel_for(n * Hq, 1, [&](int64_t i0, int64_t i1, int) {
      std::vector<double> p;
      std::vector<double> acc(D);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = i / Hq, h = i % Hq, kvh = h / group, len = pos.as<const int32_t>()[t] + 1;
        const int64_t s0 = first(t);
        const float* qh = q.as<const float>() + i * D;
        p.resize(len - s0);
        cpu::lane_dots(qh, kf + (s0 - lo) * row + kvh * D, row, len - s0, D, p.data());
        double mx = -std::numeric_limits<double>::infinity();
        for (auto& e : p) mx = std::max(mx, e *= scale);
        const double sink = sinks ? sinks->as<const float>()[h] : -std::numeric_limits<double>::infinity();
        mx = std::max(mx, sink);
        double sum = std::exp(sink - mx);  // the sink's share: 0 without one
        for (auto& e : p) sum += (e = std::exp(e - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        cpu::add_weighted_rows(p.data(), vf + (s0 - lo) * row + kvh * D, row, len - s0, D, acc.data());
        float* yh = y.as<float>() + i * D;
        for (int64_t j = 0; j < D; ++j) yh[j] = static_cast<float>(acc[j] / sum);
      }
    });
    arena_.rewind(mark);
  }

  // attention_prepare for one sequence's tokens.
  void attention_prepare_one(const Tensor& qp, const Tensor& k, const Tensor& v, const Tensor* q_norm,
                             const Tensor* k_norm, float eps, const Tensor& pos, const RopeParams& rope_params,
                             const Tensor& q, const Tensor* gate, const Tensor& k_cache, const Tensor& v_cache) {
    const int64_t D = q.ne[0], rows = q.ne[1] * q.ne[2];
    check(qp.n_elements() == (gate ? 2 : 1) * q.n_elements() && k.ne[0] == D && v.n_elements() == k.n_elements(),
          "attention_prepare", "shape");
    if (gate) {
      check(gate->n_elements() == q.n_elements(), "attention_prepare", "gate shape");
      const Tensor both = qp.reshape({2 * D, rows});
      slice_cols(both, 0, D, q.reshape({D, rows}));
      slice_cols(both, D, D, gate->reshape({D, rows}));
    } else if (q.data != qp.data) {
      copy(qp, q);
    }
    std::vector<float> k_roped(k.n_elements());
    const Tensor kr = Tensor::make(DType::F32, {k.ne[0], k.ne[1], k.ne[2]}, k_roped.data());
    copy(k, kr);
    if (q_norm) rms_norm(q, q_norm, eps, q);
    if (k_norm) rms_norm(kr, k_norm, eps, kr);
    rope(q, pos, rope_params);
    rope(kr, pos, rope_params);
    kv_store(kr, v, k_cache, v_cache, pos);
  }

  // gated_delta_net_core for one sequence's tokens: the composition backend.h defines.
  void gdn_core_one(const Tensor& qkv, const Tensor& conv_w, const Tensor& conv_state, const Tensor& a,
                    const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, float l2_eps, const Tensor& state,
                    const Tensor& z, const Tensor& norm_w, float norm_eps, const Tensor& y) {
    const int64_t n = qkv.rows(), dv = y.ne[0], H = y.ne[1], dk = state.ne[1];
    const int64_t Hk = dk > 0 ? (qkv.ne[0] - H * dv) / (2 * dk) : 0;
    check(Hk > 0 && qkv.ne[0] == 2 * Hk * dk + H * dv && y.ne[2] == n && state.ne[0] == dv && state.ne[2] == H,
          "gated_delta_net_core", "qkv/state/y shape");
    std::vector<float> buf((2 * Hk * dk + H * dv + 2 * H) * n);
    float* p = buf.data();
    auto take = [&p](std::initializer_list<int64_t> dims) {
      Tensor t = Tensor::make(DType::F32, dims, p);
      p += t.n_elements();
      return t;
    };
    const Tensor q = take({dk, Hk, n}), k = take({dk, Hk, n}), v = take({dv, H, n}), g = take({H, n}),
                 beta = take({H, n});
    gdn_prepare(qkv, conv_w, conv_state, a, b, dt_bias, a_neg, l2_eps, q, k, v, g, beta);
    gated_delta_rule(q, k, v, g, beta, state, y);
    rms_norm_gated(y, norm_w, z, norm_eps, y);
  }

  cpu::ThreadPool pool_;
  ScratchArena<HostChunks> arena_;
  std::vector<Buffer> persistent_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace zinc
