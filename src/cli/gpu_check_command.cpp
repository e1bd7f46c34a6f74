// `zinc gpu-check`: the CUDA backend against the CPU backend (the executable
// specification), runnable on the GPU machine without GoogleTest. Every op on fresh
// random data for every weight type and for 1 to 70 tokens, with the GPU
// outputs poisoned (NaN) before the kernels run; then whole tiny models of every architecture
// (prefill, decode, 2048 decoded tokens, graph replay vs eager, repeat runs bitwise
// equal), and a wider two-layer llama whose one-token projections take matmul_few.
// Prints one line per check and exits non-zero if any fails.
#ifdef ZINC_WITH_CUDA

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "cli/commands.h"
#include "cli/gpu_check/checker.h"

namespace zinc::cli {

void add_gpu_check_command(CLI::App& app) {
  struct Args {
    bool ops_only = false, models_only = false, quiet = false;
    std::string dir = "/tmp";
    std::string arch;  // empty: every architecture
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("gpu-check", "Check the CUDA backend against the CPU backend");
  cmd->add_flag("--ops-only", args->ops_only, "Skip the whole-model checks");
  cmd->add_flag("--models-only", args->models_only, "Skip the op checks");
  cmd->add_flag("-q,--quiet", args->quiet, "Print failures only");
  cmd->add_option("--dir", args->dir, "Where to write the temporary tiny models")->capture_default_str();
  cmd->add_option("--arch", args->arch, "Only the whole-model checks of this architecture");
  cmd->callback([args] {
    if (cuda_device_count() == 0) {
      std::printf("gpu-check: no CUDA GPU, skipped\n");
      return;
    }
    std::printf("gpu-check on %s\n", cuda_device_info(0).name.c_str());
    gpu_check::Checker c;
    c.set_verbose(!args->quiet);
    if (!args->models_only) gpu_check::check_ops(c);
    if (!args->ops_only)
      for (auto [arch, preset] : {std::pair{"qwen35moe", "tiny"}, std::pair{"qwen35moe", "tiny2"},
                                  std::pair{"llama", "tiny"}, std::pair{"llama", "tiny-llama3"},
                                  std::pair{"llama", "wide"},
                                  std::pair{"qwen3", "tiny"}, std::pair{"qwen3moe", "tiny"},
                                  std::pair{"gemma3", "tiny"}, std::pair{"gpt-oss", "tiny"}})
        if (args->arch.empty() || args->arch == arch) gpu_check::check_model(c, arch, preset, args->dir);
    std::printf("gpu-check: %d of %d checks failed\n", c.failures(), c.checks());
    if (c.failures() > 0) throw std::runtime_error("gpu-check failed");
  });
}

}  // namespace zinc::cli

#endif  // ZINC_WITH_CUDA
