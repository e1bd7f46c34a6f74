// zinc: one binary for inspecting, synthesising and running GGUF models.
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"zinc - LLM inference for GGUF models"};
  app.require_subcommand(1);
  zinc::cli::add_inspect_command(app);
  zinc::cli::add_synth_command(app);
  zinc::cli::add_logits_command(app);
  zinc::cli::add_bench_command(app);
  zinc::cli::add_batched_bench_command(app);
#ifdef ZINC_WITH_CUDA
  zinc::cli::add_gpu_check_command(app);
#endif
#ifdef ZINC_WITH_TEXT
  zinc::cli::add_tokenizer_commands(app);
  zinc::cli::add_template_command(app);
  zinc::cli::add_run_command(app);
  zinc::cli::add_chat_command(app);
  zinc::cli::add_perplexity_command(app);
#endif
#ifdef ZINC_WITH_SERVER
  zinc::cli::add_serve_command(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zinc: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
