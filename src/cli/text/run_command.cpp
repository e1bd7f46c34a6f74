// `zinc run`: one prompt in, the model's reply streamed out. The prompt goes through
// the model's chat template as a single user message (after an optional system
// message) unless --raw, in which case the text is tokenized as it is.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/text/text_generation.h"
#include "text/harmony_splitter.h"

namespace zinc::cli {

namespace {
struct RunOptions {
  TextGenerationOptions generation;
  std::string prompt;
  bool raw = false;
};

void run(const RunOptions& o) {
  TextModel m = TextModel::load(o.generation);
  std::vector<int32_t> prompt;
  if (o.raw) {
    prompt = m.tokenizer->encode(o.prompt, /*parse_special=*/true, m.tokenizer->add_bos());
  } else {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!o.generation.system.empty()) messages.push_back({{"role", "system"}, {"content", o.generation.system}});
    messages.push_back({{"role", "user"}, {"content", o.prompt}});
    prompt = m.encode_rendered(m.render(messages));
  }
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty");

  // A one-shot reply needs no more context than the prompt plus its token budget.
  const int64_t wanted = static_cast<int64_t>(prompt.size()) + o.generation.max_tokens;
  SequenceState seq = m.model->new_sequence(m.context_length(std::min(o.generation.ctx, wanted)));
  Sampler sampler(resolve_sampling(o.generation));
  GenerateOptions gen;
  gen.max_tokens = o.generation.max_tokens;
  gen.prefill_chunk = o.generation.ubatch;
  gen.eog_ids = m.eog_ids;
  // --raw output stays raw: its prompt need not open an assistant message.
  TextStreamer streamer(*m.tokenizer, !o.raw && text::is_harmony_template(m.chat_template));
  const GenerationResult result = generate(*m.model, *m.backend, seq, prompt, sampler, gen, [&](int32_t token) {
    streamer.push(token);
    return true;
  });
  streamer.finish();
  std::printf("\n");
  std::fflush(stdout);  // the reply ends before the speed line on stderr
  if (result.stop == StopReason::ContextFull) std::fprintf(stderr, "[stopped: context of %lld tokens is full]\n",
                                                           static_cast<long long>(seq.n_ctx));
  print_speed(result.stats);
}
}  // namespace

void add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a reply to one prompt");
  add_text_generation_options(*cmd, opts->generation);
  cmd->add_option("-p,--prompt", opts->prompt, "The prompt (the user's message)")->required();
  cmd->add_flag("--raw", opts->raw, "Tokenize the prompt as it is, without the chat template");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace zinc::cli
