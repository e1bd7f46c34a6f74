// gpu-check's whole-model checks: a tiny model of an architecture written by synth,
// run on the CPU backend, the CUDA backend with graphs and without: prefill, decode,
// 2048 decoded tokens, generate() with the sampler chain, repeat runs bitwise equal,
// the prefix cache's store and restore.
#ifdef ZINC_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "cli/gpu_check/checker.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/perplexity.h"
#include "runtime/prefix_cache.h"

namespace zinc::cli::gpu_check {
namespace {

// ---- whole models -----------------------------------------------------------------

struct LogitStats {
  double top1 = 0, kl = 0;
};
// A row agrees when the GPU's top token is the reference's, or is tied with it in
// the reference to within kNearTie logits: random tiny models have many near ties,
// which rounding (bf16 prefill paths, a router's top-k) may resolve either way.
constexpr double kNearTie = 0.05;
LogitStats compare_logits(const std::vector<float>& ref, const std::vector<float>& got, int64_t V) {
  LogitStats s;
  const int64_t rows = static_cast<int64_t>(ref.size()) / V;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = ref.data() + r * V;
    const float* b = got.data() + r * V;
    const float* ref_top = std::max_element(a, a + V);
    s.top1 += *ref_top - a[std::max_element(b, b + V) - b] <= kNearTie;
    const double ma = *std::max_element(a, a + V), mb = *std::max_element(b, b + V);
    double za = 0, zb = 0;
    for (int64_t i = 0; i < V; ++i) za += std::exp(a[i] - ma), zb += std::exp(b[i] - mb);
    double kl = 0;
    for (int64_t i = 0; i < V; ++i) {
      const double pa = std::exp(a[i] - ma) / za, lpa = a[i] - ma - std::log(za), lpb = b[i] - mb - std::log(zb);
      kl += pa * (lpa - lpb);
    }
    s.kl += kl;
  }
  s.top1 /= static_cast<double>(rows);
  s.kl /= static_cast<double>(rows);
  return s;
}

void append(std::vector<float>& to, const std::vector<float>& rows) { to.insert(to.end(), rows.begin(), rows.end()); }

std::vector<float> read_logits(Backend& be, const Tensor& t) {
  std::vector<float> v(t.n_elements());
  be.read(t, v.data(), t.nbytes());
  return v;
}

}  // namespace

void check_model(Checker& c, const std::string& arch, const std::string& model_preset, const std::string& dir) {
  synth::Options opt;
  opt.arch = arch;
  opt.preset = model_preset;
  const std::string preset = arch + " " + model_preset;  // the name in reports
  const std::string path = dir + "/gpu-check-" + arch + "-" + model_preset + ".gguf";
  synth::write(synth::make_spec(opt), 7, path, 8);
  auto file = gguf::GgufFile::open(path);
  auto cpu = make_cpu_backend(0);
  auto gpu = make_cuda_backend(0);
  auto eager = make_cuda_backend(CudaOptions{0, false});
  auto m_cpu = load_model(*file, *cpu), m_gpu = load_model(*file, *gpu), m_eager = load_model(*file, *eager);
  const int64_t V = m_cpu->n_vocab();
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = pick(rng);
    return t;
  };
  auto check_stats = [&](const std::string& what, const LogitStats& s) {
    c.report(preset + " " + what + " top-1 disagreement", 1.0 - s.top1, 0.01);
    c.report(preset + " " + what + " mean KL", s.kl, 1e-3);
  };

  // Prefill of 40 tokens, logits at every position.
  const auto prompt = tokens(40);
  SequenceState sc = m_cpu->new_sequence(4096), sg = m_gpu->new_sequence(4096);
  const auto ref = read_logits(*cpu, m_cpu->forward(sc, prompt, 40));
  const auto got = read_logits(*gpu, m_gpu->forward(sg, prompt, 40));
  check_stats("prefill 40", compare_logits(ref, got, V));

  // Prompt lengths around the chunked delta rule's 64 tokens and the token tiles:
  // prefill against the CPU's prefill and against this backend's own token-by-token
  // decode of the same prompt, then 4 tokens decoded on from both states. Each length
  // is judged over at least kMinRows rows (several prompts when short): the bar is a
  // rate, and in an MoE model a router whose k-th and (k+1)-th experts are tied to
  // within rounding (gaps of 3e-4..3e-3 logits in the tiny models) legitimately flips
  // one row, which out of 64 rows alone would read as 1.6%.
  std::mt19937 length_rng(5);  // its own stream: the checks below keep their tokens
  auto length_tokens = [&, pick_len = pick](int64_t n) mutable {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = pick_len(length_rng);
    return t;
  };
  constexpr int64_t kMinRows = 1000;
  for (int64_t n : {1, 7, 63, 64, 65, 1000}) {
    std::vector<float> lc, lg, lt, after_prefill, after_steps;
    for (int64_t rep = 0; rep * n < kMinRows; ++rep) {
      const auto p = length_tokens(n), next = length_tokens(4);
      SequenceState pc = m_cpu->new_sequence(n + 8), pg = m_gpu->new_sequence(n + 8), tg = m_gpu->new_sequence(n + 8);
      append(lc, read_logits(*cpu, m_cpu->forward(pc, p, n)));
      append(lg, read_logits(*gpu, m_gpu->forward(pg, p, n)));
      for (int64_t i = 0; i < n; ++i)
        append(lt, read_logits(*gpu, m_gpu->forward(tg, std::span<const int32_t>(&p[i], 1), 1)));
      for (const int32_t t : next) {
        const std::span<const int32_t> one(&t, 1);
        append(after_prefill, read_logits(*gpu, m_gpu->forward(pg, one, 1)));
        append(after_steps, read_logits(*gpu, m_gpu->forward(tg, one, 1)));
      }
    }
    const std::string sn = std::to_string(n);
    check_stats("prefill " + sn + " vs CPU prefill", compare_logits(lc, lg, V));
    check_stats("prefill " + sn + " vs token-by-token decode", compare_logits(lt, lg, V));
    check_stats("4 decoded after prefill " + sn + " vs after token-by-token",
                compare_logits(after_steps, after_prefill, V));
  }

  // Then 2048 decoded tokens (teacher-forced with the same random tokens), checked
  // against the CPU at every step, judged per window of 256 steps (so the bar holds all
  // along, at a resolution a single router near-tie cannot break; see kMinRows), and
  // against the eager (graph-free) GPU backend bitwise at every step.
  SequenceState se = m_eager->new_sequence(4096);
  read_logits(*eager, m_eager->forward(se, prompt, 1));
  const auto stream = tokens(2048);
  std::vector<float> ref_window, got_window;
  double graph_mismatch = 0;
  for (int64_t i = 0; i < 2048; ++i) {
    const std::span<const int32_t> one(&stream[i], 1);
    const auto lg = read_logits(*gpu, m_gpu->forward(sg, one, 1));
    const auto le = read_logits(*eager, m_eager->forward(se, one, 1));
    graph_mismatch += std::memcmp(lg.data(), le.data(), lg.size() * sizeof(float)) != 0;
    const auto lc = read_logits(*cpu, m_cpu->forward(sc, one, 1));
    append(ref_window, lc);
    append(got_window, lg);
    if (i % 256 == 255) {
      check_stats("decode steps " + std::to_string(i - 254) + "-" + std::to_string(i + 1),
                  compare_logits(ref_window, got_window, V));
      ref_window.clear(), got_window.clear();
    }
  }
  c.report(preset + " decode: graph replay != eager (steps)", graph_mismatch, 0);

  // Several sequences in one pass (the serving engine's batches): a 40-token prompt
  // chunk, a 7-token one and 8 decoding sequences, against the CPU backend; then 8
  // batched decode steps of all ten. Twelve rounds, so that the rate is judged over
  // 1080 rows (see kMinRows).
  {
    std::vector<float> ref_b, got_b;
    for (int round = 0; round < 12; ++round) {
      std::vector<SequenceState> cs, gs;
      std::vector<std::vector<int32_t>> toks;
      for (int i = 0; i < 10; ++i) {
        cs.push_back(m_cpu->new_sequence(64));
        gs.push_back(m_gpu->new_sequence(64));
        toks.push_back(tokens(i == 0 ? 40 : i == 1 ? 7 : 1));
      }
      for (int step = 0; step < 9; ++step) {
        std::vector<SequenceChunk> cc, gc;
        for (int i = 0; i < 10; ++i) {
          if (step > 0) toks[i] = tokens(1);
          cc.push_back({&cs[i], toks[i], 1});
          gc.push_back({&gs[i], toks[i], 1});
        }
        append(ref_b, read_logits(*cpu, m_cpu->forward_batch(cc)));
        append(got_b, read_logits(*gpu, m_gpu->forward_batch(gc)));
      }
    }
    check_stats("batched 10 sequences", compare_logits(ref_b, got_b, V));
  }

  // Determinism: the same prefill + decode twice gives bitwise equal logits.
  std::vector<float> runs[2];
  for (auto& r : runs) {
    SequenceState s = m_gpu->new_sequence(256);
    r = read_logits(*gpu, m_gpu->forward(s, prompt, 40));
    for (int i = 0; i < 16; ++i)
      append(r, read_logits(*gpu, m_gpu->forward(s, std::span<const int32_t>(&stream[i], 1), 1)));
  }
  c.report(preset + " repeated runs bitwise equal", std::memcmp(runs[0].data(), runs[1].data(),
                                                               runs[0].size() * sizeof(float)) != 0, 0);

  // Greedy decoding with each token fed back on the device and read one step behind
  // (greedy_on_device, zinc bench's tg loop) picks the same tokens as reading each one
  // before the next step.
  {
    constexpr int kSteps = 64;
    std::vector<int32_t> host_fed;
    SequenceState s1 = m_gpu->new_sequence(256), s2 = m_gpu->new_sequence(256);
    m_gpu->forward(s1, prompt, 1);
    m_gpu->forward(s2, prompt, 1);
    Tensor id = gpu->alloc_persistent(DType::I32, {1}), next = gpu->alloc_persistent(DType::I32, {1});
    int32_t token = stream[0];
    for (int i = 0; i < kSteps; ++i) {
      gpu->argmax(m_gpu->forward(s1, std::span<const int32_t>(&token, 1), 1), id);
      gpu->read(id, &token, sizeof token);
      host_fed.push_back(token);
    }
    gpu->write(next, &stream[0], sizeof(int32_t));
    const std::vector<int32_t> device_fed = greedy_on_device(*m_gpu, *gpu, s2, next, kSteps);
    int mismatches = 0;
    for (int i = 0; i < kSteps; ++i) mismatches += host_fed[i] != device_fed[i];
    c.report(preset + " greedy, tokens fed back on the device != read back each step (tokens)", mismatches, 0);
  }

  // The tokens of a loop that reads every logits row and samples it on the host.
  const auto host_loop = [&](const SamplerParams& sp, int steps) {
    Sampler host(sp);
    SequenceState s = m_gpu->new_sequence(256);
    std::vector<int32_t> tokens;
    for (int32_t t : prompt) host.accept(t);
    Tensor l = m_gpu->forward(s, prompt, 1);
    for (int i = 0; i < steps; ++i) {
      tokens.push_back(host.sample(read_logits(*gpu, l)));
      host.accept(tokens.back());
      l = m_gpu->forward(s, std::span<const int32_t>(&tokens.back(), 1), 1);
    }
    return tokens;
  };
  const auto mismatches = [](const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
    int bad = got.size() == want.size() ? 0 : static_cast<int>(want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) bad += got[i] != want[i];
    return bad;
  };
  const auto all = [](int32_t) { return true; };

  // The generation loop (zinc run / chat) draws on the device with its steps run one
  // ahead (greedy: the argmax; sampling: sample_rows, a penalty window ending with the
  // token still on the device): the tokens of the host loop with the same seed. Top-k,
  // top-k with penalties, greedy, greedy with penalties; top-k off (min-p, and top-p
  // with penalties) one step at a time, the rows the device declines drawn by the host.
  constexpr int kSteps = 48;
  for (const char* setting : {"top-k", "top-k + penalties", "greedy", "greedy + penalties", "top-k off, min-p",
                              "top-k off, top-p + penalties"}) {
    SamplerParams sp;  // top-k 40, top-p 0.95, min-p 0.05
    sp.temperature = setting[0] == 'g' ? 0.0f : 1.0f;
    sp.seed = 5;
    if (std::strstr(setting, "off")) sp.top_k = 0, sp.min_p = std::strstr(setting, "min-p") ? 0.1f : 0.0f;
    if (std::strstr(setting, "penalties")) {
      sp.repeat_penalty = 1.3f, sp.frequency_penalty = 0.2f, sp.presence_penalty = 0.5f;
      sp.penalty_last_n = 16;
    }
    Sampler drawn(sp);
    SequenceState s = m_gpu->new_sequence(256);
    GenerateOptions opt;
    opt.max_tokens = kSteps;
    const GenerationResult r = generate(*m_gpu, *gpu, s, prompt, drawn, opt, all);
    c.report(preset + " generate(), " + setting + " drawn on the device != sampled on the host (tokens)",
             mismatches(r.tokens, host_loop(sp, kSteps)), 0);
  }

  // A greedy reply ended by a token the step after it already absorbed (its read still
  // in flight when generate() returns).
  {
    SamplerParams greedy;
    greedy.temperature = 0;
    const std::vector<int32_t> want = host_loop(greedy, kSteps);
    Sampler sampler(greedy);
    SequenceState s = m_gpu->new_sequence(256);
    GenerateOptions opt;
    opt.max_tokens = kSteps;
    opt.eog_ids = {want[kSteps / 2]};
    const size_t first = std::find(want.begin(), want.end(), want[kSteps / 2]) - want.begin();
    const GenerationResult e = generate(*m_gpu, *gpu, s, prompt, sampler, opt, all);
    const bool as_documented = e.stop == StopReason::EndOfGeneration && e.end_absorbed &&
                               e.tokens == std::vector<int32_t>(want.begin(), want.begin() + first) &&
                               s.n_past == static_cast<int64_t>(prompt.size() + first + 1);
    c.report(preset + " generate(), ended by a token the sequence absorbed: not as documented", !as_documented, 0);
  }

  // The prefix cache on the device (the serving engine's): blocks stored while their
  // copies still queue behind the passes that wrote them, and restored into a fresh
  // sequence at once, continue bitwise as the original does. Blocks of 2 tokens make
  // small row copies, which the backend might otherwise take from host memory at once.
  for (const int64_t block : {2, 16}) {
    PrefixCache cache(block, size_t{64} << 20);
    const auto p = tokens(4 * block), next = tokens(8);
    SequenceState original = m_gpu->new_sequence(256), restored = m_gpu->new_sequence(256);
    for (int64_t at = 0; at < 4 * block; at += block) {
      m_gpu->forward(original,
                     std::span<const int32_t>(p).subspan(static_cast<size_t>(at), static_cast<size_t>(block)), 1);
      cache.store(*gpu, std::span<const int32_t>(p).first(static_cast<size_t>(at + block)), original, true);
    }
    const int64_t resumed = cache.restore(*gpu, p, 4 * block, restored);
    const auto want = read_logits(*gpu, m_gpu->forward(original, next, 8));
    const auto got = read_logits(*gpu, m_gpu->forward(restored, next, 8));
    c.report(preset + " prefix cache, blocks of " + std::to_string(block) + ", restored at once != the original",
             resumed != 4 * block || std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0, 0);
  }

  // Scoring a prompt in the serving engine (RequestOptions::prompt_logprobs) on the
  // device: 300 tokens in pieces of kScoredRows, the top-1 alone from token_logprobs
  // and the top-3 from rows read to the host, beside each other in one engine. Both
  // see the same logits, so their logprobs may differ only by the log-sum-exp's order
  // of addition, and their best tokens not at all. Beside them a request sampled on the
  // device (top-k, its draw parameters written for the scored rows too) runs to its
  // length. (Not to the same tokens as alone: in a batch the device's logits move in
  // their last bits, and on two MoE models a draw moved, session 60.)
  {
    EngineOptions eo;
    eo.n_parallel = 3, eo.n_ctx = 512, eo.prefix_block = 256, eo.step_tokens = 400, eo.prefix_cache_bytes = 0;
    const auto p = tokens(300), q = tokens(40);
    const auto draw = [&](Engine& e, std::promise<FinishReason>& finished, std::vector<int32_t>& out) {
      RequestOptions r;  // top-k 40 by default
      r.prompt = q;
      r.max_tokens = 6;
      r.sampling.temperature = 0.9f, r.sampling.seed = 77;
      RequestCallbacks cb;
      cb.on_token = [&out](const TokenEvent& ev) { return out.push_back(ev.token), true; };
      cb.on_finish = [&finished](FinishReason why, const RequestStats&, const std::string&) {
        finished.set_value(why);
      };
      e.submit(std::move(r), std::move(cb));
    };
    std::vector<int32_t> beside;
    Engine engine(*m_gpu, *gpu, eo);
    std::promise<FinishReason> sampled_done;
    draw(engine, sampled_done, beside);
    std::vector<std::vector<TokenEvent>> events(2);
    std::vector<std::promise<void>> done(2);
    for (int i = 0; i < 2; ++i) {
      RequestOptions r;
      r.prompt = p;
      r.max_tokens = 0;
      r.prompt_logprobs = true;
      r.top_logprobs = i == 0 ? 1 : 3;
      RequestCallbacks cb;
      cb.on_finish = [&done, i](FinishReason, const RequestStats&, const std::string&) { done[i].set_value(); };
      cb.on_prompt = [&events, i](std::span<const TokenEvent> e) {
        events[i].insert(events[i].end(), e.begin(), e.end());
      };
      engine.submit(std::move(r), std::move(cb));
    }
    for (auto& d : done) d.get_future().wait();
    const FinishReason sampled_end = sampled_done.get_future().get();
    c.report(preset + " engine scoring: a top-k request drawn on the device beside it did not run to its length",
             sampled_end != FinishReason::Length || beside.size() != 6, 0);
    double worst = events[0].size() == p.size() - 1 && events[1].size() == p.size() - 1 ? 0 : INFINITY;
    int best_differs = 0;
    for (size_t q = 0; q < std::min(events[0].size(), events[1].size()); ++q) {
      const TokenEvent &a = events[0][q], &b = events[1][q];
      worst = std::max({worst, std::fabs(static_cast<double>(a.logprob) - b.logprob),
                        std::fabs(static_cast<double>(a.top.at(0).logprob) - b.top.at(0).logprob)});
      best_differs += a.top.at(0).id != b.top.at(0).id;
    }
    c.report(preset + " engine scoring: token_logprobs' top-1 vs the rows read to the host (max |logprob diff|)",
             worst, 1e-5);
    c.report(preset + " engine scoring: token_logprobs' best tokens != the host's (rows)", best_differs, 0);
  }

  // zinc perplexity's measure (runtime/perplexity.h) on the device: 4 chunks of 64 in
  // pieces of 7 (pieces before, across and after the scored half; rows of one) against
  // the same pieces' whole logits read from the device and log-softmaxed on the host.
  // The reference asks the LM head for more rows, which moves the logits' last bits
  // (session 60: up to 6.4e-6 of the sum); how the device's logits differ from the
  // CPU's is judged above.
  {
    constexpr int64_t kCtx = 64, kPiece = 7;
    constexpr int32_t kBos = 1;
    const auto stream = tokens(4 * kCtx + 9);
    double want = 0;
    SequenceState s = m_gpu->new_sequence(kCtx);
    for (int64_t at = 0; at + kCtx <= static_cast<int64_t>(stream.size()); at += kCtx) {
      std::vector<int32_t> chunk(stream.begin() + at, stream.begin() + at + kCtx);
      chunk[0] = kBos;
      s.reset(*gpu);
      for (int64_t a = 0; a < kCtx; a += kPiece) {
        const int64_t b = std::min(kCtx, a + kPiece);
        const auto piece = std::span<const int32_t>(chunk).subspan(static_cast<size_t>(a), static_cast<size_t>(b - a));
        const auto rows = read_logits(*gpu, m_gpu->forward(s, piece, b - a));
        for (int64_t j = std::max(a, kCtx / 2); j < std::min(b, kCtx - 1); ++j) {
          const std::span<const float> row(rows.data() + (j - a) * V, static_cast<size_t>(V));
          want -= static_cast<float>(row[stream[at + j + 1]] - row_log_z(row));
        }
      }
    }
    PerplexityOptions po;
    po.n_ctx = kCtx, po.bos = kBos, po.piece = kPiece;
    const Perplexity got = perplexity(*m_gpu, *gpu, stream, po);
    c.report(preset + " perplexity, 4 chunks of 64 in pieces of 7, vs the rows on the host (relative nll)",
             std::fabs(got.nll / want - 1), 3e-5);
  }

  // Sliding windows' KV rings (blocks::kv_cache_rows) wrapped many times: a 300-token
  // prefill attending in pieces of 4 queries (the decode kernel), of 40 (the prefill
  // kernel, then a last piece of 20 on the decode kernel) and of 100, then 64 decoded
  // tokens, against the CPU backend keeping every position; three rounds, so each
  // rate is judged over 1092 rows (see kMinRows). Architectures without windows keep
  // whole caches and run the same.
  {
    constexpr int64_t kPieces[] = {4, 40, 100};
    std::vector<float> ref, got[3];
    for (int round = 0; round < 3; ++round) {
      const auto p = tokens(300), next = tokens(64);
      const auto run = [&](Model& m, Backend& be, int64_t piece, std::vector<float>& out) {
        SequenceState s = m.new_sequence(512, piece);
        append(out, read_logits(be, m.forward(s, p, 300)));
        for (const int32_t t : next) append(out, read_logits(be, m.forward(s, std::span<const int32_t>(&t, 1), 1)));
      };
      run(*m_cpu, *cpu, 512, ref);
      for (int i = 0; i < 3; ++i) run(*m_gpu, *gpu, kPieces[i], got[i]);
    }
    for (int i = 0; i < 3; ++i)
      check_stats("300 + 64 tokens, window rings in pieces of " + std::to_string(kPieces[i]) +
                      " vs whole caches on the CPU",
                  compare_logits(ref, got[i], V));
  }
  std::filesystem::remove(path);
}

}  // namespace zinc::cli::gpu_check

#endif  // ZINC_WITH_CUDA
