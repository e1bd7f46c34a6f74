// `zinc serve`: an OpenAI-compatible HTTP server over the serving engine
// (docs/SERVER.md). SIGINT / SIGTERM stop accepting connections; requests in
// flight finish first.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/read_file.h"
#include "cli/sampling_options.h"
#include "cli/text/text_generation.h"
#include "runtime/engine.h"
#include "server/server.h"

namespace zinc::cli {
namespace {

struct ServeArgs {
  TextGenerationOptions model;
  EngineOptions engine;
  server::ServerOptions server;
  std::string thinking = "auto";
  std::string chat_template_file;
  std::string alias;
  int64_t prefix_cache_mib = 1024;
  int64_t max_body_mib = 16;
  bool prefix_block_given = false;
};

// On the CPU a prefill chunk of 64 to 1024 tokens runs at about the same speed, and a
// chat turn re-reads what the cache missed at tens of tokens a second there: blocks of
// 1024 missed every conversation shorter than that (PERFORMANCE.md, session 58).
constexpr int64_t kCpuPrefixBlock = 128;

void serve(ServeArgs& a) {
  if (a.thinking != "auto" && a.thinking != "on" && a.thinking != "off")
    throw std::invalid_argument("--thinking must be auto, on or off");
  if (a.thinking != "auto") a.server.defaults.enable_thinking = a.thinking == "on";
  a.server.defaults.sampling = a.model.sampling;
  a.server.defaults.model_id =
      a.alias.empty() ? std::filesystem::path(a.model.model).stem().string() : a.alias;
  a.server.max_body_bytes = static_cast<size_t>(a.max_body_mib) << 20;
  a.engine.prefix_cache_bytes = static_cast<size_t>(a.prefix_cache_mib) << 20;

  // Signals go to one waiting thread, not to whichever thread they hit.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a crash

  TextModel tm = TextModel::load(a.model);
  if (!a.chat_template_file.empty()) tm.chat_template = read_file(a.chat_template_file);
  a.engine.n_ctx = tm.context_length(a.model.ctx);
  if (!a.prefix_block_given && tm.backend->name() == "cpu") a.engine.prefix_block = kCpuPrefixBlock;
  fit_step_tokens(a.engine);
  // A GPU's first pass loads the kernels' code and grows the scratch memory: a block's
  // prompt covers a lone request's chunks. The CPU's first pass pays only for page
  // faults, which one token takes.
  a.engine.warm_up_tokens = tm.backend->name() == "cpu" ? 1 : a.engine.prefix_block;
  Engine engine(*tm.model, *tm.backend, a.engine);
  server::HttpServer http({*tm.tokenizer, tm.chat_template, tm.eog_ids, engine}, a.server);
  const int port = http.bind();
  std::printf("zinc serve: %s on http://%s:%d (ctx %lld, %d slots; warmed up in %.0f ms)\n",
              a.server.defaults.model_id.c_str(), a.server.host.c_str(), port, static_cast<long long>(a.engine.n_ctx),
              a.engine.n_parallel, engine.metrics().warm_up_seconds * 1e3);
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    http.stop();
  });
  http.serve();
  // serve() also returns on its own (a failed listen): wake the waiter.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat, completions, streaming)");
  cmd->add_option("-m,--model", a->model.model, "GGUF model")->required();
  cmd->add_option("--host", a->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->server.port, "Port (0: any free port, printed at start)")->capture_default_str();
  cmd->add_option("--ctx", a->model.ctx, "Context length per sequence (at most the model's)")->capture_default_str();
  cmd->add_option("--parallel", a->engine.n_parallel, "Sequences generated at once (slots)")->capture_default_str();
  cmd->add_option("--queue", a->engine.max_queue, "Requests that may wait for a slot; more get 503")
      ->capture_default_str();
  cmd->add_option("--step-tokens", a->engine.step_tokens, "Tokens per forward step (decode and prefill together)")
      ->capture_default_str();
  CLI::Option* prefix_block = cmd->add_option("--prefix-block", a->engine.prefix_block,
                                               "Prefix-cache block in tokens (default: 1024 on a GPU, 128 on the CPU)");
  cmd->add_option("--prefix-cache-mib", a->prefix_cache_mib, "Prefix-cache host memory, page-locked on a GPU (0: off)")
      ->capture_default_str();
  cmd->add_option("--threads", a->model.threads, "CPU threads (0: all cores)");
  cmd->add_option("--api-key", a->server.api_key, "Require 'Authorization: Bearer KEY'");
  cmd->add_option("--alias", a->alias, "Model id clients use (default: the file name without .gguf)");
  cmd->add_option("--chat-template-file", a->chat_template_file, "Jinja chat template to use instead of the file's");
  cmd->add_option("--thinking", a->thinking, "Default enable_thinking: auto (the template's), on or off")
      ->capture_default_str();
  cmd->add_option("--thinking-budget", a->server.defaults.thinking_budget,
                  "Default thinking budget in tokens (-1: unlimited)")->capture_default_str();
  cmd->add_option("--read-timeout", a->server.read_timeout_seconds, "Seconds a client may stall while sending")
      ->capture_default_str();
  cmd->add_option("--max-body-mib", a->max_body_mib, "Largest request body; larger gets 413")->capture_default_str();
  SamplerParams& s = a->model.sampling;
  cmd->add_option("--temp", s.temperature, "Default temperature")->capture_default_str();
  add_truncation_options(*cmd, s);  // requests' defaults, as --temp
  cmd->callback([a, prefix_block] {
    a->prefix_block_given = prefix_block->count() > 0;
    serve(*a);
  });
}

}  // namespace zinc::cli
