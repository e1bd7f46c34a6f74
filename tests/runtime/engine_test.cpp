// The serving engine on tiny random models (CPU): a batched forward equals the same
// sequences run one by one; requests served together produce exactly what each
// produces alone (same seeds); the prefix cache restores state that continues
// exactly as if the prefix had been computed; cancel and the queue limit behave.
#include "runtime/engine.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/model_test_util.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"

namespace zinc {
namespace {

struct Loaded {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded load(const char* arch, const char* preset) {
  synth::Options opt;
  opt.arch = arch;
  opt.preset = preset;
  Loaded l;
  l.file = gguf::GgufFile::open(test::synth_model(opt, 21));
  l.backend = make_cpu_backend(2);
  l.model = load_model(*l.file, *l.backend);
  return l;
}

std::vector<int32_t> make_prompt(const Model& m, int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 131 + salt * 17 + 3) % m.n_vocab()));
  return p;
}

std::vector<float> read_all(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  be.read(t, v.data(), v.size() * sizeof(float));
  return v;
}

class BatchedForward : public ::testing::TestWithParam<const char*> {};

// Three sequences at different depths in one pass: their logits are bitwise the
// ones each gets alone, and so is the next step.
TEST_P(BatchedForward, EqualsSequencesOneByOne) {
  const std::string arch = GetParam();
  Loaded l = load(arch.c_str(), "tiny");
  Model& m = *l.model;
  const std::vector<std::vector<int32_t>> prompts = {make_prompt(m, 5, 1), make_prompt(m, 23, 2),
                                                     make_prompt(m, 1, 3)};
  const int64_t V = m.n_vocab();
  std::vector<std::vector<float>> alone;
  std::vector<SequenceState> solo;
  for (const auto& p : prompts) {
    solo.push_back(m.new_sequence(64));
    alone.push_back(read_all(*l.backend, m.forward(solo.back(), p, 2 > p.size() ? 1 : 2)));
  }
  std::vector<SequenceState> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back(m.new_sequence(64));
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < prompts.size(); ++i)
    chunks.push_back({&seqs[i], prompts[i], prompts[i].size() >= 2 ? 2 : 1});
  const std::vector<float> together = read_all(*l.backend, m.forward_batch(chunks));
  size_t row = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<float> part(together.begin() + static_cast<std::ptrdiff_t>(row * V),
                                  together.begin() + static_cast<std::ptrdiff_t>((row + chunks[i].n_out) * V));
    EXPECT_EQ(part, alone[i]) << "sequence " << i;
    EXPECT_EQ(seqs[i].n_past, static_cast<int64_t>(prompts[i].size()));
    row += static_cast<size_t>(chunks[i].n_out);
  }
  // One decode step for all three; the middle one wants no logits.
  const int32_t next[3] = {7, 8, 9};
  std::vector<SequenceChunk> step = {{&seqs[0], std::span(&next[0], 1), 1},
                                     {&seqs[1], std::span(&next[1], 1), 0},
                                     {&seqs[2], std::span(&next[2], 1), 1}};
  const std::vector<float> batched = read_all(*l.backend, m.forward_batch(step));
  ASSERT_EQ(batched.size(), static_cast<size_t>(2 * V));
  const auto a0 = read_all(*l.backend, m.forward(solo[0], std::span(&next[0], 1), 1));
  m.forward(solo[1], std::span(&next[1], 1), 1);
  const auto a2 = read_all(*l.backend, m.forward(solo[2], std::span(&next[2], 1), 1));
  EXPECT_EQ(std::vector<float>(batched.begin(), batched.begin() + V), a0);
  EXPECT_EQ(std::vector<float>(batched.begin() + V, batched.end()), a2);
  // No logits wanted at all: an empty result, state still advanced.
  const int32_t more = 11;
  const SequenceChunk quiet{&seqs[1], std::span(&more, 1), 0};
  EXPECT_TRUE(m.forward_batch(std::span(&quiet, 1)).empty());
  EXPECT_EQ(seqs[1].n_past, static_cast<int64_t>(prompts[1].size()) + 2);
}

TEST_P(BatchedForward, RejectsASequenceTwice) {
  Loaded l = load(GetParam(), "tiny");
  SequenceState s = l.model->new_sequence(16);
  const int32_t t = 1;
  std::vector<SequenceChunk> chunks = {{&s, std::span(&t, 1), 1}, {&s, std::span(&t, 1), 1}};
  EXPECT_THROW(l.model->forward_batch(chunks), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Archs, BatchedForward, ::testing::Values("qwen35moe", "llama"));

// ---- the engine ---------------------------------------------------------------------

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<TokenEvent> prompt;  // on_prompt's events
  FinishReason reason = FinishReason::Error;
  RequestStats stats;
};

// Submits and collects; wait() blocks until on_finish.
class Collector {
 public:
  RequestCallbacks callbacks(int stop_after = -1) {
    return {[this, stop_after](const TokenEvent& ev) {
              std::lock_guard lock(mu_);
              out_.tokens.push_back(ev.token);
              out_.logprobs.push_back(ev.logprob);
              return stop_after < 0 || static_cast<int>(out_.tokens.size()) < stop_after;
            },
            [this](FinishReason r, const RequestStats& s, const std::string&) {
              std::lock_guard lock(mu_);
              out_.reason = r;
              out_.stats = s;
              done_ = true;
              cv_.notify_all();
            },
            [this](std::span<const TokenEvent> events) {
              std::lock_guard lock(mu_);
              EXPECT_TRUE(out_.tokens.empty()) << "a prompt's logprobs after a generated token";
              out_.prompt.insert(out_.prompt.end(), events.begin(), events.end());
            }};
  }
  Outcome wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return out_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Outcome out_;
};

RequestOptions request(const std::vector<int32_t>& prompt, uint64_t seed, int64_t max_tokens) {
  RequestOptions r;
  r.prompt = prompt;
  r.sampling.temperature = seed == 0 ? 0.0f : 0.9f;
  r.sampling.seed = seed;
  r.sampling.top_k = 0;
  r.sampling.min_p = 0;
  r.sampling.top_p = 1;
  r.max_tokens = max_tokens;
  r.top_logprobs = 0;
  return r;
}

// Requests make_request(0 .. count - 1) through one engine, each waited for before the
// next is submitted when one_at_a_time; their outcomes in order.
template <class MakeRequest>
std::vector<Outcome> serve(Model& m, Backend& be, const EngineOptions& opt, size_t count,
                           const MakeRequest& make_request, bool one_at_a_time) {
  Engine engine(m, be, opt);
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<Outcome> out;
  for (size_t i = 0; i < count; ++i) {
    cs.push_back(std::make_unique<Collector>());
    engine.submit(make_request(i), cs.back()->callbacks());
    if (one_at_a_time) out.push_back(cs.back()->wait());
  }
  if (!one_at_a_time)
    for (auto& c : cs) out.push_back(c->wait());
  return out;
}

// The engine's options of a test: slots, positions per slot, prefix-cache block,
// tokens per step and cache size (0: none), with a recurrent checkpoint at every block.
EngineOptions engine_options(int n_parallel, int64_t n_ctx, int64_t prefix_block, int64_t step_tokens,
                             size_t cache_bytes) {
  EngineOptions opt;
  opt.n_parallel = n_parallel;
  opt.n_ctx = n_ctx;
  opt.prefix_block = prefix_block;
  opt.step_tokens = step_tokens;
  opt.prefix_cache_bytes = cache_bytes;
  opt.prefix_checkpoint_tokens = prefix_block;
  return opt;
}

class EngineTest : public ::testing::TestWithParam<const char*> {};

// Eight requests (greedy and seeded sampling, prompts of 1 to 70 tokens) through
// 4 slots at once give exactly what each gives alone, with and without the cache.
TEST_P(EngineTest, ConcurrentEqualsOneAtATime) {
  Loaded l = load(GetParam(), "tiny");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(make_prompt(*l.model, 1 + i * 9, i));
  EngineOptions opt = engine_options(4, 128, 16, 40, 0);
  const auto mixed = [&](size_t i) { return request(prompts[i], i % 3 == 0 ? 0 : 100 + i, 12); };
  const auto alone = serve(*l.model, *l.backend, opt, prompts.size(), mixed, true);
  const auto together = serve(*l.model, *l.backend, opt, prompts.size(), mixed, false);
  opt.prefix_cache_bytes = 64 << 20;
  const auto cached = serve(*l.model, *l.backend, opt, prompts.size(), mixed, false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(alone[i].reason, FinishReason::Length);
    EXPECT_EQ(alone[i].tokens.size(), 12u);
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].logprobs, alone[i].logprobs) << "request " << i;
    EXPECT_EQ(cached[i].tokens, alone[i].tokens) << "request " << i;
  }
  // The generation loop on a fresh sequence agrees with the engine (greedy request 0).
  SequenceState seq = l.model->new_sequence(128);
  Sampler sampler(request(prompts[0], 0, 12).sampling);
  GenerateOptions g;
  g.max_tokens = 12;
  auto r = generate(*l.model, *l.backend, seq, prompts[0], sampler, g, [](int32_t) { return true; });
  EXPECT_EQ(r.tokens, alone[0].tokens);
}

// The warm-up (a prompt over several blocks, decode steps; longer than the context
// allows, it is cut to fit) leaves nothing behind: no cache entries, no counted
// requests, and every request then gets what it gets from an engine without one.
TEST_P(EngineTest, WarmUpLeavesNoTrace) {
  Loaded l = load(GetParam(), "tiny");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(make_prompt(*l.model, 5 + i * 13, i));
  const auto mixed = [&](size_t i) { return request(prompts[i], i % 2 == 0 ? 0 : 200 + i, 10); };
  EngineOptions opt = engine_options(2, 96, 16, 40, 64 << 20);
  const auto cold = serve(*l.model, *l.backend, opt, prompts.size(), mixed, false);
  for (int64_t warm : {int64_t{40}, int64_t{1000}}) {
    opt.warm_up_tokens = warm;
    {
      Engine engine(*l.model, *l.backend, opt);
      const EngineMetrics m = engine.metrics();
      EXPECT_GT(m.warm_up_seconds, 0);
      EXPECT_EQ(m.requests_total, 0);
      EXPECT_EQ(m.generated_tokens_total, 0);
      EXPECT_EQ(m.prefix_cache_entries, 0);
    }
    const auto warmed = serve(*l.model, *l.backend, opt, prompts.size(), mixed, false);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(warmed[i].tokens, cold[i].tokens) << "warm-up " << warm << ", request " << i;
      EXPECT_EQ(warmed[i].logprobs, cold[i].logprobs) << "warm-up " << warm << ", request " << i;
      EXPECT_EQ(warmed[i].stats.cached_tokens, cold[i].stats.cached_tokens);
    }
  }
  opt.warm_up_tokens = -1;
  EXPECT_THROW(Engine(*l.model, *l.backend, opt), std::invalid_argument);
}

// A second turn that repeats the first turn's prompt and reply restores whole
// blocks from the cache, prefills only the rest, and says the same as without it.
TEST_P(EngineTest, SecondTurnReusesThePrefix) {
  Loaded l = load(GetParam(), "tiny");
  const auto first = make_prompt(*l.model, 50, 7);
  EngineOptions opt = engine_options(2, 160, 16, 32, 0);
  opt.prefix_checkpoint_tokens = 64;  // recurrent states at 48 (the prompt's last whole block) and 64 only
  for (bool use_cache : {false, true}) {
    opt.prefix_cache_bytes = use_cache ? (64 << 20) : 0;
    Engine engine(*l.model, *l.backend, opt);
    Collector c1;
    engine.submit(request(first, 5, 20), c1.callbacks());
    const Outcome o1 = c1.wait();
    std::vector<int32_t> second = first;
    second.insert(second.end(), o1.tokens.begin(), o1.tokens.end());
    for (int i = 0; i < 9; ++i) second.push_back(static_cast<int32_t>(i + 40));
    Collector c2;
    engine.submit(request(second, 6, 20), c2.callbacks());
    const Outcome o2 = c2.wait();
    static std::vector<int32_t> reference;
    if (!use_cache) {
      reference = o2.tokens;
      EXPECT_EQ(o2.stats.cached_tokens, 0);
    } else {
      EXPECT_EQ(o2.tokens, reference);
      // 79 prompt tokens: blocks up to 64 come from the cache (the first turn's
      // prompt and its reply were stored as they were absorbed; a block completed
      // while decoding has a checkpoint at 64).
      EXPECT_EQ(o2.stats.cached_tokens, 64);
      EXPECT_GT(engine.metrics().prefix_cache_entries, 0);
      // Recurrent checkpoints: only the hybrid has recurrent layers.
      EXPECT_EQ(engine.metrics().prefix_cache_checkpoints > 0, std::string(GetParam()) == "qwen35moe");
    }
  }
}

// Top-k sampled requests (with or without penalties; no DRY or logprobs) have their
// tokens drawn on the backend, with steps run ahead when the whole batch draws there
// (a penalty window then ends with the token still on the backend), and mixed into
// batches with greedy requests and ones the host samples (logprobs, DRY) or that the
// backend may decline (top-k off, 7 and 8, whose declined rows the host draws): each
// request gets the tokens of a host loop that reads every row and samples it with
// the request's seed, alone or together.
TEST_P(EngineTest, TopKSamplingOnTheBackendEqualsTheHostChain) {
  Loaded l = load(GetParam(), "tiny");
  Model& m = *l.model;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 9; ++i) prompts.push_back(make_prompt(m, 2 + i * 7 % 50, i + 30));
  const auto make = [&](size_t i) {
    RequestOptions r;
    r.prompt = prompts[i];
    r.max_tokens = 10;
    r.sampling.temperature = i == 0 ? 0.0f : 1.5f;
    r.sampling.seed = 40 + i;
    if (i == 4) r.top_logprobs = 0;
    if (i == 5) {  // a window of 4 slides within the 10 tokens
      // Negative penalties: recent tokens are boosted, so the draws depend on the window.
      r.sampling.repeat_penalty = 0.5f, r.sampling.frequency_penalty = -1.0f, r.sampling.presence_penalty = -2.0f;
      r.sampling.penalty_last_n = 4;
    }
    if (i == 6) r.sampling.dry_multiplier = 0.8f;
    if (i == 7) r.sampling.top_k = 0, r.sampling.min_p = 0.1f;
    if (i == 8) r.sampling.top_k = 0, r.sampling.min_p = 0, r.sampling.repeat_penalty = 1.3f;
    return r;
  };
  const int64_t block = 16;
  EngineOptions opt = engine_options(4, 96, block, 40, 0);
  const auto alone = serve(m, *l.backend, opt, prompts.size(), make, true);
  const auto together = serve(m, *l.backend, opt, prompts.size(), make, false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestOptions r = make(i);
    Sampler host(r.sampling);
    EXPECT_EQ(host.draws_from_row(m.n_vocab()), i != 6) << "request " << i;  // 4: logprobs keep it on the host
    for (int32_t t : r.prompt) host.accept(t);
    // The prompt in the engine's chunks (block-aligned), then one token a step.
    SequenceState seq = m.new_sequence(96);
    Tensor logits;
    for (size_t at = 0; at < r.prompt.size(); at += block)
      logits = m.forward(seq, std::span(r.prompt).subspan(at, std::min<size_t>(block, r.prompt.size() - at)), 1);
    std::vector<int32_t> want;
    for (int k = 0; k < 10; ++k) {
      std::vector<float> row = read_all(*l.backend, logits);
      want.push_back(host.sample(row));
      host.accept(want.back());
      logits = m.forward(seq, std::span(want).last(1), 1);
    }
    EXPECT_EQ(alone[i].tokens, want) << "request " << i;
    EXPECT_EQ(together[i].tokens, want) << "request " << i;
  }
}

// Stops, cancels, the queue limit and the context limit, on the host chain and with
// greedy requests running one step ahead (no logprobs).
TEST_P(EngineTest, StopCancelAndQueueLimit) {
  Loaded l = load(GetParam(), "tiny");
  EngineOptions opt = engine_options(1, 64, 16, 17, EngineOptions{}.prefix_cache_bytes);
  opt.max_queue = 1;
  const auto prompt = make_prompt(*l.model, 4, 1);
  for (const bool ahead : {false, true}) {
    SCOPED_TRACE(ahead ? "greedy, one step ahead" : "host chain");
    Engine engine(*l.model, *l.backend, opt);
    const auto req = [&](const std::vector<int32_t>& p, int64_t max_tokens) {
      RequestOptions r = request(p, 0, max_tokens);
      r.top_logprobs = ahead ? -1 : 0;
      return r;
    };
    // on_token returning false stops at once.
    Collector stopped;
    engine.submit(req(prompt, 30), stopped.callbacks(3));
    Outcome o = stopped.wait();
    EXPECT_EQ(o.reason, FinishReason::Stopped);
    EXPECT_EQ(o.tokens.size(), 3u);
    // A long request holds the only slot until cancelled; the next one waits, the
    // one after that is refused.
    std::promise<void> started;
    std::atomic<bool> first{true};
    Collector busy;
    RequestCallbacks cb = busy.callbacks();
    auto inner = cb.on_token;
    cb.on_token = [&, inner](const TokenEvent& ev) {
      if (first.exchange(false)) started.set_value();
      return inner(ev);
    };
    const uint64_t id = engine.submit(req(prompt, 1000000), cb);
    started.get_future().wait();
    Collector queued;
    engine.submit(req(prompt, 2), queued.callbacks());
    Collector refused;
    EXPECT_THROW(engine.submit(req(prompt, 2), refused.callbacks()), QueueFull);
    engine.cancel(id);
    EXPECT_EQ(busy.wait().reason, FinishReason::Cancelled);
    const Outcome q = queued.wait();
    EXPECT_EQ(q.reason, FinishReason::Length);
    ASSERT_EQ(o.tokens.size(), 3u);
    EXPECT_EQ(q.tokens, std::vector<int32_t>(o.tokens.begin(), o.tokens.begin() + 2));  // the same greedy start
    // max_tokens far beyond the context ends when prompt and reply fill it.
    Collector huge;
    engine.submit(req(prompt, 1000000000), huge.callbacks());
    o = huge.wait();
    EXPECT_EQ(o.reason, FinishReason::Length);
    EXPECT_EQ(static_cast<int64_t>(o.tokens.size()), 64 - 4);
    // Bad prompts are refused up front.
    EXPECT_THROW(engine.submit(req({}, 2), refused.callbacks()), std::invalid_argument);
    EXPECT_THROW(engine.submit(req(make_prompt(*l.model, 64, 2), 2), refused.callbacks()), std::invalid_argument);
    EXPECT_THROW(engine.submit(req({static_cast<int32_t>(l.model->n_vocab())}, 2), refused.callbacks()),
                 std::invalid_argument);
  }
}

// Plain greedy requests (no penalties, processors or logprobs) take the argmax on
// the backend and read one id per token; they say exactly what the sampler chain says
// from the full logits row, also beside a request that needs its row (seeded sampling).
TEST_P(EngineTest, GreedyOnTheBackendEqualsTheHostChain) {
  Loaded l = load(GetParam(), "tiny");
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(make_prompt(*l.model, 3 + i * 11, i + 5));
  EngineOptions opt = engine_options(4, 96, 16, 40, 0);
  const auto run = [&](bool host_rows) {
    const auto make = [&](size_t i) {
      RequestOptions r = request(prompts[i], i == 3 ? 42 : 0, 10);  // request 3 samples
      r.top_logprobs = host_rows || i == 3 ? 0 : -1;                 // logprobs need the row
      return r;
    };
    return serve(*l.model, *l.backend, opt, prompts.size(), make, false);
  };
  const auto host = run(true), mixed = run(false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(mixed[i].reason, FinishReason::Length);
    EXPECT_EQ(mixed[i].tokens.size(), 10u);
    EXPECT_EQ(mixed[i].tokens, host[i].tokens) << "request " << i;
  }
}

// When every active sequence decodes greedily the engine queues each step before it
// reads the step before (the tokens fed on the backend): the tokens and the ends
// (length, context, end of generation, a stop, max_tokens 1) are exactly those of
// the same requests on the host chain, with requests joining as slots free up, and
// the states stored in the prefix cache while running ahead serve a second turn.
TEST_P(EngineTest, GreedyAheadEqualsTheHostChain) {
  Loaded l = load(GetParam(), "tiny");
  EngineOptions opt = engine_options(3, 48, 4, 16, 64 << 20);
  struct Spec {
    int prompt, max_tokens, stop_after;
    bool eog;
  };
  const Spec specs[] = {
      {5, 30, -1, false}, {9, 100, -1, false}, {3, 20, -1, true}, {7, 20, 4, false}, {6, 1, -1, false}};
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(make_prompt(*l.model, specs[i].prompt, 30 + i));
  int32_t eog = -1;
  const auto run = [&](bool host_chain) {
    Engine engine(*l.model, *l.backend, opt);
    std::vector<std::unique_ptr<Collector>> cs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOptions r = request(prompts[i], 0, specs[i].max_tokens);
      r.top_logprobs = host_chain ? 0 : -1;  // logprobs need the row: the host chain, one step at a time
      if (specs[i].eog && eog >= 0) r.eog_ids = {eog};
      cs.push_back(std::make_unique<Collector>());
      engine.submit(std::move(r), cs.back()->callbacks(specs[i].stop_after));
    }
    std::vector<Outcome> out;
    for (auto& c : cs) out.push_back(c->wait());
    // A second turn over the first request's prompt and reply.
    std::vector<int32_t> second = prompts[0];
    second.insert(second.end(), out[0].tokens.begin(), out[0].tokens.end());
    second.push_back(7);
    RequestOptions r = request(second, 0, 8);
    r.top_logprobs = host_chain ? 0 : -1;
    Collector c;
    engine.submit(std::move(r), c.callbacks());
    out.push_back(c.wait());
    return out;
  };
  eog = run(true)[2].tokens.at(5);  // a token request 2 says
  const auto host = run(true), ahead = run(false);
  ASSERT_EQ(host.size(), ahead.size());
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(ahead[i].tokens, host[i].tokens) << "request " << i;
    EXPECT_EQ(ahead[i].reason, host[i].reason) << "request " << i;
  }
  EXPECT_EQ(host[0].reason, FinishReason::Length);
  EXPECT_EQ(host[0].tokens.size(), 30u);
  EXPECT_EQ(host[1].tokens.size(), 48u - 9u);  // prompt and reply fill the context
  EXPECT_EQ(host[2].reason, FinishReason::EndOfGeneration);
  EXPECT_EQ(host[3].reason, FinishReason::Stopped);
  EXPECT_EQ(host[3].tokens.size(), 4u);
  EXPECT_EQ(host[4].tokens.size(), 1u);
  EXPECT_GE(ahead[5].stats.cached_tokens, 32);  // whole blocks of the first turn's prompt and reply
}

// A burst counts free slots as room: n_parallel + max_queue requests submitted at
// once are all accepted, one more is refused.
TEST_P(EngineTest, BurstFillsSlotsBeforeTheQueue) {
  Loaded l = load(GetParam(), "tiny");
  EngineOptions opt = engine_options(4, 64, 16, 20, EngineOptions{}.prefix_cache_bytes);
  opt.max_queue = 2;
  Engine engine(*l.model, *l.backend, opt);
  const auto prompt = make_prompt(*l.model, 4, 1);
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    cs.push_back(std::make_unique<Collector>());
    ids.push_back(engine.submit(request(prompt, 0, 1000), cs.back()->callbacks()));
  }
  Collector extra;
  EXPECT_THROW(engine.submit(request(prompt, 0, 1000), extra.callbacks()), QueueFull);
  for (uint64_t id : ids) engine.cancel(id);
  for (auto& c : cs) c->wait();
}

// A scoring request (prompt_logprobs) reports every prompt token after the first with
// the log-softmax of the position before it, as one forward pass over the whole prompt
// gives them, though the engine computes it in pieces of kScoredRows beside another
// request; it then replies as an ordinary request does, or ends at once with max_tokens
// 0. It neither stores into the prefix cache nor resumes from it. Its top-1 alone comes
// from the backend's token_logprobs, with the bits of the host's log-softmax.
TEST_P(EngineTest, ScoringReportsEveryPromptToken) {
  Loaded l = load(GetParam(), "tiny");
  Model& m = *l.model;
  const auto prompt = make_prompt(m, 300, 9);  // a whole block of 256 and pieces of 128, 128 and 44
  const int64_t n = static_cast<int64_t>(prompt.size()), V = m.n_vocab();
  SequenceState seq = m.new_sequence(400);
  const std::vector<float> logits = read_all(*l.backend, m.forward(seq, prompt, n));
  EngineOptions opt = engine_options(2, 400, 256, 260, 64 << 20);
  Engine engine(m, *l.backend, opt);
  RequestOptions scored = request(prompt, 0, 4);
  scored.prompt_logprobs = true;
  scored.top_logprobs = 3;
  // Beside it, a request sampled on the backend (top-k, its draw parameters written
  // for every output row of the step, the scored rows' included).
  const auto sampled = [&] {
    RequestOptions r = request(make_prompt(m, 150, 4), 77, 6);
    r.sampling.top_k = 40;
    r.top_logprobs = -1;
    return r;
  };
  Collector c, beside;
  engine.submit(sampled(), beside.callbacks());
  engine.submit(std::move(scored), c.callbacks());
  const Outcome o = c.wait();
  const Outcome b = beside.wait();
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_EQ(b.reason, FinishReason::Length);
  EXPECT_EQ(b.tokens, serve(m, *l.backend, opt, 1, [&](size_t) { return sampled(); }, true)[0].tokens);
  EXPECT_EQ(engine.metrics().prefix_cache_entries, 0) << "the scored prompt stored its block";
  ASSERT_EQ(static_cast<int64_t>(o.prompt.size()), n - 1);
  for (int64_t q = 0; q + 1 < n; ++q) {
    const float* row = logits.data() + q * V;
    const float max = *std::max_element(row, row + V);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    const double log_z = max + std::log(sum);
    const TokenEvent& ev = o.prompt[static_cast<size_t>(q)];
    ASSERT_EQ(ev.token, prompt[static_cast<size_t>(q + 1)]);
    EXPECT_NEAR(ev.logprob, row[ev.token] - log_z, 1e-4) << "position " << q;
    ASSERT_EQ(ev.top.size(), 3u);
    EXPECT_EQ(ev.top[0].id, std::max_element(row, row + V) - row) << "position " << q;
    EXPECT_NEAR(ev.top[0].logprob, max - log_z, 1e-4);
    EXPECT_GE(ev.top[0].logprob, ev.top[1].logprob);
    EXPECT_GE(ev.top[1].logprob, ev.top[2].logprob);
  }
  Collector plain;
  engine.submit(request(prompt, 0, 4), plain.callbacks());
  const Outcome reference = plain.wait();
  EXPECT_EQ(o.tokens, reference.tokens);
  EXPECT_GT(engine.metrics().prefix_cache_entries, 0);  // the plain request's block

  RequestOptions alone = request(prompt, 0, 0);  // the top-1 only: computed by Backend::token_logprobs
  alone.prompt_logprobs = true;
  alone.top_logprobs = 1;
  Collector c0;
  engine.submit(std::move(alone), c0.callbacks());
  const Outcome o0 = c0.wait();
  EXPECT_EQ(o0.reason, FinishReason::Length);
  EXPECT_EQ(o0.stats.cached_tokens, 0);
  EXPECT_TRUE(o0.tokens.empty());
  ASSERT_EQ(o0.prompt.size(), o.prompt.size());
  for (size_t q = 0; q < o0.prompt.size(); ++q) {
    EXPECT_EQ(o0.prompt[q].logprob, o.prompt[q].logprob) << "position " << q;
    ASSERT_EQ(o0.prompt[q].top.size(), 1u);
    EXPECT_EQ(o0.prompt[q].top[0].id, o.prompt[q].top[0].id) << "position " << q;
    EXPECT_EQ(o0.prompt[q].top[0].logprob, o.prompt[q].top[0].logprob) << "position " << q;
  }
  Collector refused;
  EXPECT_THROW(engine.submit(request(prompt, 0, 0), refused.callbacks()), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Archs, EngineTest, ::testing::Values("qwen35moe", "llama"));

// The cache alone: restores exactly what was stored, resumes only at checkpoints, and
// under its budget gives up checkpoints before KV rows and useless leaves first.
TEST(PrefixCacheTest, RestoreAndEvict) {
  Loaded l = load("qwen35moe", "tiny");
  Model& m = *l.model;
  Backend& be = *l.backend;
  const auto tokens = make_prompt(m, 48, 9);
  // Stores prompt's blocks [0, blocks) into `cache`, with a checkpoint where `at` says.
  const auto fill = [&](PrefixCache& cache, const std::vector<int32_t>& prompt, int blocks,
                        const std::function<bool(int)>& at) {
    SequenceState s = m.new_sequence(64);
    for (int b = 0; b < blocks; ++b) {
      m.forward(s, std::span(prompt).subspan(static_cast<size_t>(b * 16), 16), 1);
      cache.store(be, std::span(prompt).first(static_cast<size_t>((b + 1) * 16)), s, at(b + 1));
    }
  };
  // What a sequence restored to n_past gives for the next 16 tokens (which it then
  // holds), against the same prompt fed in blocks from the start (the stored states'
  // pieces: the same arithmetic).
  const auto continues_exactly = [&](const std::vector<int32_t>& prompt, SequenceState& restored) {
    SequenceState fresh = m.new_sequence(64);
    for (int64_t at = 0; at < restored.n_past; at += 16)
      m.forward(fresh, std::span(prompt).subspan(static_cast<size_t>(at), 16), 1);
    const auto next = std::span(prompt).subspan(static_cast<size_t>(restored.n_past), 16);
    EXPECT_EQ(read_all(be, m.forward(restored, next, 1)), read_all(be, m.forward(fresh, next, 1)));
  };

  PrefixCache cache(16, size_t{1} << 30);
  fill(cache, tokens, 3, [](int) { return true; });
  EXPECT_EQ(cache.entries(), 3);
  EXPECT_EQ(cache.checkpoints(), 3);
  SequenceState b = m.new_sequence(64);
  EXPECT_EQ(cache.restore(be, tokens, 47, b), 32);  // 47 allows two whole blocks
  EXPECT_EQ(b.n_past, 32);
  continues_exactly(tokens, b);
  auto other = tokens;  // a different second block: only the first is reused
  other[20] += 1;
  EXPECT_EQ(cache.restore(be, other, 47, b), 16);

  // Checkpoints at blocks 1 and 3 only: a prefix of two blocks resumes after one.
  PrefixCache sparse(16, size_t{1} << 30);
  fill(sparse, tokens, 3, [](int block) { return block != 2; });
  EXPECT_EQ(sparse.entries(), 3);
  EXPECT_EQ(sparse.checkpoints(), 2);
  EXPECT_EQ(sparse.restore(be, tokens, 47, b), 16);
  continues_exactly(tokens, b);
  // b has absorbed block 2 again: stored with its checkpoint, the cached block now resumes.
  ASSERT_EQ(b.n_past, 32);
  sparse.store(be, std::span(tokens).first(32), b, true);
  EXPECT_EQ(sparse.entries(), 3);
  EXPECT_EQ(sparse.checkpoints(), 3);
  EXPECT_EQ(sparse.restore(be, tokens, 47, b), 32);
  continues_exactly(tokens, b);
  const size_t kv = [&] {  // a node's KV rows, without a checkpoint
    PrefixCache one(16, size_t{1} << 30);
    fill(one, tokens, 1, [](int) { return false; });
    return one.bytes();
  }();
  const size_t checkpoint = cache.bytes() / 3 - kv;
  ASSERT_GT(kv, 0u);
  ASSERT_GT(checkpoint, 0u);
  EXPECT_EQ(sparse.bytes(), 3 * kv + 3 * checkpoint);

  // Room for three blocks' KV rows and one checkpoint: each new checkpoint takes the
  // units of the one before, whose blocks then resume nothing.
  PrefixCache chain(16, 3 * kv + checkpoint);
  fill(chain, tokens, 3, [](int) { return true; });
  EXPECT_EQ(chain.entries(), 3);
  EXPECT_EQ(chain.checkpoints(), 1);
  EXPECT_EQ(chain.restore(be, tokens, 47, b), 0);
  EXPECT_EQ(chain.restore(be, tokens, 48, b), 48);
  SequenceState whole = m.new_sequence(64);  // restored whole: the next tokens as after the full prompt
  for (size_t at = 0; at < 48; at += 16) m.forward(whole, std::span(tokens).subspan(at, 16), 1);
  const std::vector<int32_t> more{3, 1, 4, 1};
  EXPECT_EQ(read_all(be, m.forward(b, more, 1)), read_all(be, m.forward(whole, more, 1)));

  // Room for two blocks and one checkpoint: a second prompt takes every unit of the
  // first (its checkpoint, then its leaves, which resume nothing), and restores
  // exactly from reused units.
  PrefixCache two(16, 2 * kv + checkpoint);
  const auto second = make_prompt(m, 48, 11);
  fill(two, tokens, 2, [](int) { return true; });
  fill(two, second, 2, [](int) { return true; });
  EXPECT_EQ(two.entries(), 2);
  EXPECT_EQ(two.checkpoints(), 1);
  SequenceState e = m.new_sequence(64);
  EXPECT_EQ(two.restore(be, tokens, 47, e), 0);
  EXPECT_EQ(two.restore(be, second, 47, e), 32);
  continues_exactly(second, e);

  // A budget below one block and its checkpoint stores nothing.
  PrefixCache tiny(16, kv + checkpoint - 1);
  fill(tiny, tokens, 3, [](int) { return true; });
  EXPECT_EQ(tiny.entries(), 0);
}

}  // namespace
}  // namespace zinc
