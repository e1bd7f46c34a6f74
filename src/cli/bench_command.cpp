// `zinc bench`: llama-bench-like throughput of one model file: prompt processing
// (ppN: N tokens in forwards of -u tokens, the generator's prompt chunk by default)
// and generation (tgN: N greedy steps, each a one-token forward and an argmax whose
// token feeds the next step on the device and is read one step later), at context
// depths -d, as tokens/s mean ± std and median over -r repetitions after three
// warm-ups (the third lets the CUDA backend capture its graph; -v prints every run).
// For generation it also prints the weight bandwidth achieved: the bytes of weights
// one token reads (every tensor except the embedding table, routed experts scaled by
// used/total) over the time per token, against the GPU's peak when on CUDA.
//
// Timing is host wall clock around whole runs that end in a device read, so it
// includes every launch and synchronisation a real generation loop pays. With
// --profile (CUDA) every op runs eagerly between two events, and after each ppN
// test one more prompt is run and its GPU time printed per phase of the forward
// pass (ops mapped to phases by op and weight name). For
// speed only, each repetition rewinds the sequence to depth d (the recurrent state
// is not restored; the work per token does not depend on its values).
#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <cstdio>
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
#include "runtime/generator.h"

#ifdef ZINC_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace zinc::cli {
namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    const long long v = std::stoll(item, &used);
    if (used != item.size() || v < 0) throw std::invalid_argument("bad list item '" + item + "'");
    out.push_back(v);
  }
  return out;
}

// Bytes of weights a decoded token reads.
double weight_bytes_per_token(const gguf::GgufFile& f) {
  const std::string a = f.architecture() + ".";
  const double used = static_cast<double>(f.get_int_or(a + "expert_used_count", 0));
  const double experts = static_cast<double>(f.get_int_or(a + "expert_count", 0));
  const bool tied = f.find_tensor("output.weight") == nullptr;
  double bytes = 0;
  for (const auto& t : f.tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;  // one row per token
    const bool routed = t.name.find("_exps") != std::string::npos;
    bytes += routed && experts > 0 ? static_cast<double>(t.nbytes) * used / experts : static_cast<double>(t.nbytes);
  }
  return bytes;
}

#ifdef ZINC_WITH_CUDA
// The phase of a forward pass an op belongs to: projections by their weight's name
// (GGUF tensor names), everything else by the op.
std::string phase_of(const CudaOpTime& t) {
  auto weight_has = [&](const char* s) { return t.weight.find(s) != std::string::npos; };
  auto op_is = [&](std::initializer_list<const char*> ops) {
    return std::any_of(ops.begin(), ops.end(), [&](const char* o) { return t.op == o; });
  };
  if (op_is({"matmul", "matmul_many", "moe_ffn", "shared_expert_add", "embed"})) {
    if (weight_has("_exps")) return "routed experts";
    if (weight_has("ffn_gate_inp.")) return "router + shared expert gate/up";
    if (weight_has("_shexp")) return "shared expert";
    if (weight_has("attn_qkv") || weight_has("attn_gate") || weight_has("ssm_")) return "GDN projections";
    if (weight_has("attn_")) return "attention projections";
    if (weight_has("ffn_")) return "dense FFN";
    if (weight_has("output.")) return "LM head";
    if (weight_has("token_embd")) return "embed";
    return "other matmul";
  }
  if (op_is({"delta_rule"})) return "GDN scan (delta rule)";
  if (op_is({"gdn_prepare", "causal_conv", "gdn_gates"})) return "GDN conv + gates";
  if (op_is({"attention", "attention_gated", "attention_prepare", "kv_store", "rope"}))
    return "attention (rope, cache, scores)";
  if (op_is({"moe_route"})) return "router top-k";
  // Decode-only fusions (a prefill runs their parts as the ops above).
  if (op_is({"gdn_core"})) return "GDN core (conv, gates, scan, norm)";
  if (op_is({"moe_block"})) return "MoE block (routing, experts, shared expert)";
  return "norms + element-wise";
}

void print_profile(const std::vector<CudaOpTime>& ops, double wall_s) {
  std::map<std::string, std::pair<double, int>> phases;  // ms, ops
  double total = 0;
  for (const auto& t : ops) {
    auto& p = phases[phase_of(t)];
    p.first += t.ms, ++p.second, total += t.ms;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(phases.begin(), phases.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\n| phase | ops | GPU ms | %% of GPU time |\n|---|---|---|---|\n");
  for (const auto& [name, v] : rows)
    std::printf("| %s | %d | %.3f | %.1f%% |\n", name.c_str(), v.second, v.first, 100.0 * v.first / total);
  std::printf("| total (wall %.3f ms) | %zu | %.3f | 100%% |\n\n", wall_s * 1e3, ops.size(), total);
}
#endif

struct Stats {
  double mean = 0, std = 0, median = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = v.size() > 1 ? std::sqrt(s.std / static_cast<double>(v.size() - 1)) : 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  s.median = v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  return s;
}

class Runner {
 public:
  Runner(Model& model, Backend& be, int64_t n_ctx, int64_t chunk)
      : model_(model), be_(be), seq_(model.new_sequence(n_ctx)), chunk_(chunk) {}

  // Absorbs `count` random tokens in chunks, untimed.
  void fill(int64_t count) {
    for (int64_t done = 0; done < count; done += chunk_) {
      const int64_t n = std::min(chunk_, count - done);
      forward_and_pick(random_tokens(n));
    }
  }
  // Back to a depth for the next timed run. Only the position moves: the caches and
  // recurrent states keep what the runs after that depth wrote (timing, not text).
  void rewind(int64_t depth) { seq_.n_past = depth; }
  size_t state_bytes() const { return seq_.bytes(); }

  double prompt(int64_t n) {
    const auto tokens = random_tokens(n);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t done = 0; done < n; done += chunk_)
      forward_and_pick(std::vector<int32_t>(tokens.begin() + done, tokens.begin() + std::min(n, done + chunk_)));
    return seconds_since(t0);
  }
  // Greedy steps with the sampled token fed back on the device, read one step behind
  // (greedy_on_device), so the host's work for a step overlaps the step before.
  double generate(int64_t n) {
    if (next_.empty()) next_ = be_.alloc_persistent(DType::I32, {1});
    const int32_t first = random_tokens(1)[0];
    be_.write(next_, &first, sizeof first);
    const auto t0 = std::chrono::steady_clock::now();
    greedy_on_device(model_, be_, seq_, next_, n);
    return seconds_since(t0);
  }
  // n tokens of the generation loop (zinc run's) with a sampler, from one random token:
  // n forward passes, as generate(n) above.
  double generate_sampled(int64_t n, const SamplerParams& params) {
    Sampler sampler(params);
    GenerateOptions opt;
    opt.max_tokens = n;
    const std::vector<int32_t> first = random_tokens(1);
    const auto t0 = std::chrono::steady_clock::now();
    zinc::generate(model_, be_, seq_, first, sampler, opt, [](int32_t) { return true; });
    return seconds_since(t0);
  }

 private:
  int32_t forward_and_pick(const std::vector<int32_t>& tokens) {
    return backend_picks(be_, model_.forward(seq_, tokens, 1))[0];
  }
  std::vector<int32_t> random_tokens(int64_t n) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model_.n_vocab() - 1));
    std::vector<int32_t> t(n);
    for (auto& x : t) x = pick(rng_);
    return t;
  }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  Model& model_;
  Backend& be_;
  SequenceState seq_;
  int64_t chunk_;
  Tensor next_;  // generate(): the token of the next step, on the device
  std::mt19937 rng_{1234};
};

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Args {
    std::string model, depths = "0", backend = "auto", prompts = "512";
    int64_t gen = 128, ubatch = GenerateOptions{}.prefill_chunk;
    int reps = 3, threads = 0;
    bool no_graphs = false, profile = false, verbose = false;
    SamplerParams sampling;  // greedy (temperature 0, below) unless --temp
  };
  auto args = std::make_shared<Args>();
  args->sampling.temperature = 0;
  CLI::App* cmd = app.add_subcommand("bench", "Measure prompt and generation throughput (llama-bench style)");
  cmd->add_option("-m,--model", args->model, "GGUF model")->required();
  cmd->add_option("-p,--n-prompt", args->prompts, "Comma-separated prompt sizes, one pp test each (0: none)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", args->gen, "Generated tokens per tg test (0: none)")->capture_default_str();
  cmd->add_option("-d,--depth", args->depths, "Comma-separated context depths")->capture_default_str();
  cmd->add_option("-u,--ubatch", args->ubatch, "Prompt tokens per forward call (prefill chunk)")->capture_default_str();
  cmd->add_option("-r,--repetitions", args->reps, "Timed repetitions (after three warm-ups)")->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)");
  cmd->add_flag("--no-graphs", args->no_graphs, "CUDA: run every forward eagerly, without graph replay");
  cmd->add_flag("-v,--verbose", args->verbose, "Print the time of every run, warm-ups included");
  cmd->add_option("--temp", args->sampling.temperature,
                  "tg tests sample at this temperature through the generation loop (0: greedy on the device)")
      ->capture_default_str();
  add_truncation_options(*cmd, args->sampling);  // with --temp
  cmd->add_flag("--profile", args->profile,
                "CUDA: time every op (eagerly) and print GPU time per phase of one more prompt per pp test");
  cmd->callback([args] {
    if (args->reps < 1) throw std::invalid_argument("bench: -r must be at least 1");
    if (args->ubatch < 1) throw std::invalid_argument("bench: -u must be at least 1");
    const std::vector<int64_t> depths = parse_list(args->depths), prompts = parse_list(args->prompts);
    auto file = gguf::GgufFile::open(args->model);
    std::unique_ptr<Backend> backend;
#ifdef ZINC_WITH_CUDA
    if ((args->no_graphs || args->profile) &&
        (args->backend == "cuda" || (args->backend == "auto" && cuda_available())))
      backend = make_cuda_backend(CudaOptions{0, false, args->profile});
#endif
    if (args->profile && !backend) throw std::invalid_argument("bench: --profile needs the CUDA backend");
    if (!backend) backend = make_backend(args->backend, args->threads);
    const std::string label = backend->name() + (args->profile ? " (profiled)"
                                                 : args->no_graphs && backend->name() == "cuda" ? " (no graphs)"
                                                                                                  : "");
    const auto t0 = std::chrono::steady_clock::now();
    auto model = load_model(*file, *backend);
    backend->sync();
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const double gib = static_cast<double>(file->file_size()) / (1024.0 * 1024 * 1024);
    const double bytes_per_token = weight_bytes_per_token(*file);
    double peak_gbs = 0;
    std::string device = backend->name();
#ifdef ZINC_WITH_CUDA
    if (backend->name() == "cuda") {
      const CudaDeviceInfo info = cuda_device_info(0);
      peak_gbs = info.peak_bandwidth_gbs;
      device = info.name;
    }
#endif
    std::printf("model: %s (%s, %.2f GiB), loaded in %.1f s on %s\n", args->model.c_str(),
                std::string(model->arch()).c_str(), gib, load_s, device.c_str());
    std::printf("weights read per generated token: %.3f GB", bytes_per_token / 1e9);
    if (peak_gbs > 0) std::printf("; GPU peak bandwidth %.0f GB/s (memory clock x bus width)", peak_gbs);
    const int64_t max_depth = depths.empty() ? 0 : *std::max_element(depths.begin(), depths.end());
    const int64_t max_prompt = prompts.empty() ? 0 : *std::max_element(prompts.begin(), prompts.end());
    const int64_t n_ctx = max_depth + std::max(max_prompt, args->gen) + 1;
    Runner runner(*model, *backend, n_ctx, args->ubatch);
    std::printf("\nsequence state (KV caches, recurrent states) for %lld positions: %.1f MiB",
                static_cast<long long>(n_ctx), static_cast<double>(runner.state_bytes()) / (1024.0 * 1024));
    std::printf(
        "\n\n| backend | test | tokens/s | median tokens/s | ms per run (median) | weight GB/s | %% of peak |\n"
        "|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);

    int64_t filled = 0;
    for (int64_t depth : depths) {
      if (depth > filled) {
        runner.rewind(filled);
        runner.fill(depth - filled);
        filled = depth;
      }
      const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
      auto run = [&](const std::string& test, int64_t n, auto&& once, bool decode) {
        std::vector<double> rates;
        // The CUDA backend runs a forward shape eagerly, then (its scratch arena sized)
        // remembers it, then captures a graph: the third run is the first replay.
        constexpr int kWarmups = 3;
        for (int r = 0; r < kWarmups + args->reps; ++r) {
          runner.rewind(depth);
          const double s = once(n);
          if (args->verbose)
            std::fprintf(stderr, "%s%s run %d%s: %.3f ms\n", test.c_str(), at.c_str(), r,
                         r < kWarmups ? " (warm-up)" : "", 1e3 * s);
          if (r >= kWarmups) rates.push_back(static_cast<double>(n) / s);
        }
        const Stats st = stats(rates);
        std::printf("| %s | %s%s | %.2f ± %.2f | %.2f | %.2f |", label.c_str(), test.c_str(), at.c_str(), st.mean,
                    st.std, st.median, 1e3 * static_cast<double>(n) / st.median);
        if (decode) {
          const double gbs = bytes_per_token * st.mean / 1e9;
          std::printf(" %.1f |", gbs);
          if (peak_gbs > 0) std::printf(" %.1f%% |", 100.0 * gbs / peak_gbs);
          else std::printf(" - |");
        } else {
          std::printf(" - | - |");
        }
        std::printf("\n");
        std::fflush(stdout);
      };
      for (int64_t prompt : prompts) {
        if (prompt <= 0) continue;
        run("pp" + std::to_string(prompt), prompt, [&](int64_t n) { return runner.prompt(n); }, false);
#ifdef ZINC_WITH_CUDA
        if (args->profile) {
          cuda_take_profile(*backend);  // drop the timed runs' records
          runner.rewind(depth);
          const double wall = runner.prompt(prompt);
          std::printf("GPU time per phase of one pp%lld%s:", static_cast<long long>(prompt), at.c_str());
          print_profile(cuda_take_profile(*backend), wall);
        }
#endif
      }
      if (args->gen > 0 && args->sampling.temperature > 0) {
        const SamplerParams& sp = args->sampling;
        char temp[32];
        std::snprintf(temp, sizeof temp, " (T %g, ", sp.temperature);
        run("tg" + std::to_string(args->gen) + temp + describe_truncation(sp) + ")", args->gen,
            [&](int64_t n) { return runner.generate_sampled(n, sp); }, true);
      } else if (args->gen > 0)
        run("tg" + std::to_string(args->gen), args->gen, [&](int64_t n) { return runner.generate(n); }, true);
    }
    // After the last run: at least what the largest pass needed at its peak (-u's prompt chunk).
    std::printf("\nscratch memory held after the runs: %.1f MiB\n",
                static_cast<double>(backend->scratch_bytes()) / (1024.0 * 1024));
  });
}

}  // namespace zinc::cli
