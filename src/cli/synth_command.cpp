// `zinc synth`: write a random-weight model with an architecture's exact layout.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/synth.h"

namespace zinc::cli {
namespace {

// Copies one metadata value (tokenizer keys of a vocab-only GGUF) into the writer.
void copy_value(const std::string& key, const gguf::Value& v, gguf::GgufWriter& w) {
  using gguf::ValueType;
  if (!v.is_array()) {
    if (v.type() == ValueType::STRING) w.set_string(key, std::string(v.as_string()));
    else if (v.type() == ValueType::BOOL) w.set_bool(key, v.as_bool());
    else if (v.is_float()) w.set_f32(key, static_cast<float>(v.as_float()));
    else if (v.type() == ValueType::U32) w.set_u32(key, static_cast<uint32_t>(v.as_uint()));
    else w.set_i64(key, v.as_int());
    return;
  }
  const size_t n = v.array_size();
  if (v.array_type() == ValueType::STRING) {
    std::vector<std::string> a;
    for (size_t i = 0; i < n; ++i) a.emplace_back(v.array_string(i));
    w.set_string_array(key, std::move(a));
  } else if (v.array_type() == ValueType::F32 || v.array_type() == ValueType::F64) {
    std::vector<float> a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<float>(v.array_float(i)));
    w.set_f32_array(key, std::move(a));
  } else {
    std::vector<int32_t> a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<int32_t>(v.array_int(i)));
    w.set_i32_array(key, std::move(a));
  }
}

// A model that speaks a real tokenizer: the vocab file's tokenizer.* keys replace
// the synthetic "none" tokenizer, and the vocabulary size follows its token list.
synth::ModelSpec spec_with_vocab(synth::Options opt, const std::string& vocab_path, const std::string& template_path) {
  std::shared_ptr<gguf::GgufFile> vocab;
  if (!vocab_path.empty()) {
    vocab = gguf::GgufFile::open(vocab_path);
    const gguf::Value* tokens = vocab->find("tokenizer.ggml.tokens");
    if (!tokens) throw std::invalid_argument(vocab_path + " has no tokenizer.ggml.tokens");
    opt.vocab = static_cast<int64_t>(tokens->array_size());
  }
  std::string chat_template;
  if (!template_path.empty()) {
    std::ifstream in(template_path, std::ios::binary);
    if (!in) throw std::invalid_argument("cannot open " + template_path);
    std::stringstream s;
    s << in.rdbuf();
    chat_template = s.str();
  }
  synth::ModelSpec spec = synth::make_spec(opt);
  spec.metadata = [base = spec.metadata, vocab, chat_template](gguf::GgufWriter& w) {
    base(w);
    if (vocab)
      for (const gguf::Value& v : vocab->metadata()) {
        const std::string& key = vocab->key_of(v);
        if (key.rfind("tokenizer.", 0) == 0) copy_value(key, v, w);
      }
    if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
  };
  return spec;
}

}  // namespace

void add_synth_command(CLI::App& app) {
  struct Args {
    synth::Options opt;
    int64_t layers = 0, experts = 0;
    std::string type, out;
    uint64_t seed = 1;
    int threads = 0;
    bool dry_run = false;
    std::string vocab, chat_template;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight GGUF with an architecture's exact layout");
  cmd->add_option("--arch", args->opt.arch, "Architecture")->capture_default_str();
  cmd->add_option("--preset", args->opt.preset,
                  "Size preset (qwen35moe: tiny, tiny2, 35b-a3b; llama: tiny, tiny-llama3, smollm2-135m, 8b, wide; "
                  "qwen3: tiny, 8b; qwen3moe: tiny, 30b-a3b; gemma3: tiny, 270m, 4b, 12b, 27b; gpt-oss: tiny, 20b)")
      ->capture_default_str();
  cmd->add_option("--layers", args->layers, "Override the layer count");
  cmd->add_option("--experts", args->experts, "Override the expert count");
  cmd->add_option("--type", args->type, "Store every weight matrix in this type (e.g. q8_0)");
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Writer threads (default: all cores)");
  cmd->add_option("--vocab", args->vocab,
                  "Take the tokenizer (and vocabulary size) from this GGUF, e.g. from `zinc vocab`");
  cmd->add_option("--chat-template", args->chat_template, "Store this Jinja file as tokenizer.chat_template");
  cmd->add_flag("--dry-run", args->dry_run, "Print the tensor table and size, write nothing");
  cmd->add_option("-o,--output", args->out, "Output GGUF file");
  cmd->callback([args] {
    if (args->layers > 0) args->opt.layers = args->layers;
    if (args->experts > 0) args->opt.experts = args->experts;
    if (!args->type.empty()) {
      args->opt.type = type_from_name(args->type);
      if (!args->opt.type) throw std::invalid_argument("unknown type '" + args->type + "'");
    }
    synth::ModelSpec spec = spec_with_vocab(args->opt, args->vocab, args->chat_template);
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
