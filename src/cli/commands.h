// Each subcommand of the zinc binary registers itself on the CLI11 app here. A
// command reports failure by throwing; main() prints one "zinc: error: ..." line.
#pragma once

#include <CLI/CLI.hpp>

namespace zinc::cli {

void add_inspect_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_bench_command(CLI::App& app);  // throughput, llama-bench style
void add_batched_bench_command(CLI::App& app);  // serving throughput, N sequences at once
#ifdef ZINC_WITH_CUDA
void add_gpu_check_command(CLI::App& app);  // the CUDA backend against the CPU one
#endif
#ifdef ZINC_WITH_TEXT
void add_tokenizer_commands(CLI::App& app);  // vocab, tokenize, detokenize
void add_template_command(CLI::App& app);    // render a chat template
void add_run_command(CLI::App& app);         // one prompt in, a reply out
void add_chat_command(CLI::App& app);        // interactive conversation
void add_perplexity_command(CLI::App& app);  // perplexity over a text file, as llama-perplexity
#endif
#ifdef ZINC_WITH_SERVER
void add_serve_command(CLI::App& app);  // OpenAI-compatible HTTP server
#endif

}  // namespace zinc::cli
