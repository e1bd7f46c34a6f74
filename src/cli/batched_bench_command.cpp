// `zinc batched-bench`: throughput of the serving engine with N sequences at once
// (llama-batched-bench's question). For each N, N requests with distinct random
// prompts of -p tokens are submitted together and each generates -n tokens
// greedily (or, with --temp, sampled through the chain as a chat is, its top-k,
// top-p and min-p the defaults unless given, and with --presence-penalty penalised
// over the last 64 tokens as Qwen's model cards suggest; drawn by the backend's
// sample_rows where it can); the engine prefills them in block-aligned chunks
// (its default block and step, as zinc serve) and then decodes all N in one forward
// pass per step. Reported: prompt tokens/s
// (submission to the last first token) and aggregate generation tokens/s (from the
// last first token, when all N are decoding, to the end).
//
// With --turn N it instead measures prefix reuse: a first chat turn of N prompt
// tokens, then a second turn whose prompt is the first prompt, the reply and 50
// new tokens; it prints both times to first token, with the prefix cache and
// without it, and what the cache holds after the second turn. With --beside N it
// measures what a prefill costs the sequences decoding beside it: one sequence
// decodes while a prompt of N tokens arrives, and its gaps between tokens before and
// during that prefill are printed with the prompt's time to its first token.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/backend_choice.h"
#include "cli/commands.h"
#include "cli/sampling_options.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace zinc::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> parse_counts(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    const int v = std::stoi(item, &used);
    if (used != item.size() || v < 1) throw std::invalid_argument("bad --parallel item '" + item + "'");
    out.push_back(v);
  }
  return out;
}

struct Run {
  double prompt_tps = 0, gen_tps = 0;
  int64_t generated = 0;
};

Run run_once(Model& model, Backend& backend, int n_seq, int64_t n_prompt, int64_t n_gen, const SamplerParams& sampling,
             uint64_t seed) {
  EngineOptions opt;
  opt.n_parallel = n_seq;
  opt.n_ctx = n_prompt + n_gen + 1;
  fit_step_tokens(opt);  // the engine's chunks, as serve runs them
  opt.prefix_cache_bytes = 0;
  opt.max_queue = n_seq;
  Engine engine(model, backend, opt);

  std::mutex mu;
  std::condition_variable cv;
  int finished = 0, started = 0;
  int64_t generated = 0;
  Clock::time_point last_first, end;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.n_vocab() - 1));
  const auto t0 = Clock::now();
  for (int i = 0; i < n_seq; ++i) {
    RequestOptions r;
    for (int64_t t = 0; t < n_prompt; ++t) r.prompt.push_back(pick(rng));
    r.sampling = sampling;
    r.sampling.seed = seed * 1000 + static_cast<uint64_t>(i);
    r.max_tokens = n_gen;
    auto first = std::make_shared<bool>(true);
    engine.submit(std::move(r), {[&, first](const TokenEvent&) {
                                   std::lock_guard lock(mu);
                                   ++generated;
                                   if (*first) {
                                     *first = false;
                                     ++started;
                                     last_first = Clock::now();
                                   }
                                   return true;
                                 },
                                 [&](FinishReason reason, const RequestStats&, const std::string& error) {
                                   std::lock_guard lock(mu);
                                   if (reason == FinishReason::Error)
                                     std::fprintf(stderr, "error: %s\n", error.c_str());
                                   ++finished;
                                   end = Clock::now();
                                   cv.notify_all();
                                 },
                                 {}});
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished == n_seq; });
  if (started != n_seq) throw std::runtime_error("batched-bench: a request ended without a token");
  Run r;
  r.generated = generated;
  r.prompt_tps = static_cast<double>(n_seq * n_prompt) / std::chrono::duration<double>(last_first - t0).count();
  // Each sequence's first token came from its prompt pass; the rest from decode steps.
  r.gen_tps = static_cast<double>(generated - n_seq) / std::chrono::duration<double>(end - last_first).count();
  return r;
}

// Seconds from submission to the first token, and the prompt tokens restored.
struct FirstToken {
  double seconds = 0;
  int64_t cached = 0;
  std::vector<int32_t> reply;
};

FirstToken first_token(Engine& engine, std::vector<int32_t> prompt, int64_t n_gen) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  FirstToken out;
  std::optional<Clock::time_point> first;
  RequestOptions r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = n_gen;
  const auto t0 = Clock::now();
  engine.submit(std::move(r), {[&](const TokenEvent& ev) {
                                 std::lock_guard lock(mu);
                                 if (!first) first = Clock::now();
                                 out.reply.push_back(ev.token);
                                 return true;
                               },
                               [&](FinishReason, const RequestStats& stats, const std::string&) {
                                 std::lock_guard lock(mu);
                                 out.cached = stats.cached_tokens;
                                 done = true;
                                 cv.notify_all();
                               },
                               {}});
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!first) throw std::runtime_error("batched-bench: no token generated");
  out.seconds = std::chrono::duration<double>(*first - t0).count();
  return out;
}

void prefix_reuse(Model& model, Backend& backend, int64_t n_turn, int64_t n_gen, EngineOptions engine_options) {
  engine_options.n_parallel = 1;
  engine_options.n_ctx = n_turn + 2 * n_gen + 64;
  fit_step_tokens(engine_options);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.n_vocab() - 1));
  std::vector<int32_t> turn1(static_cast<size_t>(n_turn));
  for (auto& t : turn1) t = pick(rng);
  std::vector<int32_t> turn2_new(50);  // the same second turn's new tokens with and without the cache
  for (auto& t : turn2_new) t = pick(rng);
  std::printf("prefix block %lld tokens, %lld tokens a step\n\n", static_cast<long long>(engine_options.prefix_block),
              static_cast<long long>(engine_options.step_tokens));
  std::printf("| prefix cache | turn 1: %lld prompt tokens, ms to first token | turn 2: prompt tokens (restored) | "
              "turn 2: ms to first token | turn 2's reply as without the cache | cache: MiB, blocks, checkpoints | "
              "engine warm-up: ms |\n"
              "|---|---|---|---|---|---|---|\n",
              static_cast<long long>(n_turn));
  std::vector<int32_t> uncached_reply;  // greedy: a restored prefix must not change a token
  for (bool cache : {false, true}) {
    EngineOptions opt = engine_options;
    if (!cache) opt.prefix_cache_bytes = 0;
    Engine engine(model, backend, opt);
    const FirstToken a = first_token(engine, turn1, n_gen);
    std::vector<int32_t> turn2 = turn1;
    turn2.insert(turn2.end(), a.reply.begin(), a.reply.end());
    turn2.insert(turn2.end(), turn2_new.begin(), turn2_new.end());
    const FirstToken b = first_token(engine, turn2, n_gen);
    if (!cache) uncached_reply = b.reply;
    const EngineMetrics m = engine.metrics();
    std::printf("| %s | %.1f | %zu (%lld) | %.1f | %s | %.0f, %lld, %lld | %.1f |\n", cache ? "on" : "off",
                a.seconds * 1e3, turn2.size(), static_cast<long long>(b.cached), b.seconds * 1e3,
                !cache ? "-" : b.reply == uncached_reply ? "same" : "DIFFERS", double(m.prefix_cache_bytes) / (1 << 20),
                static_cast<long long>(m.prefix_cache_entries), static_cast<long long>(m.prefix_cache_checkpoints),
                m.warm_up_seconds * 1e3);
    std::fflush(stdout);
  }
}

// A sequence decoding while another's prompt of n_prompt tokens is prefilled beside it
// (steps of the engine's block and step): its gaps between tokens before that prompt
// comes and while it is prefilled, and the prompt's time to its first token.
void decode_beside_prefill(Model& model, Backend& backend, int64_t n_prompt, const EngineOptions& engine_options) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.n_vocab() - 1));
  std::vector<int32_t> decoding(64), prompt(static_cast<size_t>(n_prompt));
  for (auto& t : decoding) t = pick(rng);
  for (auto& t : prompt) t = pick(rng);
  EngineOptions opt = engine_options;
  opt.n_parallel = 2;
  opt.n_ctx = n_prompt + 4096;
  opt.prefix_cache_bytes = 0;
  fit_step_tokens(opt);
  Engine engine(model, backend, opt);
  constexpr size_t kBefore = 32, kAfter = 32;  // the decoding sequence's tokens before and after the prompt's
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Clock::time_point> times;  // the decoding sequence's tokens
  std::optional<Clock::time_point> submitted, first;
  size_t after_first = 0;
  int finished = 0;
  RequestOptions a;
  a.prompt = decoding;
  a.max_tokens = 4000;
  const auto finish = [&](FinishReason, const RequestStats&, const std::string&) {
    std::lock_guard lock(mu);
    ++finished;
    cv.notify_all();
  };
  engine.submit(std::move(a), {[&](const TokenEvent&) {
                                 std::lock_guard lock(mu);
                                 times.push_back(Clock::now());
                                 cv.notify_all();
                                 return !first || ++after_first < kAfter;
                               },
                               finish, {}});
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return times.size() >= kBefore || finished > 0; });
    if (finished > 0) throw std::runtime_error("batched-bench: the decoding sequence ended early");
    submitted = Clock::now();
  }
  RequestOptions b;
  b.prompt = prompt;
  b.max_tokens = 1;
  engine.submit(std::move(b), {[&](const TokenEvent&) {
                                 std::lock_guard lock(mu);
                                 if (!first) first = Clock::now();
                                 return true;
                               },
                               finish, {}});
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished == 2; });
  if (!first) throw std::runtime_error("batched-bench: the prompt gave no token");
  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::vector<double> before, during;
  for (size_t i = 1; i < times.size(); ++i) {
    if (times[i] <= *submitted) before.push_back(ms(times[i] - times[i - 1]));
    else if (times[i] <= *first) during.push_back(ms(times[i] - std::max(times[i - 1], *submitted)));
  }
  std::sort(before.begin(), before.end());
  double sum = 0;
  for (double g : during) sum += g;
  std::printf("| %lld / %lld | %.2f | %zu | %.1f / %.1f | %.1f |\n", static_cast<long long>(opt.prefix_block),
              static_cast<long long>(opt.step_tokens), before.empty() ? 0.0 : before[before.size() / 2],
              during.size(), during.empty() ? 0.0 : sum / static_cast<double>(during.size()),
              during.empty() ? 0.0 : *std::max_element(during.begin(), during.end()), ms(*first - *submitted));
  std::fflush(stdout);
}

}  // namespace

void add_batched_bench_command(CLI::App& app) {
  struct Args {
    std::string model, parallel = "1,8,32", backend = "auto";
    int64_t prompt = 512, gen = 128;
    int reps = 2, threads = 0;
    int64_t turn = 0, beside = 0;
    size_t cache_mib = EngineOptions{}.prefix_cache_bytes >> 20;
    EngineOptions engine;  // --turn's block and step
    float temp = 0, presence = 0;
    SamplerParams chain;  // top-k, top-p, min-p with --temp
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("batched-bench", "Measure serving throughput with N sequences at once");
  cmd->add_option("-m,--model", args->model, "GGUF model")->required();
  cmd->add_option("--parallel", args->parallel, "Comma-separated sequence counts")->capture_default_str();
  cmd->add_option("-p,--n-prompt", args->prompt, "Prompt tokens per sequence")->capture_default_str();
  cmd->add_option("-n,--n-gen", args->gen, "Generated tokens per sequence")->capture_default_str();
  cmd->add_option("-r,--repetitions", args->reps, "Timed repetitions (after one warm-up)")->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)");
  cmd->add_option("--temp", args->temp,
                  "Sample at this temperature with the chain's top-k, top-p and min-p (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", args->presence, "Subtract this from the logit of each of the last 64 tokens")
      ->capture_default_str();
  add_truncation_options(*cmd, args->chain);  // with --temp
  cmd->add_option("--turn", args->turn, "Instead: time to first token of a second chat turn after one of N tokens");
  cmd->add_option("--beside", args->beside,
                  "Instead: a sequence's gaps between tokens while a prompt of N tokens is prefilled beside it");
  cmd->add_option("--prefix-cache-mib", args->cache_mib, "With --turn: the prefix cache's host memory")
      ->capture_default_str();
  cmd->add_option("--prefix-block", args->engine.prefix_block, "With --turn or --beside: prefix-cache block in tokens")
      ->capture_default_str();
  cmd->add_option("--step-tokens", args->engine.step_tokens, "With --turn or --beside: tokens per forward step")
      ->capture_default_str();
  cmd->add_option("--warm-up", args->engine.warm_up_tokens,
                  "With --turn or --beside: each engine's warm-up prompt in tokens (serve's: a block on a GPU)")
      ->capture_default_str();
  cmd->callback([args] {
    if (args->reps < 1 || args->prompt < 1 || args->gen < 2) throw std::invalid_argument("batched-bench: bad counts");
    if (args->temp < 0) throw std::invalid_argument("batched-bench: --temp must be >= 0");
    const std::vector<int> counts = parse_counts(args->parallel);
    auto file = gguf::GgufFile::open(args->model);
    auto backend = make_backend(args->backend, args->threads);
    auto model = load_model(*file, *backend);
    if (args->beside > 0) {
      std::printf("| block / step | gap before (median ms) | gaps during the %lld-token prefill | their mean / longest "
                  "(ms) | the prompt's first token (ms) |\n|---|---|---|---|---|\n",
                  static_cast<long long>(args->beside));
      return decode_beside_prefill(*model, *backend, args->beside, args->engine);
    }
    if (args->turn > 0) {
      args->engine.prefix_cache_bytes = args->cache_mib << 20;
      return prefix_reuse(*model, *backend, args->turn, args->gen, args->engine);
    }
    SamplerParams sampling = args->chain;
    sampling.temperature = args->temp;  // > 0: with the chain's top-k, top-p and min-p
    sampling.presence_penalty = args->presence;
    std::string how = args->temp > 0 ? "sampled at temperature " + std::to_string(args->temp) + " (" +
                                           describe_truncation(sampling) + ")"
                                     : "greedy";
    if (args->presence != 0) how += ", presence penalty " + std::to_string(args->presence);
    std::printf("model: %s (%s) on %s; prompts of %lld tokens, %lld generated each, %s\n\n", args->model.c_str(),
                std::string(model->arch()).c_str(), backend->name().c_str(), static_cast<long long>(args->prompt),
                static_cast<long long>(args->gen), how.c_str());
    std::printf("| sequences | prompt tokens/s | generated tokens/s (all sequences) | per sequence |\n"
                "|---|---|---|---|\n");
    std::fflush(stdout);
    for (int n : counts) {
      Run mean;
      for (int r = 0; r < 1 + args->reps; ++r) {
        const Run run =
            run_once(*model, *backend, n, args->prompt, args->gen, sampling, 1000 + static_cast<uint64_t>(r));
        if (r == 0) continue;  // warm-up (graph capture, allocations)
        mean.prompt_tps += run.prompt_tps / args->reps;
        mean.gen_tps += run.gen_tps / args->reps;
      }
      std::printf("| %d | %.1f | %.1f | %.1f |\n", n, mean.prompt_tps, mean.gen_tps, mean.gen_tps / n);
      std::fflush(stdout);
    }
  });
}

}  // namespace zinc::cli
