// `zinc perplexity`: a model's perplexity over a text file, measured as llama.cpp's
// llama-perplexity measures it (runtime/perplexity.h), so the two compare on the same
// file: e.g. a quantization's cost against the same model in Q8_0.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/backend_choice.h"
#include "cli/commands.h"
#include "cli/read_file.h"
#include "gguf/gguf.h"
#include "runtime/perplexity.h"
#include "text/tokenizer.h"

namespace zinc::cli {
namespace {

struct PerplexityArgs {
  std::string model, file, backend = "auto";
  PerplexityOptions options;
  int threads = 0;
};

void run_perplexity(PerplexityArgs a) {
  const std::string text = read_file(a.file);
  auto file = gguf::GgufFile::open(a.model);
  auto tokenizer = text::Tokenizer::from_gguf(*file);
  std::unique_ptr<Backend> backend = make_backend(a.backend, a.threads);
  std::unique_ptr<Model> model = load_model(*file, *backend);
  // As llama-perplexity: special tokens in the text are plain text, BOS as the file says.
  const std::vector<int32_t> tokens = tokenizer->encode(text, /*parse_special=*/false, tokenizer->add_bos());
  if (tokenizer->add_bos()) a.options.bos = tokenizer->bos();
  std::fprintf(stderr, "%s: %zu tokens, chunks of %lld (the second half of each scored), on %s\n", a.file.c_str(),
               tokens.size(), static_cast<long long>(a.options.n_ctx), backend->name().c_str());
  const Perplexity p = perplexity(*model, *backend, tokens, a.options, [](const Perplexity& so_far) {
    std::printf("[%lld]%.4f,", static_cast<long long>(so_far.chunks), so_far.ppl());
    std::fflush(stdout);
  });
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", p.ppl(), p.ppl_error());
  std::fprintf(stderr, "%lld chunks, %lld tokens scored, %.2f s (%.1f tokens/s through the model)\n",
               static_cast<long long>(p.chunks), static_cast<long long>(p.scored), p.seconds,
               static_cast<double>(p.chunks * a.options.n_ctx) / p.seconds);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity over a text file, as llama-perplexity measures it");
  cmd->add_option("-m,--model", args->model, "GGUF model")->required();
  cmd->add_option("-f,--file", args->file, "Text file")->required();
  cmd->add_option("-c,--ctx", args->options.n_ctx, "Tokens per chunk")->capture_default_str();
  cmd->add_option("--chunks", args->options.max_chunks, "Chunks at most (-1: all)")->capture_default_str();
  cmd->add_option("-u,--ubatch", args->options.piece, "Tokens per forward pass (smaller needs less GPU memory)")
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)");
  cmd->callback([args] { run_perplexity(*args); });
}

}  // namespace zinc::cli
