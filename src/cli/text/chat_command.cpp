// `zinc chat`: an interactive conversation. Each turn re-renders the whole
// conversation with the chat template; when the new prompt text extends what the
// sequence already holds, only the new suffix is tokenized and fed (the KV cache is
// reused), otherwise the sequence starts over. /reset forgets the conversation,
// /exit quits; Ctrl-C stops the current reply, and Ctrl-C at the prompt quits.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/text/text_generation.h"
#include "text/harmony_splitter.h"

namespace zinc::cli {

namespace {
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler needs lock-free flags");
std::atomic<bool> g_replying{false};
std::atomic<bool> g_stop_reply{false};

extern "C" void on_interrupt(int) {
  if (g_replying.load()) {
    g_stop_reply.store(true);
    return;
  }
  // At the prompt: quit. Only async-signal-safe calls here.
  const char newline = '\n';
  [[maybe_unused]] const ssize_t n = write(STDOUT_FILENO, &newline, 1);
  _exit(130);
}

struct ChatOptions {
  TextGenerationOptions generation;
};

// The conversation and what the sequence has absorbed of it.
class Conversation {
 public:
  Conversation(TextModel& model, const TextGenerationOptions& options)
      : m_(model),
        options_(options),
        seq_(model.model->new_sequence(model.context_length(options.ctx))),
        sampler_(resolve_sampling(options)) {
    model.warm_up(seq_, sampler_, options.ubatch);
    reset();
  }

  void reset() {
    messages_ = nlohmann::ordered_json::array();
    if (!options_.system.empty()) messages_.push_back({{"role", "system"}, {"content", options_.system}});
    forget_sequence();
  }

  void reply(const std::string& user_text) {
    messages_.push_back({{"role", "user"}, {"content", user_text}});
    const std::string rendered = m_.render(messages_);
    std::vector<int32_t> feed;
    if (!held_text_.empty() && rendered.starts_with(held_text_)) {
      feed = not_absorbed_;
      const std::vector<int32_t> suffix = m_.encode_rendered(rendered.substr(held_text_.size()));
      feed.insert(feed.end(), suffix.begin(), suffix.end());
    } else {
      forget_sequence();  // the template rewrote earlier turns: start over
      feed = m_.encode_rendered(rendered);
    }
    if (seq_.n_past + static_cast<int64_t>(feed.size()) >= seq_.n_ctx) {
      messages_.erase(messages_.size() - 1);
      std::fprintf(stderr, "[the context of %lld tokens is full: /reset to start over]\n",
                   static_cast<long long>(seq_.n_ctx));
      return;
    }

    GenerateOptions gen;
    gen.max_tokens = options_.max_tokens;
    gen.prefill_chunk = options_.ubatch;
    gen.eog_ids = m_.eog_ids;
    TextStreamer streamer(*m_.tokenizer, text::is_harmony_template(m_.chat_template));
    g_stop_reply.store(false);
    g_replying.store(true);
    const GenerationResult result = generate(*m_.model, *m_.backend, seq_, feed, sampler_, gen, [&](int32_t token) {
      streamer.push(token);
      return !g_stop_reply.load();
    });
    g_replying.store(false);
    streamer.finish();
    std::printf("\n");
    std::fflush(stdout);  // the reply ends before the speed line on stderr

    const std::string reply_text = m_.tokenizer->decode(result.tokens);
    messages_.push_back(assistant_message(reply_text, streamer.reply()));
    held_text_ = rendered + reply_text;
    // Greedy decoding fed the end-of-generation token already: the next turn's
    // template text holds it (or the prefix check starts over).
    if (result.end_absorbed) held_text_ += m_.tokenizer->token_text(result.end_token);
    not_absorbed_ = result.not_absorbed;
    if (result.stop == StopReason::Callback) std::fprintf(stderr, "[stopped]\n");
    if (result.stop == StopReason::ContextFull) std::fprintf(stderr, "[the context is full: /reset to start over]\n");
    print_speed(result.stats);
  }

 private:
  // gpt-oss's harmony template takes the answer as content and the reasoning as
  // `thinking`, and refuses a content that holds channel tags: the streamer split them.
  nlohmann::ordered_json assistant_message(const std::string& reply, const ReplyRouter& split) const {
    if (!text::is_harmony_template(m_.chat_template)) return {{"role", "assistant"}, {"content", reply}};
    return {{"role", "assistant"}, {"content", split.content()}, {"thinking", split.reasoning()}};
  }

  void forget_sequence() {
    seq_.reset(*m_.backend);
    sampler_.reset_history();
    held_text_.clear();
    not_absorbed_.clear();
  }

  TextModel& m_;
  const TextGenerationOptions& options_;
  SequenceState seq_;
  Sampler sampler_;
  nlohmann::ordered_json messages_;
  std::string held_text_;              // prompt text plus reply the sequence holds (or is owed)
  std::vector<int32_t> not_absorbed_;  // reply tokens streamed but not yet fed
};

void chat(const ChatOptions& o) {
  TextModel m = TextModel::load(o.generation);
  m.render(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}));  // fail early without a template
  Conversation conversation(m, o.generation);

  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESTART;  // output writes during a reply are not cut short
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);

  std::fprintf(stderr, "[zinc chat: /reset starts over, /exit quits, Ctrl-C stops a reply]\n");
  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit") break;
    if (line == "/reset") {
      conversation.reset();
      std::fprintf(stderr, "[conversation reset]\n");
      continue;
    }
    if (line.empty()) continue;
    conversation.reply(line);
  }
  std::printf("\n");
}
}  // namespace

void add_chat_command(CLI::App& app) {
  auto opts = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with a model interactively");
  add_text_generation_options(*cmd, opts->generation);
  cmd->callback([opts] { chat(*opts); });
}

}  // namespace zinc::cli
