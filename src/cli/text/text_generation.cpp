// Shared pieces of `zinc run` and `zinc chat` (see text_generation.h).
#include "cli/text/text_generation.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "cli/backend_choice.h"
#include "cli/sampling_options.h"
#include "text/chat_template.h"

namespace zinc::cli {

void add_text_generation_options(CLI::App& cmd, TextGenerationOptions& o) {
  cmd.add_option("-m,--model", o.model, "GGUF model")->required();
  cmd.add_option("-n,--max-tokens", o.max_tokens, "Tokens to generate at most per reply")->capture_default_str();
  cmd.add_option("--ctx", o.ctx, "Context length in tokens (at most the model's)")->capture_default_str();
  cmd.add_option("-u,--ubatch", o.ubatch, "Prompt tokens per forward pass (smaller needs less GPU memory)")
      ->capture_default_str();
  cmd.add_option("--threads", o.threads, "CPU threads (0: all cores)");
  cmd.add_option("--system", o.system, "System message");
  SamplerParams& s = o.sampling;
  cmd.add_option("--temp", s.temperature, "Temperature; 0 is greedy")->capture_default_str();
  add_truncation_options(cmd, s);
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "Penalty on recent tokens (1: off)")->capture_default_str();
  cmd.add_option("--repeat-last-n", s.penalty_last_n, "How many recent tokens the penalties look at")
      ->capture_default_str();
  cmd.add_option("--presence-penalty", s.presence_penalty, "Subtracted once from each recent token's logit");
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "Subtracted per occurrence of a recent token");
  cmd.add_option("--seed", s.seed, "Random seed (default: a fresh one each run)")
      ->each([&o](const std::string&) { o.seed_given = true; });
}

SamplerParams resolve_sampling(const TextGenerationOptions& options) {
  SamplerParams p = options.sampling;
  if (!options.seed_given) p.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  return p;
}

TextModel TextModel::load(const TextGenerationOptions& options) {
  if (options.max_tokens < 0) throw std::invalid_argument("-n must be >= 0");
  if (options.ctx < 1) throw std::invalid_argument("--ctx must be >= 1");
  if (options.ubatch < 1) throw std::invalid_argument("-u must be >= 1");
  TextModel m;
  m.file = gguf::GgufFile::open(options.model);
  m.tokenizer = text::Tokenizer::from_gguf(*m.file);
  m.backend = make_backend("auto", options.threads);
  m.model = load_model(*m.file, *m.backend);
  m.chat_template = m.tokenizer->chat_template();
  for (int32_t id = 0; id < m.tokenizer->n_vocab(); ++id)
    if (m.tokenizer->is_eog(id)) m.eog_ids.push_back(id);
  return m;
}

int64_t TextModel::context_length(int64_t requested) const {
  const int64_t trained = model->n_ctx_train();
  return trained > 0 ? std::min(requested, trained) : requested;
}

std::string TextModel::render(const nlohmann::ordered_json& messages) const {
  if (chat_template.empty())
    throw std::runtime_error("the model has no chat template (tokenizer.chat_template); give the prompt with --raw");
  const auto token_or_empty = [&](int32_t id) { return id >= 0 ? tokenizer->token_text(id) : std::string(); };
  return render_chat(chat_template, messages, nullptr, /*add_generation_prompt=*/true, nlohmann::ordered_json::object(),
                     token_or_empty(tokenizer->bos()), token_or_empty(tokenizer->eos()));
}

std::vector<int32_t> TextModel::encode_rendered(const std::string& rendered) const {
  return tokenizer->encode(rendered, /*parse_special=*/true, /*add_bos=*/false);
}

void TextModel::warm_up(SequenceState& seq, const Sampler& sampler, int64_t prefill_chunk) const {
  // The CPU's one-time cost (page faults on the weights) is a few ms of SmolLM2's first
  // pass, less than the warm-up's own four passes (on this CPU a warmed `run` took 450 ->
  // 500 ms, session 54).
  if (backend->name() == "cpu") return;
  constexpr int64_t kSteps = 3;  // the decode graph is captured at the second identical step
  // Which kernels a GPU loads depends on the prompt's length: these are a short first turn's.
  const int64_t n = std::min<int64_t>(32, seq.n_ctx - kSteps - 1);
  if (n < 1) return;
  Sampler draws = sampler;
  GenerateOptions gen;
  gen.max_tokens = kSteps + 1;  // the first token comes from the prompt's logits
  gen.prefill_chunk = prefill_chunk;
  const std::vector<int32_t> prompt(static_cast<size_t>(n), 0);
  generate(*model, *backend, seq, prompt, draws, gen, [](int32_t) { return true; });
  seq.reset(*backend);
}

namespace {
void write_to(std::FILE* stream, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}
}  // namespace

TextStreamer::TextStreamer(const text::Tokenizer& tokenizer, bool harmony)
    : decoder_(tokenizer),
      router_(
          harmony, [](std::string_view text) { write_to(stdout, text); },
          [](std::string_view text) { write_to(stderr, text); }) {}

void TextStreamer::push(int32_t token) { router_.push(decoder_.push(token)); }

void TextStreamer::finish() {
  router_.push(decoder_.flush());
  router_.finish();
}

void print_speed(const GenerationStats& stats) {
  std::fprintf(stderr, "\n[prompt: %lld tokens, %.1f tok/s | reply: %lld tokens, %.1f tok/s]\n",
               static_cast<long long>(stats.prompt_tokens), stats.prompt_tokens_per_second(),
               static_cast<long long>(stats.generated_tokens), stats.generation_tokens_per_second());
}

}  // namespace zinc::cli
