// `zinc vocab`, `zinc tokenize`, `zinc detokenize`: build a vocab-only GGUF from a
// Hugging Face tokenizer, and run a GGUF file's tokenizer both ways.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/read_file.h"
#include "gguf/gguf.h"
#include "text/hf_vocab.h"
#include "text/tokenizer.h"

namespace zinc::cli {
namespace {

struct VocabOptions {
  std::string hf_dir, output;
};

struct TokenizeOptions {
  std::string model, text, file;
  bool json = false, no_special = false, no_bos = false;
};

struct DetokenizeOptions {
  std::string model;
  std::vector<int32_t> ids;
};

void run_tokenize(const TokenizeOptions& o) {
  auto file = gguf::GgufFile::open(o.model);
  auto tokenizer = text::Tokenizer::from_gguf(*file);
  if (!o.file.empty() && !o.text.empty()) throw std::runtime_error("give TEXT or --file, not both");
  std::string input = o.file.empty() ? o.text : read_file(o.file);
  bool add_bos = tokenizer->add_bos() && !o.no_bos;
  std::vector<int32_t> ids = tokenizer->encode(input, !o.no_special, add_bos);
  if (o.json) {
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    return;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
}

void run_detokenize(const DetokenizeOptions& o) {
  auto file = gguf::GgufFile::open(o.model);
  auto tokenizer = text::Tokenizer::from_gguf(*file);
  std::string text = tokenizer->decode(o.ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

void add_tokenizer_commands(CLI::App& app) {
  auto vocab = std::make_shared<VocabOptions>();
  CLI::App* v = app.add_subcommand("vocab", "Write a vocab-only GGUF from a Hugging Face tokenizer");
  v->add_option("--from-hf", vocab->hf_dir, "Directory with tokenizer.json (and tokenizer_config.json)")->required();
  v->add_option("-o,--output", vocab->output, "GGUF file to write")->required();
  v->callback([vocab] {
    text::write_hf_vocab_gguf(vocab->hf_dir, vocab->output);
    std::printf("wrote %s\n", vocab->output.c_str());
  });

  auto tok = std::make_shared<TokenizeOptions>();
  CLI::App* t = app.add_subcommand("tokenize", "Print the token ids of a text");
  t->add_option("-m,--model", tok->model, "GGUF file with a tokenizer")->required();
  t->add_option("text", tok->text, "Text to tokenize");
  t->add_option("-f,--file", tok->file, "Read the text from a file instead");
  t->add_flag("--json", tok->json, "Print a JSON array");
  t->add_flag("--no-special", tok->no_special, "Treat special-token text as plain text");
  t->add_flag("--no-bos", tok->no_bos, "Do not add the BOS token even if the vocab asks for it");
  t->callback([tok] { run_tokenize(*tok); });

  auto detok = std::make_shared<DetokenizeOptions>();
  CLI::App* d = app.add_subcommand("detokenize", "Print the text of token ids");
  d->add_option("-m,--model", detok->model, "GGUF file with a tokenizer")->required();
  d->add_option("ids", detok->ids, "Token ids")->required();
  d->callback([detok] { run_detokenize(*detok); });
}

}  // namespace zinc::cli
