// `zinc synth`: write a random-weight model with an architecture's exact layout.
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "cli/commands.h"
#include "model/synth.h"

namespace zinc::cli {

void add_synth_command(CLI::App& app) {
  struct Args {
    synth::Options opt;
    int64_t layers = 0, experts = 0;
    std::string type, out;
    uint64_t seed = 1;
    int threads = 0;
    bool dry_run = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight GGUF with an architecture's exact layout");
  cmd->add_option("--arch", args->opt.arch, "Architecture")->capture_default_str();
  cmd->add_option("--preset", args->opt.preset, "Size preset (qwen35moe: tiny, tiny2, 35b-a3b; llama: tiny, tiny-llama3; qwen3, qwen3moe: tiny)")->capture_default_str();
  cmd->add_option("--layers", args->layers, "Override the layer count");
  cmd->add_option("--experts", args->experts, "Override the expert count");
  cmd->add_option("--type", args->type, "Store every weight matrix in this type (e.g. q8_0)");
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Writer threads (default: all cores)");
  cmd->add_flag("--dry-run", args->dry_run, "Print the tensor table and size, write nothing");
  cmd->add_option("-o,--output", args->out, "Output GGUF file");
  cmd->callback([args] {
    if (args->layers > 0) args->opt.layers = args->layers;
    if (args->experts > 0) args->opt.experts = args->experts;
    if (!args->type.empty()) {
      args->opt.type = type_from_name(args->type);
      if (!args->opt.type) throw std::invalid_argument("unknown type '" + args->type + "'");
    }
    synth::ModelSpec spec = synth::make_spec(args->opt);
    const double gib = static_cast<double>(synth::total_bytes(spec)) / (1024.0 * 1024 * 1024);
    if (args->dry_run) {
      for (const auto& t : spec.tensors) {
        std::printf("%-36s %-7s", t.name.c_str(), std::string(type_name(t.type)).c_str());
        for (int64_t d : t.dims) std::printf(" %lld", static_cast<long long>(d));
        std::printf("\n");
      }
      std::printf("%zu tensors, %.2f GiB\n", spec.tensors.size(), gib);
      return;
    }
    if (args->out.empty()) throw std::invalid_argument("synth: -o FILE is required");
    const int threads = args->threads > 0 ? args->threads : static_cast<int>(std::thread::hardware_concurrency());
    const auto t0 = std::chrono::steady_clock::now();
    synth::write(spec, args->seed, args->out, threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %s: %zu tensors, %.2f GiB in %.1f s\n", args->out.c_str(), spec.tensors.size(), gib, s);
  });
}

}  // namespace zinc::cli
