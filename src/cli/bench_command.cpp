// `zinc bench`: llama-bench-like throughput of one model file: prompt processing
// (ppN: N tokens in one forward) and generation (tgN: N greedy steps, each a
// one-token forward, argmax and a 4-byte read), at context depths -d, as tokens/s
// mean ± std over -r repetitions after two warm-ups (the second lets the CUDA
// backend capture its graph). For generation it also prints
// the weight bandwidth achieved: the bytes of weights one token reads (every
// tensor except the embedding table, routed experts scaled by used/total) over the
// time per token, against the GPU's peak when on CUDA.
//
// Timing is host wall clock around whole runs that end in a device read, so it
// includes every launch and synchronisation a real generation loop pays. For
// speed only, each repetition rewinds the sequence to depth d (the recurrent state
// is not restored; the work per token does not depend on its values).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/backend_choice.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/model.h"

#ifdef ZINC_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace zinc::cli {
namespace {

constexpr int64_t kPrefillChunk = 512;

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

struct Stats {
  double mean = 0, std = 0;
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = v.size() > 1 ? std::sqrt(s.std / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

class Runner {
 public:
  Runner(Model& model, Backend& be, int64_t n_ctx) : model_(model), be_(be), seq_(model.new_sequence(n_ctx)) {}

  // Absorbs `count` random tokens in chunks, untimed.
  void fill(int64_t count) {
    for (int64_t done = 0; done < count; done += kPrefillChunk) {
      const int64_t n = std::min(kPrefillChunk, count - done);
      forward_and_pick(random_tokens(n));
    }
  }
  void rewind(int64_t depth) { seq_.n_past = depth; }

  double prompt(int64_t n) {
    const auto tokens = random_tokens(n);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t done = 0; done < n; done += kPrefillChunk)
      forward_and_pick(std::vector<int32_t>(tokens.begin() + done, tokens.begin() + std::min(n, done + kPrefillChunk)));
    return seconds_since(t0);
  }
  double generate(int64_t n) {
    int32_t token = random_tokens(1)[0];
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) token = forward_and_pick({token});
    return seconds_since(t0);
  }

 private:
  int32_t forward_and_pick(const std::vector<int32_t>& tokens) {
    Tensor logits = model_.forward(seq_, tokens, 1);
    Tensor id = be_.scratch(DType::I32, {1});
    be_.argmax(logits, id);
    int32_t next = 0;
    be_.read(id, &next, sizeof next);
    return next;
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
  std::mt19937 rng_{1234};
};

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Args {
    std::string model, depths = "0", backend = "auto";
    int64_t prompt = 512, gen = 128;
    int reps = 3, threads = 0;
    bool no_graphs = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prompt and generation throughput (llama-bench style)");
  cmd->add_option("-m,--model", args->model, "GGUF model")->required();
  cmd->add_option("-p,--n-prompt", args->prompt, "Prompt tokens per pp test (0: none)")->capture_default_str();
  cmd->add_option("-n,--n-gen", args->gen, "Generated tokens per tg test (0: none)")->capture_default_str();
  cmd->add_option("-d,--depth", args->depths, "Comma-separated context depths")->capture_default_str();
  cmd->add_option("-r,--repetitions", args->reps, "Timed repetitions (after two warm-ups)")->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)");
  cmd->add_flag("--no-graphs", args->no_graphs, "CUDA: run every forward eagerly, without graph replay");
  cmd->callback([args] {
    if (args->reps < 1) throw std::invalid_argument("bench: -r must be at least 1");
    const std::vector<int64_t> depths = parse_list(args->depths);
    auto file = gguf::GgufFile::open(args->model);
    std::unique_ptr<Backend> backend;
#ifdef ZINC_WITH_CUDA
    if (args->no_graphs && (args->backend == "cuda" || (args->backend == "auto" && cuda_available())))
      backend = make_cuda_backend(CudaOptions{0, false});
#endif
    if (!backend) backend = make_backend(args->backend, args->threads);
    const std::string label = backend->name() + (args->no_graphs && backend->name() == "cuda" ? " (no graphs)" : "");
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
    std::printf("\n\n| backend | test | tokens/s | weight GB/s | %% of peak |\n|---|---|---|---|---|\n");
    std::fflush(stdout);

    const int64_t max_depth = depths.empty() ? 0 : *std::max_element(depths.begin(), depths.end());
    Runner runner(*model, *backend, max_depth + std::max(args->prompt, args->gen) + 1);
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
        constexpr int kWarmups = 2;
        for (int r = 0; r < kWarmups + args->reps; ++r) {
          runner.rewind(depth);
          const double s = once(n);
          if (r >= kWarmups) rates.push_back(static_cast<double>(n) / s);
        }
        const Stats st = stats(rates);
        std::printf("| %s | %s%s | %.2f ± %.2f |", label.c_str(), test.c_str(), at.c_str(), st.mean, st.std);
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
      if (args->prompt > 0)
        run("pp" + std::to_string(args->prompt), args->prompt, [&](int64_t n) { return runner.prompt(n); }, false);
      if (args->gen > 0)
        run("tg" + std::to_string(args->gen), args->gen, [&](int64_t n) { return runner.generate(n); }, true);
    }
  });
}

}  // namespace zinc::cli
