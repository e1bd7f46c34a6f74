#include "backend/cpu/delta_rule.h"

#include <cmath>
#include <vector>

namespace zinc::cpu {

void delta_rule_recurrent(const DeltaRuleShape& s, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* state, float* y, int64_t h_begin,
                          int64_t h_end) {
  const int64_t H = s.n_heads, Hk = s.n_k_heads, dk = s.dk, dv = s.dv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> S(dk * dv), delta(dv);
  for (int64_t h = h_begin; h < h_end; ++h) {
    float* Sh = state + h * dk * dv;
    for (int64_t i = 0; i < dk * dv; ++i) S[i] = Sh[i];
    const int64_t kh = h % Hk;
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      const float* qt = q + (t * Hk + kh) * dk;
      const float* kt = k + (t * Hk + kh) * dk;
      const float* vt = v + (t * H + h) * dv;
      const double decay = std::exp(static_cast<double>(g[t * H + h]));
      const double b = beta[t * H + h];
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
      for (int64_t j = 0; j < dv; ++j) delta[j] = 0;
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) delta[j] += S[i * dv + j] * kt[i];
      for (int64_t j = 0; j < dv; ++j) delta[j] = b * (vt[j] - delta[j]);
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += kt[i] * delta[j];
      float* yt = y + (t * H + h) * dv;
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * qt[i];
        yt[j] = static_cast<float>(acc * scale);
      }
    }
    for (int64_t i = 0; i < dk * dv; ++i) Sh[i] = static_cast<float>(S[i]);
  }
}

// Chunked form for one chunk of L tokens (G = in-chunk cumulative log-decay):
//   A[i][j] = -β_i (k_i·k_j) e^{G_i-G_j} for j < i;  T = (I - A)^{-1} by forward substitution
//   U = T (β v),  W = T (β e^{G} k)
//   v' = U - W S,  y = (e^{G} q) S + (causal (q_i·k_j) e^{G_i-G_j}) v'
//   S ← e^{G_L} S + Σ_j e^{G_L-G_j} k_j ⊗ v'_j
void delta_rule_chunked(const DeltaRuleShape& s, int64_t chunk, const float* q, const float* k,
                        const float* v, const float* g, const float* beta, float* state, float* y,
                        int64_t h_begin, int64_t h_end) {
  const int64_t H = s.n_heads, Hk = s.n_k_heads, dk = s.dk, dv = s.dv, n = s.n_tokens;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> S(dk * dv), G(chunk), T(chunk * chunk), U(chunk * dv), W(chunk * dk), vnew(chunk * dv);
  for (int64_t h = h_begin; h < h_end; ++h) {
    float* Sh = state + h * dk * dv;
    for (int64_t i = 0; i < dk * dv; ++i) S[i] = Sh[i];
    const int64_t kh = h % Hk;
    auto qv = [&](int64_t t, int64_t i) { return static_cast<double>(q[(t * Hk + kh) * dk + i]); };
    auto kv = [&](int64_t t, int64_t i) { return static_cast<double>(k[(t * Hk + kh) * dk + i]); };
    auto vv = [&](int64_t t, int64_t j) { return static_cast<double>(v[(t * H + h) * dv + j]); };
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
      const int64_t L = std::min(chunk, n - t0);
      double acc = 0;
      for (int64_t i = 0; i < L; ++i) G[i] = (acc += g[(t0 + i) * H + h]);
      auto kdot = [&](int64_t a, int64_t b) {
        double d = 0;
        for (int64_t i = 0; i < dk; ++i) d += kv(t0 + a, i) * kv(t0 + b, i);
        return d;
      };
      // T = (I - A)^{-1}: row i of T is e_i + Σ_{m<i} A[i][m] T[m].
      for (int64_t i = 0; i < L; ++i) {
        const double bi = beta[(t0 + i) * H + h];
        for (int64_t j = 0; j < L; ++j) T[i * chunk + j] = (i == j) ? 1.0 : 0.0;
        for (int64_t m = 0; m < i; ++m) {
          const double a = -bi * kdot(i, m) * std::exp(G[i] - G[m]);
          for (int64_t j = 0; j <= m; ++j) T[i * chunk + j] += a * T[m * chunk + j];
        }
      }
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < dv; ++j) U[i * dv + j] = 0;
        for (int64_t c = 0; c < dk; ++c) W[i * dk + c] = 0;
        for (int64_t m = 0; m <= i; ++m) {
          const double bm = beta[(t0 + m) * H + h];
          const double tu = T[i * chunk + m] * bm;
          const double tw = tu * std::exp(G[m]);
          for (int64_t j = 0; j < dv; ++j) U[i * dv + j] += tu * vv(t0 + m, j);
          for (int64_t c = 0; c < dk; ++c) W[i * dk + c] += tw * kv(t0 + m, c);
        }
        // v' = U - W S
        for (int64_t j = 0; j < dv; ++j) {
          double ws = 0;
          for (int64_t c = 0; c < dk; ++c) ws += W[i * dk + c] * S[c * dv + j];
          vnew[i * dv + j] = U[i * dv + j] - ws;
        }
      }
      for (int64_t i = 0; i < L; ++i) {
        float* yt = y + ((t0 + i) * H + h) * dv;
        const double eg = std::exp(G[i]);
        std::vector<double> row(dv, 0.0);
        for (int64_t c = 0; c < dk; ++c) {
          const double qc = qv(t0 + i, c) * eg;
          for (int64_t j = 0; j < dv; ++j) row[j] += qc * S[c * dv + j];
        }
        for (int64_t m = 0; m <= i; ++m) {
          double qk = 0;
          for (int64_t c = 0; c < dk; ++c) qk += qv(t0 + i, c) * kv(t0 + m, c);
          const double a = qk * std::exp(G[i] - G[m]);
          for (int64_t j = 0; j < dv; ++j) row[j] += a * vnew[m * dv + j];
        }
        for (int64_t j = 0; j < dv; ++j) yt[j] = static_cast<float>(row[j] * scale);
      }
      const double gl = G[L - 1];
      const double el = std::exp(gl);
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= el;
      for (int64_t m = 0; m < L; ++m) {
        const double e = std::exp(gl - G[m]);
        for (int64_t c = 0; c < dk; ++c) {
          const double kc = kv(t0 + m, c) * e;
          for (int64_t j = 0; j < dv; ++j) S[c * dv + j] += kc * vnew[m * dv + j];
        }
      }
    }
    for (int64_t i = 0; i < dk * dv; ++i) Sh[i] = static_cast<float>(S[i]);
  }
}

}  // namespace zinc::cpu
