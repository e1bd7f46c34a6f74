// gpu-check's op checks: every op of the backend interface and every fused op on
// fresh random data, for every weight type and for 1 to 70 tokens, the CUDA backend
// against the CPU backend.
#ifdef ZINC_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cli/gpu_check/checker.h"
#include "quant/types.h"

namespace zinc::cli::gpu_check {
namespace {

// The fused ops of backend.h against the CPU backend's compositions.
// Routed experts without biases, SwiGLU.
ExpertWeights experts(const Tensor& gate, const Tensor& up, const Tensor& down) {
  ExpertWeights e;
  e.gate = gate, e.up = up, e.down = down;
  return e;
}

// add_rms_norm_matmul_many: at one token the router's launch forms the norm itself
// (matvec_norm_kernel: staged rows, direct rows, F32 rows alone; rows of 2048 as the
// flagship's, 4096 in a team of two, 1024 of Q6_K read directly); at 2 tokens the two ops.
void check_norm_matmul_many(Checker& c) {
  struct Case {
    DType shared;  // the shared expert's gate / up type; F32: the router alone
    int64_t in;
  };
  for (const Case& k : {Case{DType::Q8_0, 2048}, Case{DType::Q4_K, 4096}, Case{DType::Q6_K, 1024},
                        Case{DType::F32, 2048}}) {
    std::vector<std::pair<DType, int64_t>> shapes{{DType::F32, 256}};
    if (k.shared != DType::F32) shapes.insert(shapes.end(), {{k.shared, 512}, {k.shared, 512}, {DType::F32, 1}});
    std::vector<Checker::Both> ws;
    for (auto [t, rows] : shapes) ws.push_back(c.weight(t, {k.in, rows}, 0.03f));
    const std::vector<Tensor> ws_gpu = gpu_copies(ws);
    auto norm_w = c.f32({k.in}, c.randn(k.in, 0.1f, 1.0f));
    for (int64_t n : {1, 2}) {
      auto a = c.f32({k.in, n}, c.randn(k.in * n, 2.0f)), b = c.f32({k.in, n}, c.randn(k.in * n));
      auto sum = c.out({k.in, n}), h = c.out({k.in, n});
      std::vector<Checker::Both> ys;
      std::vector<Tensor> wc, yc, yg;
      for (const Checker::Both& w : ws) {
        ys.push_back(c.out({w.cpu.rows(), n}));
        wc.push_back(w.cpu), yc.push_back(ys.back().cpu), yg.push_back(ys.back().gpu);
      }
      c.cpu().add_rms_norm_matmul_many(a.cpu, b.cpu, norm_w.cpu, 1e-6f, sum.cpu, h.cpu, wc, yc);
      c.gpu().add_rms_norm_matmul_many(a.gpu, b.gpu, norm_w.gpu, 1e-6f, sum.gpu, h.gpu, ws_gpu, yg);
      const std::string name = "add_rms_norm_matmul_many (" + tname(k.shared) + ") in=" + std::to_string(k.in) +
                               " n=" + std::to_string(n);
      c.report(name + " sum, h", std::max(c.rel_err(sum), c.rel_err(h)), 1e-4);
      for (size_t i = 0; i < ys.size(); ++i)
        c.report(name + " weight " + std::to_string(i), c.rel_err(ys[i]), matmul_tol(ws_gpu, i, n));
    }
  }
}

void check_fused_ops(Checker& c) {
  constexpr double kTol = 1e-4;
  // Mixed weight types: one launch takes a type plus the F32 weights, the rest follow.
  const int64_t in = 512;
  const std::pair<DType, int64_t> many[] = {
      {DType::Q8_0, 203}, {DType::F32, 32}, {DType::Q4_K, 64}, {DType::F32, 1}, {DType::Q6_K, 40}, {DType::Q8_0, 9}};
  std::vector<Checker::Both> mw;
  for (auto [t, rows] : many) mw.push_back(c.weight(t, {in, rows}, 0.05f));
  const std::vector<Tensor> mw_gpu = gpu_copies(mw);
  for (int64_t n : kTokenCounts) {
    const std::string sn = " n=" + std::to_string(n);
    const auto ys = c.matmul_many(mw, c.f32({in, n}, c.randn(in * n)));
    for (size_t i = 0; i < ys.size(); ++i)
      c.report("matmul_many (6 weights, 4 types) weight " + std::to_string(i) + sn, c.rel_err(ys[i]),
               matmul_tol(mw_gpu, i, n));

    // add_rms_norm with the sum written over a (as the models call it), for rows
    // held in registers (256, and 2048 as the flagship's) and one read twice (1030).
    for (int64_t d : {256, 2048, 1030}) {
      auto a = c.f32({d, n}, c.randn(d * n, 2.0f)), b = c.f32({d, n}, c.randn(d * n));
      auto w = c.f32({d}, c.randn(d, 0.1f, 1.0f));
      auto y = c.out({d, n});
      c.cpu().add_rms_norm(a.cpu, b.cpu, nullptr, nullptr, w.cpu, 1e-6f, a.cpu, y.cpu);
      c.gpu().add_rms_norm(a.gpu, b.gpu, nullptr, nullptr, w.gpu, 1e-6f, a.gpu, y.gpu);
      c.report("add_rms_norm d=" + std::to_string(d) + sn, std::max(c.rel_err(y), c.rel_err(a)), kTol);
      // Gemma's form: b normed first (640: Gemma 3 270M's rows).
      const int64_t dg = d == 256 ? 640 : d;
      auto ga = c.f32({dg, n}, c.randn(dg * n, 2.0f)), gb = c.f32({dg, n}, c.randn(dg * n, 5.0f));
      auto gbw = c.f32({dg}, c.randn(dg, 0.1f, 1.0f)), gw = c.f32({dg}, c.randn(dg, 0.1f, 1.0f));
      auto gy = c.out({dg, n});
      c.cpu().add_rms_norm(ga.cpu, gb.cpu, nullptr, &gbw.cpu, gw.cpu, 1e-6f, ga.cpu, gy.cpu);
      c.gpu().add_rms_norm(ga.gpu, gb.gpu, nullptr, &gbw.gpu, gw.gpu, 1e-6f, ga.gpu, gy.gpu);
      c.report("add_rms_norm with b normed d=" + std::to_string(dg) + sn, std::max(c.rel_err(gy), c.rel_err(ga)), kTol);
      // gpt-oss's form: b's bias added first (2880: its rows).
      const int64_t db = d == 256 ? 2880 : d;
      auto ba = c.f32({db, n}, c.randn(db * n, 2.0f)), bb = c.f32({db, n}, c.randn(db * n));
      auto bbias = c.f32({db}, c.randn(db)), bnw = c.f32({db}, c.randn(db, 0.1f, 1.0f));
      auto by = c.out({db, n});
      c.cpu().add_rms_norm(ba.cpu, bb.cpu, &bbias.cpu, nullptr, bnw.cpu, 1e-6f, ba.cpu, by.cpu);
      c.gpu().add_rms_norm(ba.gpu, bb.gpu, &bbias.gpu, nullptr, bnw.gpu, 1e-6f, ba.gpu, by.gpu);
      c.report("add_rms_norm with b's bias d=" + std::to_string(db) + sn, std::max(c.rel_err(by), c.rel_err(ba)), kTol);
    }

    // gdn_prepare: 4 key heads, 8 value heads of 64, conv kernel 4.
    const int64_t H = 8, Hk = 4, dk = 64, dv = 64, C = 2 * Hk * dk + H * dv, K = 4;
    auto qkv = c.f32({C, n}, c.randn(C * n)), cw = c.f32({K, C}, c.randn(K * C, 0.5f));
    auto cs = c.f32({C, K - 1}, c.randn(C * (K - 1)));
    auto a = c.f32({H, n}, c.randn(H * n)), b = c.f32({H, n}, c.randn(H * n));
    auto dt = c.f32({H}, c.randn(H, 0.5f, -2.0f)), an = c.f32({H}, c.randn(H, 0.3f, -1.0f));
    auto q = c.out({dk, Hk, n}), k = c.out({dk, Hk, n}), v = c.out({dv, H, n}), g = c.out({H, n}), beta = c.out({H, n});
    c.cpu().gdn_prepare(qkv.cpu, cw.cpu, cs.cpu, a.cpu, b.cpu, dt.cpu, an.cpu, 1e-6f, q.cpu, k.cpu, v.cpu, g.cpu,
                        beta.cpu);
    c.gpu().gdn_prepare(qkv.gpu, cw.gpu, cs.gpu, a.gpu, b.gpu, dt.gpu, an.gpu, 1e-6f, q.gpu, k.gpu, v.gpu, g.gpu,
                        beta.gpu);
    c.report("gdn_prepare q, k, v" + sn, std::max({c.rel_err(q), c.rel_err(k), c.rel_err(v)}), kTol);
    c.report("gdn_prepare g, beta" + sn, std::max(c.rel_err(g), c.rel_err(beta)), kTol);
    c.report("gdn_prepare conv state" + sn, c.rel_err(cs), kTol);

    // attention_prepare: the flagship's gated attention (norms, partial NEOX rope) and
    // an ungated one (no norms, interleaved rope with freq factors, q in place), both
    // with q / k / v biases (gpt-oss's; q's over the gate too). The check below takes none.
    for (bool flagship : {true, false}) {
      const int64_t D = flagship ? 256 : 64, Hq = flagship ? 16 : 6, Hkv = 2, n_ctx = n + 9;
      const int n_rot = flagship ? 64 : 48;
      std::vector<int32_t> positions(n);
      for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(n + 8 - i);  // any order
      auto pos = c.i32({n}, positions);
      auto qp = c.f32({(flagship ? 2 : 1) * D, Hq, n}, c.randn((flagship ? 2 : 1) * D * Hq * n, 2.0f));
      auto k = c.f32({D, Hkv, n}, c.randn(D * Hkv * n, 2.0f)), v = c.f32({D, Hkv, n}, c.randn(D * Hkv * n));
      auto qw = c.f32({D}, c.randn(D, 0.1f, 1.0f)), kw = c.f32({D}, c.randn(D, 0.1f, 1.0f));
      auto ff = c.f32({n_rot / 2}, c.randn(n_rot / 2, 0.2f, 1.0f));
      auto kc = c.f16({D, Hkv, n_ctx}, c.randn(D * Hkv * n_ctx)), vc = c.f16({D, Hkv, n_ctx}, c.randn(D * Hkv * n_ctx));
      const int64_t qp_rows = (flagship ? 2 : 1) * D * Hq;
      auto qb = c.f32({qp_rows}, c.randn(qp_rows)), kb = c.f32({D * Hkv}, c.randn(D * Hkv)),
           vb = c.f32({D * Hkv}, c.randn(D * Hkv));
      const Backend::QkvBias cb{&qb.cpu, &kb.cpu, &vb.cpu}, gb{&qb.gpu, &kb.gpu, &vb.gpu};
      auto q = flagship ? c.out({D, Hq, n}) : qp, gate = c.out({D, Hq, n});
      const RopeParams cr{n_rot, 1e7f, flagship, 1.0f, flagship ? nullptr : &ff.cpu};
      const RopeParams gr{n_rot, 1e7f, flagship, 1.0f, flagship ? nullptr : &ff.gpu};
      c.cpu().attention_prepare(qp.cpu, k.cpu, v.cpu, cb, flagship ? &qw.cpu : nullptr, flagship ? &kw.cpu : nullptr,
                                1e-6f, pos.cpu, cr, q.cpu, flagship ? &gate.cpu : nullptr, std::span(&kc.cpu, 1),
                                std::span(&vc.cpu, 1));
      c.gpu().attention_prepare(qp.gpu, k.gpu, v.gpu, gb, flagship ? &qw.gpu : nullptr, flagship ? &kw.gpu : nullptr,
                                1e-6f, pos.gpu, gr, q.gpu, flagship ? &gate.gpu : nullptr, std::span(&kc.gpu, 1),
                                std::span(&vc.gpu, 1));
      const std::string what =
          std::string("attention_prepare ") + (flagship ? "gated D=256" : "D=64") + ", biases" + sn;
      c.report(what + " q", c.rel_err(q), kTol);
      if (flagship) c.report(what + " gate", c.mismatches_bytes(gate), 0);
      // One f16 rounding step where the two backends' k differ in the last f32 bits.
      c.report(what + " caches", std::max(c.rel_err(kc), c.rel_err(vc)), 1e-3);
    }

    // shared_expert_add, gated and not, in every weight type.
    const int64_t ff = 256, dm = 192;
    auto sg = c.f32({ff, n}, c.randn(ff * n)), su = c.f32({ff, n}, c.randn(ff * n));
    auto logit = c.f32({1, n}, c.randn(n));
    for (DType t : kWeightTypes) {
      auto down = c.weight(t, {ff, dm}, 0.09f);
      for (bool gated : {true, false}) {
        auto y = c.f32({dm, n}, c.randn(dm * n));
        c.cpu().shared_expert_add(sg.cpu, su.cpu, down.cpu, gated ? &logit.cpu : nullptr, y.cpu);
        c.gpu().shared_expert_add(sg.gpu, su.gpu, down.gpu, gated ? &logit.gpu : nullptr, y.gpu);
        c.report("shared_expert_add " + tname(t) + (gated ? " gated" : "") + sn, c.rel_err(y), expert_tol(t, n));
      }
    }

    // moe_block with a gated shared expert (and renormalised weights), an ungated one
    // (plain softmax weights) and none; small, and the benchmark file's layer shape
    // and types with 32 experts (decode only: batches run the ops one by one), and
    // Qwen3-30B-A3B's (rows of 768, its Q6_K down rows not 16-byte aligned). The
    // IQ4_XS down rows (no run sums) are bulk-copyable, and only half of down's warps
    // stage an act row of 512: the rest go straight to the copy's mbarrier.
    struct MoeShape {
      int64_t E, k, d, ff;
      DType gate_up, down, shared;
    };
    for (const MoeShape& m : {MoeShape{16, 4, 256, 256, DType::Q6_K, DType::Q4_K, DType::IQ4_XS},
                              MoeShape{16, 4, 256, 512, DType::Q8_0, DType::IQ4_XS, DType::Q8_0},
                              MoeShape{32, 8, 2048, 512, DType::Q4_K, DType::Q5_K, DType::Q8_0},
                              MoeShape{32, 8, 1024, 256, DType::Q5_K, DType::Q6_K, DType::Q6_K},
                              MoeShape{32, 8, 2048, 768, DType::Q4_K, DType::Q6_K, DType::Q8_0}}) {
      if (m.d > 256 && n > cuda::kExpertDecodeMaxTokens) continue;
      auto gate = c.weight(m.gate_up, {m.d, m.ff, m.E}, 0.06f), up = c.weight(m.gate_up, {m.d, m.ff, m.E}, 0.06f);
      auto down = c.weight(m.down, {m.ff, m.d, m.E}, 0.09f), shared_down = c.weight(m.shared, {m.ff, m.d}, 0.09f);
      auto mx = c.f32({m.d, n}, c.randn(m.d * n)), ml = c.f32({m.E, n}, c.randn(m.E * n, 2.0f));
      auto mg = c.f32({m.ff, n}, c.randn(m.ff * n)), mu = c.f32({m.ff, n}, c.randn(m.ff * n));
      auto mlogit = c.f32({1, n}, c.randn(n));
      for (int mode : {0, 1, 2}) {
        const Backend::SharedExpert on_cpu{mg.cpu, mu.cpu, shared_down.cpu, mode == 0 ? &mlogit.cpu : nullptr};
        const Backend::SharedExpert on_gpu{mg.gpu, mu.gpu, shared_down.gpu, mode == 0 ? &mlogit.gpu : nullptr};
        auto my = c.out({m.d, n});
        c.cpu().moe_block(mx.cpu, ml.cpu, m.k, mode != 1, experts(gate.cpu, up.cpu, down.cpu),
                          mode < 2 ? &on_cpu : nullptr, my.cpu);
        c.gpu().moe_block(mx.gpu, ml.gpu, m.k, mode != 1, experts(gate.gpu, up.gpu, down.gpu),
                          mode < 2 ? &on_gpu : nullptr, my.gpu);
        const char* modes[] = {" gated shared", " shared", ""};
        c.report("moe_block d=" + std::to_string(m.d) + " " + tname(m.gate_up) + "/" + tname(m.down) + "/" +
                     tname(m.shared) + modes[mode] + sn,
                 c.rel_err(my), expert_tol(m.gate_up, n));
      }
      // Router logits all NaN, as the bits 0xffffffff (which the GPU's top-k may count
      // as taken experts, leaving it no pick) and as a quiet NaN: every output is NaN
      // on both backends and nothing hangs, although at one token down_part waits for
      // the picks gate_up publishes (moe.cu). The block right after, on finite logits,
      // must still be right: the picks were set back (by the shared expert's add, or
      // without one by the launch that sums the parts).
      for (const bool with_shared : {true, false}) {
        if (n > 2) break;
        const Backend::SharedExpert se_cpu{mg.cpu, mu.cpu, shared_down.cpu, &mlogit.cpu};
        const Backend::SharedExpert se_gpu{mg.gpu, mu.gpu, shared_down.gpu, &mlogit.gpu};
        const Backend::SharedExpert* on_cpu = with_shared ? &se_cpu : nullptr;
        const Backend::SharedExpert* on_gpu = with_shared ? &se_gpu : nullptr;
        const std::string what = "moe_block d=" + std::to_string(m.d) + " " + tname(m.gate_up) + "/" +
                                 tname(m.down) + (with_shared ? "" : " no shared") + " NaN logits ";
        for (uint32_t bits : {0xffffffffu, 0x7fc00000u}) {
          const std::vector<uint32_t> nan_bits(static_cast<size_t>(m.E * n), bits);
          auto nl = c.raw(DType::F32, {m.E, n}, nan_bits.data());
          auto ny = c.out({m.d, n});
          c.cpu().moe_block(mx.cpu, nl.cpu, m.k, true, experts(gate.cpu, up.cpu, down.cpu), on_cpu, ny.cpu);
          c.gpu().moe_block(mx.gpu, nl.gpu, m.k, true, experts(gate.gpu, up.gpu, down.gpu), on_gpu, ny.gpu);
          char hex[16];
          std::snprintf(hex, sizeof hex, "%08x", bits);
          c.report(what + hex + ", finite outputs" + sn, c.finite_on(c.cpu(), ny.cpu) + c.finite_on_gpu(ny), 0);
          auto fy = c.out({m.d, n});
          c.cpu().moe_block(mx.cpu, ml.cpu, m.k, true, experts(gate.cpu, up.cpu, down.cpu), on_cpu, fy.cpu);
          c.gpu().moe_block(mx.gpu, ml.gpu, m.k, true, experts(gate.gpu, up.gpu, down.gpu), on_gpu, fy.gpu);
          c.report(what + hex + ", then finite" + sn, c.rel_err(fy), expert_tol(m.gate_up, n));
        }
      }
    }
  }

  // argmax over rows as long as a vocabulary (many blocks per row), float4 and not.
  for (int64_t V : {248320, 100003})
    for (int64_t n : {1, 3}) {
      auto l = c.f32({V, n}, c.randn(V * n));
      auto am = c.out({n}, DType::I32);
      c.cpu().argmax(l.cpu, am.cpu), c.gpu().argmax(l.gpu, am.gpu);
      c.report("argmax V=" + std::to_string(V) + " n=" + std::to_string(n), c.mismatches_i32(am), 0);
    }

  // token_logprobs over rows as long as a vocabulary, three ids a row (the first and last
  // ids among them), on plain and on peaked logits (scale 8: exp's range matters).
  for (int64_t V : {248320, 100003})
    for (int64_t n : {1, 5})
      for (float scale : {1.0f, 8.0f}) {
        auto l = c.f32({V, n}, c.randn(V * n, scale));
        std::vector<int32_t> idv;
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t t = 0; t < n; ++t)
            idv.push_back(static_cast<int32_t>(j == 0 ? t : j == 1 ? V - 1 : t * 7919 % V));
        auto ids = c.i32({n, 3}, idv);
        auto lp = c.out({n, 3});
        c.cpu().token_logprobs(l.cpu, ids.cpu, lp.cpu), c.gpu().token_logprobs(l.gpu, ids.gpu, lp.gpu);
        c.report("token_logprobs V=" + std::to_string(V) + " n=" + std::to_string(n) + " scale " +
                     std::to_string(static_cast<int>(scale)),
                 c.rel_err(lp), 1e-6);
      }

  // sample_rows against the CPU's penalise_row + draw_from_row on the same logits and
  // draws: four rows of different settings, eight draws each, every other draw with
  // penalties on three rows over windows of the row's best tokens (repeats, one window
  // ending with the id passed in); the penalised logits must equal the CPU's bit for
  // bit. Logits rounded to integers make many ties (lower id first); V = 262,145
  // makes slices of two passes. Rows 4-6 have top-k off (min-p and top-p over the
  // whole row) on a peaked, a flat and a very peaked row: ids -1 (declined) must match
  // too.
  std::mt19937_64 draws(17);
  for (int64_t V : {248320, 262145, 1000})
    for (bool ties : {false, true}) {
      constexpr int64_t n = 7;
      std::vector<float> host = c.randn(V * n, 3.0f);
      if (ties)
        for (float& x : host) x = std::round(x);
      for (int64_t i = 0; i < V; ++i) host[4 * V + i] *= 4, host[6 * V + i] *= 8;
      std::vector<std::vector<int32_t>> best(n);  // each row's 16 best ids
      for (int64_t t = 0; t < n; ++t) {
        std::vector<int32_t> order(static_cast<size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + 16, order.end(),
                          [&](int32_t x, int32_t y) { return host[t * V + x] > host[t * V + y]; });
        best[t].assign(order.begin(), order.begin() + 16);
      }
      auto l = c.f32({V, n}, host);
      const double off = -INFINITY;
      int bad = 0, declined = 0;
      for (int round = 0; round < 8; ++round) {
        RowSampling rows[n] = {{0, std::log(0.05), 0.95f, 0.8f, 40},
                               {0, off, 1, 1, 1},
                               {0, off, 1, 1.5f, kMaxRowTopK},
                               {0, std::log(0.2), 0.5f, 0.3f, 7},
                               {0, std::log(0.05), 0.9f, 0.8f, 0},
                               {0, off, 0.95f, 1, 0},
                               {0, off, 0.5f, 1.2f, 0}};
        for (RowSampling& r : rows) r.uniform = static_cast<double>(draws() >> 11) * 0x1.0p-53;
        std::vector<int32_t> fed(n);
        for (int64_t t = 0; t < n; ++t) fed[t] = best[t][draws() % 16];
        if (round % 2 == 1)
          for (int64_t t : {0, 1, 3, 5}) {
            RowSampling& r = rows[t];
            r.n_recent = t == 3 ? kMaxRowRecent : 48;
            for (int j = 0; j < r.n_recent; ++j) r.recent[j] = best[t][draws() % 16];
            r.recent_then_id = t == 3;
            r.repeat_penalty = t == 3 ? 0.8f : 1.3f;
            r.frequency_penalty = t == 3 ? 0.1f : 0.4f;
            r.presence_penalty = t == 3 ? -0.5f : 0.7f;
          }
        std::vector<int32_t> words(static_cast<size_t>(kRowSamplingWords * n));
        std::memcpy(words.data(), static_cast<const void*>(rows), sizeof(rows));
        auto params = c.i32({kRowSamplingWords, n}, words);
        auto ids = c.i32({n}, fed);
        c.cpu().sample_rows(l.cpu, params.cpu, ids.cpu), c.gpu().sample_rows(l.gpu, params.gpu, ids.gpu);
        bad += static_cast<int>(c.mismatches_i32(ids) + c.mismatches_bytes(l));
        const int32_t* cpu_ids = ids.cpu.as<const int32_t>();
        declined += static_cast<int>(std::count(cpu_ids, cpu_ids + n, -1));
      }
      c.report("sample_rows V=" + std::to_string(V) + (ties ? " ties" : "") + " (" + std::to_string(declined) +
                   " of 24 top-k-off draws declined)",
               bad, 0);
    }
}

// The batch (prefill) paths at tile edges: matmul over 2048-element rows and 300
// output rows (a partial 128-row tile), and the grouped MoE with a skewed router
// (a few experts take several tiles, a third of them get no token). The batch sizes
// reach each tile width of the types that take it: moe_few's at n=9 and 32 (up to six
// pairs an expert), the pipelined tiles' 16 tokens at n=64 and 65, 32 at n=128 and 64
// at n=512.
void check_prefill_ops(Checker& c) {
  for (DType t : kWeightTypes) {
    const int64_t in = 2048, out = 300;
    auto w = c.weight(t, {in, out}, 0.03f);
    for (int64_t n : {9, 64, 65, 512}) {
      const auto y = c.matmul_fresh(w, n);
      c.report("matmul " + tname(t) + " in=2048 out=300 n=" + std::to_string(n), c.rel_err(y), matmul_tol(w.gpu, n));
    }
  }
  // The pipelined tiles (every quantized type: 63 tokens) at more token counts; rows of
  // 2880 (gpt-oss's): MXFP4's last chunk of 64, while Q4_0 and IQ4_NL (k % 128) fall
  // back to the generic tiles. Then matmul_many in one launch over the flagship's
  // router + shared expert gate/up + gate logit shape.
  for (DType t : kWeightTypes) {
    if (!type_traits(t).quantized) continue;
    const int64_t in = 2048, out = 300;
    auto w = c.weight(t, {in, out}, 0.03f);
    for (int64_t n : {33, 63, 1000}) {
      const auto y = c.matmul_fresh(w, n);
      c.report("matmul " + tname(t) + " in=2048 out=300 n=" + std::to_string(n), c.rel_err(y), matmul_tol(w.gpu, n));
    }
  }
  for (DType t : {DType::MXFP4, DType::Q4_0, DType::IQ4_NL}) {
    auto w = c.weight(t, {2880, 200}, 0.03f);
    const auto y = c.matmul_fresh(w, 40);
    c.report("matmul " + tname(t) + " in=2880 out=200 n=40", c.rel_err(y), matmul_tol(w.gpu, 40));
  }
  const std::pair<DType, int64_t> many[] = {{DType::F32, 256}, {DType::Q8_0, 512}, {DType::Q8_0, 512}, {DType::F32, 1}};
  std::vector<Checker::Both> mw;
  for (auto [t, rows] : many) mw.push_back(c.weight(t, {2048, rows}, 0.03f));
  const std::vector<Tensor> mw_gpu = gpu_copies(mw);
  for (int64_t n : {9, 63, 65, 1000}) {
    const auto ys = c.matmul_many(mw, c.f32({2048, n}, c.randn(2048 * n)));
    const std::string sn = " n=" + std::to_string(n);
    c.report("matmul_many router + shared gate/up, F32 weights" + sn, std::max(c.rel_err(ys[0]), c.rel_err(ys[3])),
             matmul_tol(mw_gpu, 0, n));
    c.report("matmul_many router + shared gate/up, Q8_0 weights" + sn, std::max(c.rel_err(ys[1]), c.rel_err(ys[2])),
             matmul_tol(mw_gpu, 1, n));
  }
  check_norm_matmul_many(c);

  const int64_t E = 48, kk = 8, dm = 256, ffe = 256;
  std::vector<float> bias(E);
  for (int64_t e = 0; e < E; ++e) bias[e] = e < 3 ? 3.0f : e >= 32 ? -30.0f : 0.0f;
  const std::pair<DType, DType> expert_types[] = {{DType::Q4_K, DType::Q5_K}, {DType::Q8_0, DType::Q6_K},
                                                  {DType::MXFP4, DType::F16}, {DType::IQ4_XS, DType::Q4_0},
                                                  {DType::BF16, DType::Q2_K}, {DType::Q3_K, DType::IQ4_NL},
                                                  {DType::Q5_0, DType::Q5_1}, {DType::F32, DType::Q4_1},
                                                  {DType::Q8_0, DType::Q8_0}, {DType::MXFP4, DType::MXFP4},
                                                  {DType::IQ4_XS, DType::Q6_K}, {DType::Q2_K, DType::Q3_K},
                                                  {DType::Q4_0, DType::Q2_K},   {DType::Q4_1, DType::Q5_0},
                                                  {DType::IQ4_NL, DType::Q4_1}, {DType::Q5_1, DType::Q8_0}};
  for (auto [gu, dn] : expert_types) {
    auto gate = c.weight(gu, {dm, ffe, E}, 0.06f), up = c.weight(gu, {dm, ffe, E}, 0.06f);
    auto down = c.weight(dn, {ffe, dm, E}, 0.09f);
    for (int64_t n : {9, 32, 64, 65, 128, 512}) {
      const std::string sn = " n=" + std::to_string(n);
      auto l = c.randn(E * n, 1.0f);
      for (int64_t i = 0; i < E * n; ++i) l[i] += bias[i % E];
      auto logits = c.f32({E, n}, l);
      auto ids = c.out({kk, n}, DType::I32), wts = c.out({kk, n});
      c.cpu().moe_route(logits.cpu, kk, true, ids.cpu, wts.cpu);
      c.gpu().moe_route(logits.gpu, kk, true, ids.gpu, wts.gpu);
      auto mx = c.f32({dm, n}, c.randn(dm * n));
      auto my = c.out({dm, n});
      c.cpu().moe_ffn(mx.cpu, experts(gate.cpu, up.cpu, down.cpu), ids.cpu, wts.cpu, my.cpu);
      c.gpu().moe_ffn(mx.gpu, experts(gate.gpu, up.gpu, down.gpu), ids.gpu, wts.gpu, my.gpu);
      c.report("moe_ffn E=48 skewed " + tname(gu) + "/" + tname(dn) + sn,
               std::max(c.rel_err(my), c.mismatches_i32(ids)), kTensorCoreTol);
    }
  }
}

// Experts beyond the flagship's: GPT-OSS's (biases on gate, up and down, the clamped
// SwiGLU with gate and up values spread past the clamp) at a small shape, in its MXFP4
// and in Q8_0, through the decode kernels (moe_block routed from the logits, with and
// without a shared expert, whose add takes the parts) and the grouped ones (a prompt's
// batch: the pipelined tiles, MXFP4's rows shifted, a short last chunk); and experts
// large enough to be streamed (moe_stream.cu: an expert matrix of 1 MiB or more):
// gpt-oss-20b's 2880 x 2880 (Q8_0's rows not 16-byte aligned) and K-quants with run
// scales beside a shared expert (down writes the parts its add sums). 1 to 8 tokens
// cover the decode paths (the shared memory holds every pair's act for down up to a
// point; past it moe.cu's kernels take over). Last, moe_few.cu's tiles (batches whose
// experts average at most a token): the flagship's types and rows, Q8_0 with rows of 4
// and 3 chunks (slices of 2 and 1), Q6_K, also in rows that are not 16-byte multiples
// (2560 and 1280: 2100 and 1050 bytes); expert 0 favoured, so that from 12 tokens it
// fills more than one 8-token tile. moe_block up to 16 tokens, with a shared expert gated
// and not: past 8, the grouped experts and then the shared expert as batched ops.
void check_expert_variants(Checker& c) {
  struct Shape {
    int64_t E, k, d, ff;
    DType gate_up, down;
    bool biases;
    float scale, down_scale;
    std::vector<int64_t> tokens;
    int64_t shared_ff;
    float favoured = 0;  // added to expert 0's logits
  };
  const std::vector<int64_t> small_tokens = {1, 3, 8, 9, 64, 300}, large_tokens = {1, 2, 3, 8, 100},
                             few_tokens = {9, 12, 16};
  for (const Shape& m : {Shape{8, 4, 320, 192, DType::MXFP4, DType::MXFP4, true, 0.5f, 0.09f, small_tokens, 192},
                         Shape{8, 4, 320, 192, DType::Q8_0, DType::Q8_0, true, 0.5f, 0.09f, small_tokens, 192},
                         Shape{6, 4, 2880, 2880, DType::MXFP4, DType::MXFP4, true, 0.05f, 0.03f, large_tokens, 256},
                         Shape{5, 4, 2880, 2880, DType::Q8_0, DType::Q8_0, true, 0.05f, 0.03f, large_tokens, 256},
                         Shape{10, 8, 2048, 1024, DType::Q4_K, DType::Q5_K, false, 0.05f, 0.03f, large_tokens, 256},
                         Shape{64, 4, 2048, 512, DType::Q4_K, DType::Q5_K, false, 0.05f, 0.03f, few_tokens, 256, 2.5f},
                         Shape{64, 4, 1024, 768, DType::Q8_0, DType::Q8_0, false, 0.05f, 0.03f, few_tokens, 256, 2.5f},
                         Shape{16, 1, 2048, 2048, DType::Q6_K, DType::Q6_K, false, 0.03f, 0.02f, {9, 16}, 256},
                         Shape{16, 1, 2560, 1280, DType::Q6_K, DType::Q6_K, false, 0.03f, 0.02f, {9, 16}, 256}}) {
    auto gate = c.weight(m.gate_up, {m.d, m.ff, m.E}, m.scale), up = c.weight(m.gate_up, {m.d, m.ff, m.E}, m.scale);
    auto down = c.weight(m.down, {m.ff, m.d, m.E}, m.down_scale);
    auto gb = c.f32({m.ff, m.E}, c.randn(m.ff * m.E, 2.0f)), ub = c.f32({m.ff, m.E}, c.randn(m.ff * m.E, 2.0f));
    auto db = c.f32({m.d, m.E}, c.randn(m.d * m.E));
    ExpertWeights on_cpu = experts(gate.cpu, up.cpu, down.cpu), on_gpu = experts(gate.gpu, up.gpu, down.gpu);
    if (m.biases) {
      on_cpu.gate_bias = gb.cpu, on_cpu.up_bias = ub.cpu, on_cpu.down_bias = db.cpu;
      on_gpu.gate_bias = gb.gpu, on_gpu.up_bias = ub.gpu, on_gpu.down_bias = db.gpu;
      on_cpu.alpha = on_gpu.alpha = 1.702f;
      on_cpu.clamp = on_gpu.clamp = 7.0f;
    }
    const std::string what = std::string(m.biases ? " biases, clamped swiglu " : " ") + tname(m.gate_up) + "/" +
                             tname(m.down) + " d=" + std::to_string(m.d) + " ff=" + std::to_string(m.ff);
    for (int64_t n : m.tokens) {
      const std::string sn = what + " n=" + std::to_string(n);
      auto mx = c.f32({m.d, n}, c.randn(m.d * n));
      auto l = c.randn(m.E * n, 2.0f);
      for (int64_t t = 0; t < n; ++t) l[t * m.E] += m.favoured;
      auto logits = c.f32({m.E, n}, l);
      auto ids = c.out({m.k, n}, DType::I32), wts = c.out({m.k, n});
      c.cpu().moe_route(logits.cpu, m.k, true, ids.cpu, wts.cpu);
      c.gpu().moe_route(logits.gpu, m.k, true, ids.gpu, wts.gpu);
      auto my = c.out({m.d, n});
      c.cpu().moe_ffn(mx.cpu, on_cpu, ids.cpu, wts.cpu, my.cpu);
      c.gpu().moe_ffn(mx.gpu, on_gpu, ids.gpu, wts.gpu, my.gpu);
      c.report("moe_ffn" + sn, c.rel_err(my), expert_tol(m.gate_up, n));
      if (n > 16) continue;  // up to 16 sequences decoding
      auto sg = c.f32({m.shared_ff, n}, c.randn(m.shared_ff * n));
      auto su = c.f32({m.shared_ff, n}, c.randn(m.shared_ff * n));
      auto shared_down = c.weight(DType::Q8_0, {m.shared_ff, m.d}, 0.09f);
      auto slogit = c.f32({1, n}, c.randn(n));
      for (int mode : {0, 1, 2}) {  // none, shared, gated shared
        const Backend::SharedExpert se_cpu{sg.cpu, su.cpu, shared_down.cpu, mode == 2 ? &slogit.cpu : nullptr};
        const Backend::SharedExpert se_gpu{sg.gpu, su.gpu, shared_down.gpu, mode == 2 ? &slogit.gpu : nullptr};
        my = c.out({m.d, n});
        c.cpu().moe_block(mx.cpu, logits.cpu, m.k, true, on_cpu, mode ? &se_cpu : nullptr, my.cpu);
        c.gpu().moe_block(mx.gpu, logits.gpu, m.k, true, on_gpu, mode ? &se_gpu : nullptr, my.gpu);
        const char* modes[] = {"", " shared", " gated shared"};
        c.report(std::string("moe_block") + modes[mode] + sn, c.rel_err(my), expert_tol(m.gate_up, n));
      }
    }
  }
}

// Unit-L2-norm rows, as the models feed the gated delta rule.
std::vector<float> unit_rows(Checker& c, int64_t rows, int64_t len) {
  auto v = c.randn(rows * len);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < len; ++i) s += v[r * len + i] * v[r * len + i];
    for (int64_t i = 0; i < len; ++i) v[r * len + i] /= static_cast<float>(std::sqrt(s));
  }
  return v;
}

// The chunked gated delta rule (n >= 16) at the flagship's shape: two calls in a row,
// the state carried from the first into the second, chunk edges inside both.
void check_delta_rule_prefill(Checker& c) {
  const int64_t H = 32, Hk = 16, dk = 128, dv = 128;
  auto st = c.f32({dv, dk, H}, c.randn(dv * dk * H, 0.1f));
  for (int64_t n : {16, 63, 64, 65, 200, 1000}) {
    double ey = 0;
    for (int64_t call = 0; call < 2; ++call) {
      auto q = c.f32({dk, Hk, n}, unit_rows(c, Hk * n, dk)), k = c.f32({dk, Hk, n}, unit_rows(c, Hk * n, dk));
      auto v = c.f32({dv, H, n}, c.randn(dv * H * n));
      auto g = c.randn(H * n, 1.0f, -2.5f), beta = c.randn(H * n);
      for (auto& x : g) x = -std::exp(x);  // log-decays, mostly -0.01 .. -0.6
      for (auto& x : beta) x = 1.0f / (1.0f + std::exp(-x));
      auto gt = c.f32({H, n}, g), bt = c.f32({H, n}, beta);
      auto y = c.out({dv, H, n});
      c.cpu().gated_delta_rule(q.cpu, k.cpu, v.cpu, gt.cpu, bt.cpu, st.cpu, y.cpu);
      c.gpu().gated_delta_rule(q.gpu, k.gpu, v.gpu, gt.gpu, bt.gpu, st.gpu, y.gpu);
      ey = std::max(ey, c.rel_err(y));
    }
    const std::string sn = " H=32 dk=128 n=" + std::to_string(n) + " x2";
    c.report("gated_delta_rule chunked y" + sn, ey, delta_rule_tol(n));
    c.report("gated_delta_rule chunked state" + sn, c.rel_err(st), delta_rule_tol(n));
  }
}

// Attention after kv_store: n new tokens after `past` cached ones in a cache of n_ctx,
// head sizes and GQA groups of the flagship and of other models. Prefill (n >=
// kAttentionPrefillMinTokens) takes the f16 tensor-core kernel, fewer tokens the
// split kernel, whose chunks follow the position: also checked in caches much longer
// than the position and at depths past its staged chunk size, and with sliding
// windows (Gemma 3's local layers) shorter and longer than a prompt chunk.
void check_attention_prefill(Checker& c) {
  struct Case {
    int64_t D, Hq, Hkv;
  };
  const auto run = [&](const Case& cs, int64_t past, int64_t n, int64_t n_ctx, int window = 0, bool sinks = false) {
    const int64_t D = cs.D, Hq = cs.Hq, Hkv = cs.Hkv;
    auto kc = c.f16({D, Hkv, n_ctx}, c.randn(D * Hkv * n_ctx)), vc = c.f16({D, Hkv, n_ctx}, c.randn(D * Hkv * n_ctx));
    auto kn = c.f32({D, Hkv, n}, c.randn(D * Hkv * n)), vn = c.f32({D, Hkv, n}, c.randn(D * Hkv * n));
    std::vector<int32_t> positions(n);
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(past + i);
    auto pos = c.i32({n}, positions);
    auto q = c.f32({D, Hq, n}, c.randn(D * Hq * n));
    auto y = c.out({D, Hq, n});
    c.cpu().kv_store(kn.cpu, vn.cpu, kc.cpu, vc.cpu, pos.cpu),
        c.gpu().kv_store(kn.gpu, vn.gpu, kc.gpu, vc.gpu, pos.gpu);
    const std::string name = "D=" + std::to_string(D) + " " + std::to_string(Hq) + "/" + std::to_string(Hkv) +
                             " past=" + std::to_string(past) + " n=" + std::to_string(n) +
                             " ctx=" + std::to_string(n_ctx) + (window ? " window=" + std::to_string(window) : "") +
                             (sinks ? " sinks" : "");
    c.report("kv_store " + name, c.mismatches_bytes(kc) + c.mismatches_bytes(vc), 0);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const double tol = n >= cuda::kAttentionPrefillMinTokens ? kAttentionF16Tol : 1e-4;
    // Sinks from well below the scores to well above them (GPT-OSS's learnt ones).
    auto sk = c.f32({Hq}, c.randn(Hq, 4.0f));
    c.cpu().attention(q.cpu, std::span(&kc.cpu, 1), std::span(&vc.cpu, 1), pos.cpu, scale, window,
                      sinks ? &sk.cpu : nullptr, y.cpu);
    c.gpu().attention(q.gpu, std::span(&kc.gpu, 1), std::span(&vc.gpu, 1), pos.gpu, scale, window,
                      sinks ? &sk.gpu : nullptr, y.gpu);
    c.report("attention " + name, c.rel_err(y), tol);
    if (sinks) return;
    auto gate = c.f32({D, Hq, n}, c.randn(D * Hq * n));
    y = c.out({D, Hq, n});
    c.cpu().attention_gated(q.cpu, std::span(&kc.cpu, 1), std::span(&vc.cpu, 1), pos.cpu, scale, window, gate.cpu,
                            y.cpu);
    c.gpu().attention_gated(q.gpu, std::span(&kc.gpu, 1), std::span(&vc.gpu, 1), pos.gpu, scale, window, gate.gpu,
                            y.gpu);
    c.report("attention_gated " + name, c.rel_err(y), tol);
  };
  for (const Case cs : {Case{256, 16, 2}, Case{128, 4, 4}, Case{64, 16, 2}, Case{128, 6, 2}, Case{32, 8, 2}})
    for (int64_t past : {0, 3000})
      for (int64_t n : {1, 5, 32, 100, 1000}) run(cs, past, n, past + n + 13);
  for (const Case cs : {Case{256, 16, 2}, Case{128, 6, 2}}) {
    run(cs, 3000, 1, 70000);
    run(cs, 3000, 5, 70000);
    run(cs, 40000, 1, 40020);
    run(cs, 40000, 3, 40020);
  }
  // Sliding windows: Gemma 3 270M's shape (window 512) and an odd window, from inside
  // the first window (past 0) to far past it, decode and prefill.
  for (const Case cs : {Case{256, 4, 1}, Case{128, 8, 2}})
    for (int window : {512, 37})
      for (int64_t past : {0, 300, 3000})
        for (int64_t n : {1, 5, 100, 1000}) run(cs, past, n, past + n + 13, window);
  // Attention sinks: GPT-OSS's heads (64 of 64 dims over 8 KV heads) on its global and
  // local (window 128) layers.
  for (int window : {0, 128})
    for (int64_t past : {0, 300})
      for (int64_t n : {1, 5, 100}) run(Case{64, 64, 8}, past, n, past + n + 13, window, true);

  // One token for each of several sequences (a batched decode step): each its own
  // caches at its own position (shallow and deep ones mixed; 20 sequences take two
  // launches), attention_prepare (the flagship's gated form) then attention_gated,
  // and the plain attention of an ungated model.
  for (const Case cs : {Case{256, 16, 2}, Case{128, 6, 2}})
    for (int64_t n : {2, 8, 20}) {
      const int64_t D = cs.D, Hq = cs.Hq, Hkv = cs.Hkv, n_ctx = 4100;
      const bool gated = D == 256;
      const int window = gated ? 0 : 100;  // the ungated model's as a local layer's
      std::vector<Checker::Both> kcs, vcs;
      std::vector<Tensor> kc_cpu, vc_cpu, kc_gpu, vc_gpu;
      std::vector<int32_t> positions(n);
      for (int64_t i = 0; i < n; ++i) {
        positions[i] = static_cast<int32_t>(i % 3 == 2 ? 4000 + i : 37 * i);
        kcs.push_back(c.f16({D, Hkv, n_ctx}, c.randn(D * Hkv * n_ctx)));
        vcs.push_back(c.f16({D, Hkv, n_ctx}, c.randn(D * Hkv * n_ctx)));
        kc_cpu.push_back(kcs.back().cpu), vc_cpu.push_back(vcs.back().cpu);
        kc_gpu.push_back(kcs.back().gpu), vc_gpu.push_back(vcs.back().gpu);
      }
      auto pos = c.i32({n}, positions);
      auto qp = c.f32({(gated ? 2 : 1) * D, Hq, n}, c.randn((gated ? 2 : 1) * D * Hq * n, 2.0f));
      auto k = c.f32({D, Hkv, n}, c.randn(D * Hkv * n, 2.0f)), v = c.f32({D, Hkv, n}, c.randn(D * Hkv * n));
      auto qw = c.f32({D}, c.randn(D, 0.1f, 1.0f)), kw = c.f32({D}, c.randn(D, 0.1f, 1.0f));
      auto q = c.out({D, Hq, n}), gate = c.out({D, Hq, n}), y = c.out({D, Hq, n});
      const RopeParams rope{64, 1e7f, true, 1.0f, nullptr};
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      c.cpu().attention_prepare(qp.cpu, k.cpu, v.cpu, {}, &qw.cpu, &kw.cpu, 1e-6f, pos.cpu, rope, q.cpu,
                                gated ? &gate.cpu : nullptr, kc_cpu, vc_cpu);
      c.gpu().attention_prepare(qp.gpu, k.gpu, v.gpu, {}, &qw.gpu, &kw.gpu, 1e-6f, pos.gpu, rope, q.gpu,
                                gated ? &gate.gpu : nullptr, kc_gpu, vc_gpu);
      double caches = 0;
      for (int64_t i = 0; i < n; ++i) caches = std::max({caches, c.rel_err(kcs[i]), c.rel_err(vcs[i])});
      const std::string name = "D=" + std::to_string(D) + " " + std::to_string(n) + " sequences";
      c.report("attention_prepare " + name + " q, caches", std::max(c.rel_err(q), caches), 1e-3);
      // Both backends attend over the same (CPU) caches and queries.
      for (int64_t i = 0; i < n; ++i) {
        c.gpu().write(kc_gpu[i], kc_cpu[i].data, kc_cpu[i].nbytes());
        c.gpu().write(vc_gpu[i], vc_cpu[i].data, vc_cpu[i].nbytes());
      }
      c.gpu().write(q.gpu, q.cpu.data, q.cpu.nbytes());
      if (gated) {
        c.cpu().attention_gated(q.cpu, kc_cpu, vc_cpu, pos.cpu, scale, window, gate.cpu, y.cpu);
        c.gpu().attention_gated(q.gpu, kc_gpu, vc_gpu, pos.gpu, scale, window, gate.gpu, y.gpu);
      } else {
        c.cpu().attention(q.cpu, kc_cpu, vc_cpu, pos.cpu, scale, window, nullptr, y.cpu);
        c.gpu().attention(q.gpu, kc_gpu, vc_gpu, pos.gpu, scale, window, nullptr, y.gpu);
      }
      c.report(std::string(gated ? "attention_gated " : "attention (window 100) ") + name, c.rel_err(y), 1e-4);
    }
}

// gated_delta_net_core against the CPU composition: the one-launch decode kernel
// (n <= 8; one or several value heads per key head, i.e. clusters of 1, 2, 4 and the
// flagship's shape), the composition for a conv kernel of 3 and for 33 tokens. Three
// steps in a row carry the conv state and the delta state over.
void check_gdn_core(Checker& c) {
  struct Shape {
    int64_t H, Hk, dk, dv, K;
  };
  const Shape shapes[] = {{8, 4, 64, 64, 4}, {4, 4, 128, 128, 4}, {32, 16, 128, 128, 4}, {8, 2, 64, 32, 4},
                          {6, 2, 32, 32, 3}};
  for (const Shape& sh : shapes)
    for (int64_t n : {1, 2, 3, 5, 8, 33}) {
      const std::string name = "gated_delta_net_core H=" + std::to_string(sh.H) + " Hk=" + std::to_string(sh.Hk) +
                               " dk=" + std::to_string(sh.dk) + " dv=" + std::to_string(sh.dv) +
                               " K=" + std::to_string(sh.K) + " n=" + std::to_string(n);
      const int64_t C = 2 * sh.Hk * sh.dk + sh.H * sh.dv;
      auto cw = c.f32({sh.K, C}, c.randn(sh.K * C, 0.5f));
      auto cs = c.f32({C, sh.K - 1}, c.randn(C * (sh.K - 1)));
      auto dt = c.f32({sh.H}, c.randn(sh.H, 0.5f, -2.0f)), an = c.f32({sh.H}, c.randn(sh.H, 0.3f, -1.0f));
      auto nw = c.f32({sh.dv}, c.randn(sh.dv, 0.1f, 1.0f));
      auto st = c.f32({sh.dv, sh.dk, sh.H}, c.randn(sh.dv * sh.dk * sh.H, 0.1f));
      double ey = 0;
      for (int step = 0; step < 3; ++step) {
        auto qkv = c.f32({C, n}, c.randn(C * n));
        auto a = c.f32({sh.H, n}, c.randn(sh.H * n)), b = c.f32({sh.H, n}, c.randn(sh.H * n));
        auto z = c.f32({sh.dv, sh.H, n}, c.randn(sh.dv * sh.H * n));
        auto y = c.out({sh.dv, sh.H, n});
        c.cpu().gated_delta_net_core(qkv.cpu, cw.cpu, std::span(&cs.cpu, 1), a.cpu, b.cpu, dt.cpu, an.cpu, 1e-6f,
                                     std::span(&st.cpu, 1), z.cpu, nw.cpu, 1e-6f, y.cpu);
        c.gpu().gated_delta_net_core(qkv.gpu, cw.gpu, std::span(&cs.gpu, 1), a.gpu, b.gpu, dt.gpu, an.gpu, 1e-6f,
                                     std::span(&st.gpu, 1), z.gpu, nw.gpu, 1e-6f, y.gpu);
        ey = std::max(ey, c.rel_err(y));
      }
      c.report(name + " y", ey, delta_rule_tol(n));
      c.report(name + " state", c.rel_err(st), delta_rule_tol(n));
      c.report(name + " conv state", c.rel_err(cs), 1e-4);
    }
  // One token for each of several sequences (a batched decode step; 70 sequences take
  // three launches of at most 32), three steps in a row.
  for (const Shape& sh : {shapes[1], shapes[2], shapes[4]})
    for (int64_t n : {2, 8, 70}) {
      const std::string name = "gated_delta_net_core " + std::to_string(n) + " sequences H=" + std::to_string(sh.H) +
                               " Hk=" + std::to_string(sh.Hk) + " K=" + std::to_string(sh.K);
      const int64_t C = 2 * sh.Hk * sh.dk + sh.H * sh.dv;
      auto cw = c.f32({sh.K, C}, c.randn(sh.K * C, 0.5f));
      auto dt = c.f32({sh.H}, c.randn(sh.H, 0.5f, -2.0f)), an = c.f32({sh.H}, c.randn(sh.H, 0.3f, -1.0f));
      auto nw = c.f32({sh.dv}, c.randn(sh.dv, 0.1f, 1.0f));
      std::vector<Checker::Both> cs, st;
      std::vector<Tensor> cs_cpu, cs_gpu, st_cpu, st_gpu;
      for (int64_t i = 0; i < n; ++i) {
        cs.push_back(c.f32({C, sh.K - 1}, c.randn(C * (sh.K - 1))));
        st.push_back(c.f32({sh.dv, sh.dk, sh.H}, c.randn(sh.dv * sh.dk * sh.H, 0.1f)));
        cs_cpu.push_back(cs.back().cpu), cs_gpu.push_back(cs.back().gpu);
        st_cpu.push_back(st.back().cpu), st_gpu.push_back(st.back().gpu);
      }
      double ey = 0, est = 0, ecs = 0;
      for (int step = 0; step < 3; ++step) {
        auto qkv = c.f32({C, n}, c.randn(C * n));
        auto a = c.f32({sh.H, n}, c.randn(sh.H * n)), b = c.f32({sh.H, n}, c.randn(sh.H * n));
        auto z = c.f32({sh.dv, sh.H, n}, c.randn(sh.dv * sh.H * n));
        auto y = c.out({sh.dv, sh.H, n});
        c.cpu().gated_delta_net_core(qkv.cpu, cw.cpu, cs_cpu, a.cpu, b.cpu, dt.cpu, an.cpu, 1e-6f, st_cpu, z.cpu,
                                     nw.cpu, 1e-6f, y.cpu);
        c.gpu().gated_delta_net_core(qkv.gpu, cw.gpu, cs_gpu, a.gpu, b.gpu, dt.gpu, an.gpu, 1e-6f, st_gpu, z.gpu,
                                     nw.gpu, 1e-6f, y.gpu);
        ey = std::max(ey, c.rel_err(y));
      }
      for (int64_t i = 0; i < n; ++i)
        est = std::max(est, c.rel_err(st[i])), ecs = std::max(ecs, c.rel_err(cs[i]));
      c.report(name + " y", ey, delta_rule_tol(1));
      c.report(name + " states", est, delta_rule_tol(1));
      c.report(name + " conv states", ecs, 1e-4);
    }
}

}  // namespace

void check_ops(Checker& c) {
  constexpr double kTol = 1e-4;
  check_attention_prefill(c);
  check_expert_variants(c);
  for (DType t : kWeightTypes) {
    const int64_t in = 512, out = 203;
    auto w = c.weight(t, {in, out}, 0.05f);
    for (int64_t n : kTokenCounts) {
      const auto y = c.matmul_fresh(w, n);
      c.report("matmul " + tname(t) + " n=" + std::to_string(n), c.rel_err(y), matmul_tol(w.gpu, n));
    }
    auto table = c.weight(t, {in, 50}, 1.0f);
    auto ids = c.i32({5}, {7, 0, 49, 7, 23});
    auto e = c.out({in, 5});
    c.cpu().embed(table.cpu, ids.cpu, e.cpu);
    c.gpu().embed(table.gpu, ids.gpu, e.gpu);
    c.report("embed " + tname(t), c.rel_err(e), 1e-6);
  }

  // Rows of whole 256-element groups: the staged (16-byte aligned) matvec path for
  // most types, for 1, 2, 3 and 5 tokens (the 1-, 2- and 5-token kernels; beyond the
  // first token the activations come from L1), and matmul_few for 6 and 8, and 12 and 16
  // in two n-tiles (Q8_0, Q4_K, Q5_K, Q6_K rows of up to 16 chunks: teams of 8 warps, 2,
  // 3 (two teams in a block of 6 warps), 6 with 2 chunks a warp; the rest take the
  // tiles). 2048: a row per warp, in a small and a large launch; 4096 and 6144: a team of
  // 2 or 4 warps per row (one of the 4 idle), and at one token matmul_few's two chunks a
  // warp (4096 x 2100) and its rows split in three (12288 x 2100: Qwen3-8B's down
  // projection); 3840: a team of 2 whose second warp has an odd count of groups (7; Q4_K /
  // Q5_K lanes take groups in pairs for one token); 18432: more chunks than a team has
  // warps, so one warp walks them all.
  //
  // Then rows the staged path copies from the 16-byte boundary below them: one chunk of
  // a type with 32-element blocks whose rows are not whole groups or not 16-byte
  // aligned (Gemma 3 270M: 640, SmolLM2: 576, Gemma 3 1B: 1152; 1984: the longest such
  // row), with as many rows as an LM head, and a weight beside others of its type in
  // one launch; and rows of several chunks copied so, whole chunks included
  // (gpt-oss-20b: 2880; 4096 + 32; 16384, the longest).
  const std::pair<int64_t, int64_t> staged_shapes[] = {
      {2048, 67},  {2048, 4103}, {4096, 300}, {3840, 70}, {6144, 130}, {18432, 40}, {640, 4103},
      {576, 70},   {1152, 300},  {1984, 33},  {96, 17},   {2880, 4103}, {4128, 70}, {16352, 9},
      {512, 40},   {768, 33},    {3072, 300}, {4096, 2100}, {12288, 2100}};
  for (DType t : kWeightTypes) {
    for (auto [in, out] : staged_shapes) {
      if (in % type_traits(t).block_elems != 0) continue;
      auto w = c.weight(t, {in, out}, 0.03f);
      for (int64_t n : {1, 2, 3, 5, 6, 8, 12, 16}) {
        const auto y = c.matmul_fresh(w, n);
        c.report("matmul " + tname(t) + " in=" + std::to_string(in) + " out=" + std::to_string(out) +
                     " n=" + std::to_string(n),
                 c.rel_err(y), matmul_tol(w.gpu, n));
      }
    }
  }
  // LM heads (kLmHeadMinRows rows or more) at one token: on the matvec's int8 lanes Q6_K
  // rows of 2048 (the flagship's) and Q8_0 rows that are not whole chunks (matmul_few takes
  // those that are), whose team members take parts as even as whole groups allow (640: one
  // warp; gpt-oss-20b's 2880: 1536 + 1344; 4128: three of 1280 and 288); on matmul_few Q8_0
  // rows of 2048.
  const std::pair<DType, int64_t> lm_heads[] = {
      {DType::Q6_K, 2048}, {DType::Q8_0, 640}, {DType::Q8_0, 2880}, {DType::Q8_0, 4128}, {DType::Q8_0, 2048}};
  for (auto [t, in] : lm_heads) {
    const int64_t out = cuda::kLmHeadMinRows + 101;
    auto w = c.weight(t, {in, out}, 0.03f);
    const auto y = c.matmul_fresh(w, 1);
    c.report("matmul " + tname(t) + " LM head in=" + std::to_string(in) + " out=" + std::to_string(out) + " n=1",
             c.rel_err(y), matmul_tol(w.gpu, 1));
  }
  // Q6_K rows that are not 16-byte multiples on matmul_few, each of a tile's rows copied
  // from its own 16-byte boundary (at one token on DP4A, words read at each row's shift):
  // Gemma 3 12B's attn_v (3840: 3150 bytes, split in three at one token), its down
  // projection (15360, split in five, two chunks a warp), Gemma 3 27B's rows (5376: 21
  // chunks, split in three of 7), and Gemma 3 4B's (2560: two chunks a warp, a team of
  // 5, from one token to two n-tiles).
  const std::tuple<int64_t, int64_t, std::vector<int64_t>> unaligned_q6k[] = {
      {3840, 2048, {1}}, {15360, 3840, {1}}, {5376, 2100, {1}}, {2560, 2100, {1, 6, 8, 12, 16}}};
  for (const auto& [in, out, tokens] : unaligned_q6k) {
    auto w = c.weight(DType::Q6_K, {in, out}, 0.03f);
    for (int64_t n : tokens) {
      const auto y = c.matmul_fresh(w, n);
      c.report("matmul q6_k unaligned rows in=" + std::to_string(in) + " out=" + std::to_string(out) +
                   " n=" + std::to_string(n),
               c.rel_err(y), matmul_tol(w.gpu, n));
    }
  }
  // Ragged teams at one token (two chunks a warp, one in the team's last): rows of 15
  // chunks (Gemma 3 12B's 3840: a team of 8, no split), 9 (2304: a team of 5), 21
  // (Gemma 3 27B's 5376: three tiles of a team of 4) and 5 (1280: a team of 3), in every
  // type matmul_few decodes.
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int64_t in : {3840, 2304, 5376, 1280}) {
      auto w = c.weight(t, {in, 2064}, 0.03f);
      const auto y = c.matmul_fresh(w, 1);
      c.report("matmul " + tname(t) + " ragged team in=" + std::to_string(in) + " out=2064 n=1", c.rel_err(y),
               matmul_tol(w.gpu, 1));
    }
  // A NaN in each token's x shows in every output, whatever form x takes inside the
  // kernel: the one-token matvec (Q6_K's rows of 2048 take x as int8 terms with a scale
  // per block of 32), matmul_few at one token (2048 rows: x as f16, clamped to its
  // range, or for Q4_K and Q5_K as int8 terms like the matvec's; rows of 3840 on ragged
  // teams, Q6_K's on DP4A at each row's shift) and the tiles of a batch.
  const std::tuple<int64_t, int64_t, int64_t> nan_shapes[] = {
      {2048, 67, 1}, {2048, 2048, 1}, {2048, 300, 64}, {3840, 2048, 1}};  // in, out, n
  for (DType t : kWeightTypes)
    for (auto [in, out, n] : nan_shapes) {
      auto w = c.weight(t, {in, out}, 0.03f);
      auto xv = c.randn(in * n);
      for (int64_t i = 0; i < n; ++i) xv[i * in + 1000] = NAN;
      auto x = c.f32({in, n}, xv);
      auto y = c.out({out, n});
      c.gpu().matmul(w.gpu, x.gpu, y.gpu);
      c.report("matmul " + tname(t) + " in=" + std::to_string(in) + " out=" + std::to_string(out) +
                   " n=" + std::to_string(n) + ", a NaN in x: finite outputs",
               c.finite_on_gpu(y), 0);
    }
  // Several weights of such rows in one launch: Gemma 3 270M's q, k, v, and gpt-oss-20b's
  // (Q8_0 rows of 2880) with an F32 weight (its router) beside them; the flagship's GDN
  // input projection (at one token its F32 weights ride along matmul_few's launch), its
  // router with the shared expert's gate and up (on the matvec at one token), and its
  // output projection (two chunks a warp); rows that matmul_few splits at one token, two
  // types in two launches, each weight with its partial sums; rows whose team is 5 warps
  // (Gemma 3 4B's 2560), so the F32 rows' blocks have 5 warps too; each weight held to its own bar.
  struct ManyCase {
    const char* name;
    int64_t in;
    std::vector<std::pair<DType, int64_t>> weights;  // type, rows
  };
  const ManyCase many_cases[] = {
      {"Gemma 3 270M's q, k, v", 640, {{DType::Q5_0, 1024}, {DType::Q5_0, 256}, {DType::Q8_0, 256}}},
      {"gpt-oss-20b's q, k, v, an F32 weight", 2880, {{DType::Q8_0, 4096}, {DType::Q8_0, 512}, {DType::F32, 32}}},
      {"the GDN input projection", 2048,
       {{DType::Q8_0, 8192}, {DType::Q8_0, 4096}, {DType::F32, 32}, {DType::F32, 32}}},
      {"a router and a shared expert", 2048,
       {{DType::F32, 256}, {DType::Q8_0, 512}, {DType::Q8_0, 512}, {DType::F32, 1}}},
      {"the GDN output projection", 4096, {{DType::Q8_0, 2048}}},
      {"rows split in three, an F32 weight beside them", 12288,
       {{DType::Q4_K, 2100}, {DType::Q6_K, 300}, {DType::F32, 16}}},
      {"teams of 5 (blocks of 5 warps), an F32 weight beside them", 2560, {{DType::Q4_K, 2100}, {DType::F32, 16}}}};
  for (const ManyCase& m : many_cases) {
    std::vector<Checker::Both> ws;
    for (auto [t, rows] : m.weights) ws.push_back(c.weight(t, {m.in, rows}, 0.03f));
    const std::vector<Tensor> ws_gpu = gpu_copies(ws);
    for (int64_t n : {1, 2, 5}) {
      const auto ys = c.matmul_many(ws, c.f32({m.in, n}, c.randn(m.in * n)));
      for (size_t i = 0; i < ys.size(); ++i)
        c.report(std::string("matmul_many (") + m.name + ") weight " + std::to_string(i) + " n=" + std::to_string(n),
                 c.rel_err(ys[i]), matmul_tol(ws_gpu, i, n));
    }
  }

  check_fused_ops(c);
  check_gdn_core(c);
  check_delta_rule_prefill(c);
  check_prefill_ops(c);

  for (int64_t n : kTokenCounts) {
    const std::string sn = " n=" + std::to_string(n);
    const int64_t d = 256;
    auto x = c.f32({d, n}, c.randn(d * n, 2.0f));
    auto w = c.f32({d}, c.randn(d, 0.1f, 1.0f));
    auto z = c.f32({d, n}, c.randn(d * n));
    auto y = c.out({d, n});
    c.cpu().rms_norm(x.cpu, &w.cpu, 1e-6f, y.cpu), c.gpu().rms_norm(x.gpu, &w.gpu, 1e-6f, y.gpu);
    c.report("rms_norm" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().rms_norm(x.cpu, nullptr, 1e-6f, y.cpu), c.gpu().rms_norm(x.gpu, nullptr, 1e-6f, y.gpu);
    c.report("rms_norm (no weight)" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().l2_norm(x.cpu, 1e-6f, y.cpu), c.gpu().l2_norm(x.gpu, 1e-6f, y.gpu);
    c.report("l2_norm" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().rms_norm_gated(x.cpu, w.cpu, z.cpu, 1e-6f, y.cpu),
        c.gpu().rms_norm_gated(x.gpu, w.gpu, z.gpu, 1e-6f, y.gpu);
    c.report("rms_norm_gated" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().add(x.cpu, z.cpu, y.cpu), c.gpu().add(x.gpu, z.gpu, y.gpu);
    c.report("add" + sn, c.rel_err(y), kTol);
    auto bias = c.f32({d}, c.randn(d));
    y = c.out({d, n});
    c.cpu().add(x.cpu, bias.cpu, y.cpu), c.gpu().add(x.gpu, bias.gpu, y.gpu);
    c.report("add (a bias per row)" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().swiglu(x.cpu, z.cpu, y.cpu), c.gpu().swiglu(x.gpu, z.gpu, y.gpu);
    c.report("swiglu" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().geglu(x.cpu, z.cpu, y.cpu), c.gpu().geglu(x.gpu, z.gpu, y.gpu);
    c.report("geglu" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().scale(x.cpu, 25.298f, y.cpu), c.gpu().scale(x.gpu, 25.298f, y.gpu);
    c.report("scale" + sn, c.rel_err(y), kTol);
    y = c.out({d, n});
    c.cpu().mul_sigmoid(x.cpu, z.cpu, y.cpu), c.gpu().mul_sigmoid(x.gpu, z.gpu, y.gpu);
    c.report("mul_sigmoid" + sn, c.rel_err(y), kTol);
    auto g1 = c.f32({1, n}, c.randn(n));
    y = c.out({d, n});
    c.cpu().mul_sigmoid(x.cpu, g1.cpu, y.cpu), c.gpu().mul_sigmoid(x.gpu, g1.gpu, y.gpu);
    c.report("mul_sigmoid (per row)" + sn, c.rel_err(y), kTol);
    auto ys = c.out({100, n});
    c.cpu().slice_cols(x.cpu, 37, 100, ys.cpu), c.gpu().slice_cols(x.gpu, 37, 100, ys.gpu);
    c.report("slice_cols" + sn, c.rel_err(ys), 0);
    auto am = c.out({n}, DType::I32);
    c.cpu().argmax(z.cpu, am.cpu), c.gpu().argmax(z.gpu, am.gpu);
    c.report("argmax" + sn, c.mismatches_i32(am), 0);

    // RoPE: partial NEOX with freq factors, and the interleaved form.
    const int64_t hd = 64, heads = 3;
    std::vector<int32_t> positions(n);
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(1000 + 37 * i);
    auto pos = c.i32({n}, positions);
    auto ff = c.f32({16}, c.randn(16, 0.2f, 1.0f));
    for (bool neox : {true, false}) {
      auto r = c.f32({hd, heads, n}, c.randn(hd * heads * n));
      RopeParams cp{32, 1e6f, neox, 1.0f, &ff.cpu}, gp{32, 1e6f, neox, 1.0f, &ff.gpu};
      c.cpu().rope(r.cpu, pos.cpu, cp), c.gpu().rope(r.gpu, pos.gpu, gp);
      c.report(std::string("rope ") + (neox ? "neox" : "normal") + sn, c.rel_err(r), kTol);
    }

    // Gated DeltaNet pieces.
    const int64_t H = 8, Hk = 4, dk = 64, dv = 64, C = 320, K = 4;
    auto a = c.f32({H, n}, c.randn(H * n)), b = c.f32({H, n}, c.randn(H * n));
    auto dt = c.f32({H}, c.randn(H, 0.5f, -2.0f)), an = c.f32({H}, c.randn(H, 0.3f, -1.0f));
    auto g = c.out({H, n}), beta = c.out({H, n});
    c.cpu().gdn_gates(a.cpu, b.cpu, dt.cpu, an.cpu, g.cpu, beta.cpu);
    c.gpu().gdn_gates(a.gpu, b.gpu, dt.gpu, an.gpu, g.gpu, beta.gpu);
    c.report("gdn_gates g" + sn, c.rel_err(g), kTol);
    c.report("gdn_gates beta" + sn, c.rel_err(beta), kTol);
    auto cx = c.f32({C, n}, c.randn(C * n)), cw = c.f32({K, C}, c.randn(K * C, 0.5f));
    auto cs = c.f32({C, K - 1}, c.randn(C * (K - 1)));
    auto cy = c.out({C, n});
    c.cpu().causal_conv_silu(cx.cpu, cw.cpu, cs.cpu, cy.cpu), c.gpu().causal_conv_silu(cx.gpu, cw.gpu, cs.gpu, cy.gpu);
    c.report("causal_conv_silu y" + sn, c.rel_err(cy), kTol);
    c.report("causal_conv_silu state" + sn, c.rel_err(cs), kTol);
    auto q = c.f32({dk, Hk, n}, unit_rows(c, Hk * n, dk)), k = c.f32({dk, Hk, n}, unit_rows(c, Hk * n, dk));
    auto v = c.f32({dv, H, n}, c.randn(dv * H * n));
    auto st = c.f32({dv, dk, H}, c.randn(dv * dk * H, 0.1f));
    auto dy = c.out({dv, H, n});
    c.cpu().gated_delta_rule(q.cpu, k.cpu, v.cpu, g.cpu, beta.cpu, st.cpu, dy.cpu);
    c.gpu().gated_delta_rule(q.gpu, k.gpu, v.gpu, g.gpu, beta.gpu, st.gpu, dy.gpu);
    c.report("gated_delta_rule y" + sn, c.rel_err(dy), delta_rule_tol(n));
    c.report("gated_delta_rule state" + sn, c.rel_err(st), delta_rule_tol(n));

    // MoE: routing (expert counts on both sides of route_warp's 256), then the experts
    // in the benchmark file's types and two others.
    for (const int64_t re : {48, 100, 256, 512}) {
      auto rl = c.f32({re, n}, c.randn(re * n, 2.0f));
      auto rids = c.out({8, n}, DType::I32), rw = c.out({8, n});
      c.cpu().moe_route(rl.cpu, 8, true, rids.cpu, rw.cpu), c.gpu().moe_route(rl.gpu, 8, true, rids.gpu, rw.gpu);
      const std::string of = " of " + std::to_string(re);
      c.report("moe_route ids" + of + sn, c.mismatches_i32(rids), 0);
      c.report("moe_route weights" + of + sn, c.rel_err(rw), kTol);
    }
    const int64_t E = 16, kk = 4, dm = 256, ffe = 256;
    auto logits = c.f32({E, n}, c.randn(E * n, 2.0f));
    auto ids = c.out({kk, n}, DType::I32), wts = c.out({kk, n});
    c.cpu().moe_route(logits.cpu, kk, true, ids.cpu, wts.cpu),
        c.gpu().moe_route(logits.gpu, kk, true, ids.gpu, wts.gpu);
    c.report("moe_route ids" + sn, c.mismatches_i32(ids), 0);
    c.report("moe_route weights" + sn, c.rel_err(wts), kTol);
    auto wts_plain = c.out({kk, n});
    c.cpu().moe_route(logits.cpu, kk, false, ids.cpu, wts_plain.cpu);
    c.gpu().moe_route(logits.gpu, kk, false, ids.gpu, wts_plain.gpu);
    c.report("moe_route weights (no renorm)" + sn, c.rel_err(wts_plain), kTol);
    // Every weight type as gate/up and as down.
    const std::pair<DType, DType> expert_types[] = {
        {DType::Q4_K, DType::Q5_K},   {DType::Q8_0, DType::Q6_K},   {DType::MXFP4, DType::F16},
        {DType::IQ4_XS, DType::Q4_0}, {DType::BF16, DType::Q2_K},   {DType::Q3_K, DType::IQ4_NL},
        {DType::Q5_0, DType::Q5_1},   {DType::F32, DType::Q4_1},    {DType::Q5_K, DType::Q4_K},
        {DType::Q6_K, DType::Q8_0},   {DType::F16, DType::MXFP4},   {DType::Q4_0, DType::IQ4_XS},
        {DType::Q2_K, DType::BF16},   {DType::IQ4_NL, DType::Q3_K}, {DType::Q5_1, DType::Q5_0},
        {DType::Q4_1, DType::F32}};
    for (auto [gu, dn] : expert_types) {
      if (n > cuda::kExpertDecodeMaxTokens && gu != DType::Q4_K) continue;  // batches: check_prefill_ops has them all
      auto gate = c.weight(gu, {dm, ffe, E}, 0.06f), up = c.weight(gu, {dm, ffe, E}, 0.06f);
      auto down = c.weight(dn, {ffe, dm, E}, 0.09f);
      auto mx = c.f32({dm, n}, c.randn(dm * n));
      auto my = c.out({dm, n});
      c.cpu().moe_ffn(mx.cpu, experts(gate.cpu, up.cpu, down.cpu), ids.cpu, wts.cpu, my.cpu);
      c.gpu().moe_ffn(mx.gpu, experts(gate.gpu, up.gpu, down.gpu), ids.gpu, wts.gpu, my.gpu);
      c.report("moe_ffn " + tname(gu) + "/" + tname(dn) + sn, c.rel_err(my), expert_tol(gu, n));
    }
  }
}

}  // namespace zinc::cli::gpu_check

#endif  // ZINC_WITH_CUDA
