// The OpenAI-compatible HTTP API over the engine (see server.h).
#include "server/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <span>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/connection_watch.h"
#include "server/generation_job.h"
#include "server/metrics.h"
#include "server/openai_format.h"
#include "server/reply_stream.h"

namespace zinc::server {
namespace {

using Clock = std::chrono::steady_clock;
// How often a waiting connection thread looks for a client that hung up.
constexpr auto kWatchInterval = std::chrono::milliseconds(100);

// The choices of one HTTP request share a lock and a condition, so that the connection
// thread waits for whichever of them moves next.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
};

// One choice in flight: the engine thread fills it, the connection thread drains it.
struct Exchange {
  Exchange(const text::Tokenizer& tokenizer, ReplyOptions options, std::shared_ptr<Channel> channel)
      : stream(tokenizer, std::move(options)), channel(std::move(channel)) {}

  ReplyStream stream;  // engine thread only
  std::optional<ReplyDelta> echo;  // engine thread only: the echoed prompt, until it is posted
  std::atomic<bool> client_gone{false};

  std::shared_ptr<Channel> channel;  // its lock guards the fields below
  std::deque<ReplyDelta> pending;
  bool finished = false;
  FinishReason reason = FinishReason::Cancelled;
  RequestStats stats;
  std::string error;

  void post(ReplyDelta d) {
    if (d.empty()) return;
    std::lock_guard lock(channel->mu);
    pending.push_back(std::move(d));
    channel->cv.notify_all();
  }
  // The echoed prompt goes before the reply's first token (or its end).
  void post_echo() {
    if (!echo) return;
    post(std::move(*echo));
    echo.reset();
  }
};

// Every choice of one HTTP request, in order: its exchange, its engine request and its job.
struct Choices {
  std::vector<std::shared_ptr<Exchange>> exchanges;
  std::vector<uint64_t> ids;
  std::vector<GenerationJob> jobs;

  bool all_finished() const {  // under the channel's lock
    return std::all_of(exchanges.begin(), exchanges.end(), [](const auto& ex) { return ex->finished; });
  }
  // Cancels every choice submitted so far; their callbacks stop at the next token.
  void cancel_all(Engine& engine) const {
    for (const auto& ex : exchanges) ex->client_gone = true;
    for (uint64_t id : ids) engine.cancel(id);
  }
  // The usage of the response, once all have finished: each prompt counted once (its first
  // choice's), every reply.
  RequestStats usage() const {
    RequestStats usage;
    for (size_t k = 0; k < exchanges.size(); ++k) {
      const RequestStats& stats = exchanges[k]->stats;
      if (jobs[k].first_of_prompt) {
        usage.prompt_tokens += stats.prompt_tokens;
        usage.cached_tokens += stats.cached_tokens;
      }
      usage.generated_tokens += stats.generated_tokens;
    }
    return usage;
  }
};

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(dump(e.body()), "application/json");
}

Json parse_body(const std::string& text) {
  auto body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON (or not UTF-8)");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return body;
}

}  // namespace

struct HttpServer::Impl {
  Impl(ServedModel m, ServerOptions o) : model(std::move(m)), options(std::move(o)) {
    if (!model.chat_template.empty()) {
      const auto text_of = [&](int32_t id) { return id >= 0 ? model.tokenizer.token_text(id) : std::string(); };
      renderer = std::make_unique<ChatRenderer>(model.chat_template, text_of(model.tokenizer.bos()),
                                                text_of(model.tokenizer.eos()));
    }
    const EngineOptions& eo = model.engine.options();
    // One thread per open connection: every slot and queue place, plus as many idle
    // keep-alive connections again, plus room for /health and /metrics.
    const size_t threads = static_cast<size_t>(2 * (eo.n_parallel + eo.max_queue) + 32);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_read_timeout(options.read_timeout_seconds, 0);
    http.set_write_timeout(options.read_timeout_seconds, 0);
    http.set_payload_max_length(options.max_body_bytes);
    routes();
  }

  void routes();
  bool authorized(const httplib::Request& req) const;
  void chat(const Json& body, const httplib::Request& req, httplib::Response& res);
  void completions(const Json& body, const httplib::Request& req, httplib::Response& res);
  void run(std::vector<GenerationJob> jobs, const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<Exchange> exchange_for(const GenerationJob& job, std::shared_ptr<Channel> channel) const;
  void collect(const Choices& all, int fd, httplib::Response& res);
  void stream(std::shared_ptr<const Choices> all, int fd, httplib::Response& res);
  void count(const httplib::Request& req, const httplib::Response& res);
  JobContext job_context() const {
    return {model.tokenizer, model.eog_ids, model.engine.options().n_ctx, options.defaults.model_id};
  }

  ServedModel model;
  ServerOptions options;
  httplib::Server http;
  std::unique_ptr<ChatRenderer> renderer;
  std::mutex counts_mu;
  HttpCounts counts;
};

bool HttpServer::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + options.api_key;
}

void HttpServer::Impl::count(const httplib::Request& req, const httplib::Response& res) {
  static const char* known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
  std::string path = "other";
  for (const char* k : known)
    if (req.path == k) path = k;
  std::lock_guard lock(counts_mu);
  ++counts[{path, res.status}];
}

void HttpServer::Impl::routes() {
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) { count(req, res); });
  // Statuses the library sets itself (404, 413, 400 on a bad request line) get an
  // OpenAI error body too.
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404   ? "no such endpoint"
                                : res.status == 413 ? "the request body is too large"
                                                    : "HTTP error " + std::to_string(res.status);
    send_error(res, ApiError(res.status, message));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message += std::string(": ") + e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, message));
  });

  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  // Every route but /health needs the key. Checked in the handler, after the body
  // was read, so a refused request leaves the connection clean for the next one.
  const auto guarded = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!authorized(req))
          throw ApiError(401, "a valid API key is required (Authorization: Bearer KEY)", "", "invalid_api_key");
        handler(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    };
  };
  http.Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) {
    HttpCounts snapshot;
    {
      std::lock_guard lock(counts_mu);
      snapshot = counts;
    }
    res.set_content(prometheus_text(model.engine.metrics(), snapshot), "text/plain; version=0.0.4");
  }));
  http.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    const Json m = {{"id", options.defaults.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "zinc"},
                    {"context_length", model.engine.options().n_ctx}};
    res.set_content(dump({{"object", "list"}, {"data", Json::array({m})}}), "application/json");
  }));
  // POST bodies come through a content reader. httplib's plain handlers answer 413 to any
  // body over 8 KiB sent as application/x-www-form-urlencoded, which is what `curl -d`
  // sends, whatever the payload limit; and they do not hold a chunked body to that limit.
  const auto post = [this, guarded](const char* path, auto handler) {
    http.Post(path, [this, guarded, handler](const httplib::Request& req, httplib::Response& res,
                                             const httplib::ContentReader& read) {
      if (req.is_multipart_form_data()) {  // read through, or its rest would be taken for the next request
        const auto keep_going = [](auto&&...) { return true; };
        read(keep_going, keep_going);
        return send_error(res, ApiError(415, "the request body must be JSON, not multipart form data"));
      }
      // A request with neither Content-Length nor chunked encoding has no body (RFC 9112
      // 6.3); httplib would wait for the connection to close.
      const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
      std::string text;
      bool over = false;
      const bool whole = !has_body || read([&](const char* data, size_t n) {
        over = text.size() + n > options.max_body_bytes;
        if (!over) text.append(data, n);
        return !over;
      });
      if (!whole) {  // the error handler writes the body
        res.status = over || res.status == 413 ? 413 : 400;
        return;
      }
      guarded([&](const httplib::Request& q, httplib::Response& r) { handler(parse_body(text), q, r); })(req, res);
    });
  };
  post("/v1/chat/completions", [this](const Json& body, const httplib::Request& q, httplib::Response& r) {
    chat(body, q, r);
  });
  post("/v1/completions", [this](const Json& body, const httplib::Request& q, httplib::Response& r) {
    completions(body, q, r);
  });
}

void HttpServer::Impl::chat(const Json& body, const httplib::Request& req, httplib::Response& res) {
  const ChatRequest r = parse_chat_request(body, options.defaults);
  if (!renderer) throw ApiError(400, "the model has no chat template; use /v1/completions");
  run(make_chat_jobs(r, renderer->render(r), job_context()), req, res);
}

void HttpServer::Impl::completions(const Json& body, const httplib::Request& req, httplib::Response& res) {
  run(make_completion_jobs(parse_completion_request(body, options.defaults), job_context()), req, res);
}

// The exchange of one choice, with its callbacks' state: the echoed prompt's text and,
// with logprobs, its first token (which nothing predicts).
std::shared_ptr<Exchange> HttpServer::Impl::exchange_for(const GenerationJob& job,
                                                         std::shared_ptr<Channel> channel) const {
  auto ex = std::make_shared<Exchange>(model.tokenizer, job.reply, std::move(channel));
  if (!job.echo) return ex;
  ex->echo.emplace();
  ex->echo->content = job.echo_text;
  if (job.logprobs) {
    TokenEvent first;
    first.token = job.request.prompt.front();
    ex->echo->logprobs.push_back(ex->stream.logprobs_of(first));
    ex->echo->logprobs.back().predicted = false;
  }
  return ex;
}

void HttpServer::Impl::run(std::vector<GenerationJob> jobs, const httplib::Request& req, httplib::Response& res) {
  const int64_t n_ctx = model.engine.options().n_ctx;
  for (const GenerationJob& job : jobs) {
    const int64_t n_prompt = static_cast<int64_t>(job.request.prompt.size());
    if (n_prompt == 0) throw ApiError(400, "the prompt is empty", "prompt");
    if (n_prompt >= n_ctx)
      throw ApiError(400,
                     "the prompt has " + std::to_string(n_prompt) + " tokens; the context holds " +
                         std::to_string(n_ctx) + " (prompt and reply together)",
                     job.chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const int fd = find_connection_fd(req.remote_addr, req.remote_port, req.local_port);
  auto all = std::make_shared<Choices>();
  all->jobs = std::move(jobs);
  const auto channel = std::make_shared<Channel>();
  for (GenerationJob& job : all->jobs) {
    auto ex = exchange_for(job, channel);
    RequestCallbacks callbacks;
    callbacks.on_token = [ex](const TokenEvent& ev) {
      if (ex->client_gone) return false;
      ex->post_echo();
      ex->post(ex->stream.push(ev));
      return !ex->stream.stopped();
    };
    callbacks.on_finish = [ex](FinishReason reason, const RequestStats& stats, const std::string& error) {
      ex->post_echo();
      ReplyDelta rest = ex->stream.finish();
      std::lock_guard lock(ex->channel->mu);
      if (!rest.empty()) ex->pending.push_back(std::move(rest));
      ex->finished = true;
      ex->reason = reason;
      ex->stats = stats;
      ex->error = error;
      ex->channel->cv.notify_all();
    };
    if (job.echo && job.logprobs)
      callbacks.on_prompt = [ex](std::span<const TokenEvent> events) {
        for (const TokenEvent& ev : events) ex->echo->logprobs.push_back(ex->stream.logprobs_of(ev));
      };
    try {
      all->ids.push_back(model.engine.submit(std::move(job.request), std::move(callbacks)));
    } catch (const QueueFull& e) {
      all->cancel_all(model.engine);
      res.set_header("Retry-After", "1");
      throw ApiError(503, e.what(), "", "queue_full");
    } catch (const std::invalid_argument& e) {
      all->cancel_all(model.engine);
      throw ApiError(400, e.what());
    }
    all->exchanges.push_back(std::move(ex));
  }
  if (all->jobs.front().stream)
    stream(std::move(all), fd, res);
  else
    collect(*all, fd, res);
}

void HttpServer::Impl::collect(const Choices& all, int fd, httplib::Response& res) {
  const auto& exchanges = all.exchanges;
  bool gone = false;
  {
    Channel& ch = *exchanges.front()->channel;
    std::unique_lock lock(ch.mu);
    while (!all.all_finished()) {
      ch.cv.wait_for(lock, kWatchInterval);
      if (!all.all_finished() && !gone && peer_closed(fd)) {
        gone = true;
        all.cancel_all(model.engine);
      }
    }
  }
  std::vector<Choice> choices(exchanges.size());
  for (size_t k = 0; k < exchanges.size(); ++k) {
    Exchange& ex = *exchanges[k];  // finished: the engine thread is done with it
    for (auto& d : ex.pending) choices[k].reply.add(std::move(d));
    if (ex.reason == FinishReason::Error) throw ApiError(500, "generation failed: " + ex.error);
    if (ex.reason == FinishReason::Cancelled) throw ApiError(503, "the request was cancelled (server shutting down?)");
    choices[k].finish_reason = finish_reason_name(ex.reason, !choices[k].reply.calls.empty());
  }
  const GenerationJob& job = all.jobs.front();
  const RequestStats usage = all.usage();
  const Json body = job.chat ? chat_completion(job.meta, choices, usage, job.logprobs)
                             : text_completion(job.meta, choices, usage, job.logprobs);
  res.set_content(dump(body), "application/json");
}

// Server-sent events for every choice as its tokens come, each chunk naming its
// choice's index; a choice's finish chunk when it ends; once all have ended, the usage
// (when asked for) and [DONE]. A choice that fails ends the stream with an error event.
void HttpServer::Impl::stream(std::shared_ptr<const Choices> all, int fd, httplib::Response& res) {
  Engine& engine = model.engine;
  res.set_header("Cache-Control", "no-cache");
  auto provider = [all, fd, &engine](size_t, httplib::DataSink& sink) {
    const auto& exchanges = all->exchanges;
    const size_t n = exchanges.size();
    const GenerationJob& job = all->jobs.front();  // meta, chat, logprobs and usage: the same for every choice
    const ReplyMeta& meta = job.meta;
    Channel& channel = *exchanges.front()->channel;
    const auto gone = [&] {
      all->cancel_all(engine);
      return false;  // aborts the connection
    };
    const auto send = [&](const Json& event) {
      const std::string s = sse_event(event);
      return sink.write(s.data(), s.size());
    };
    const auto end = [&] {
      const std::string done = "data: [DONE]\n\n";
      if (!sink.write(done.data(), done.size())) return gone();
      sink.done();
      return true;
    };
    if (job.chat)
      for (size_t k = 0; k < n; ++k)
        if (!send(chat_chunk(meta, k, {{"role", "assistant"}, {"content", ""}}, "", nullptr))) return gone();
    struct Progress {
      size_t calls = 0, text_offset = 0;
      bool made_calls = false, ended = false;
    };
    std::vector<Progress> progress(n);
    for (size_t ended = 0; ended < n;) {
      std::vector<std::deque<ReplyDelta>> batches(n);
      std::vector<bool> finished(n);
      {
        std::unique_lock lock(channel.mu);
        channel.cv.wait_for(lock, kWatchInterval, [&] {
          for (size_t k = 0; k < n; ++k)
            if (!exchanges[k]->pending.empty() || (exchanges[k]->finished && !progress[k].ended)) return true;
          return false;
        });
        for (size_t k = 0; k < n; ++k) {
          batches[k].swap(exchanges[k]->pending);
          finished[k] = exchanges[k]->finished;
        }
      }
      for (size_t k = 0; k < n; ++k) {
        Progress& p = progress[k];
        for (const ReplyDelta& d : batches[k]) {
          const auto* lp = job.logprobs ? &d.logprobs : nullptr;
          bool ok;
          if (job.chat) {
            ok = send(chat_chunk(meta, k, chat_delta(d, meta.id, p.calls), "", lp));
            p.calls += d.calls.size();
            p.made_calls = p.made_calls || !d.calls.empty();
          } else {
            ok = send(text_chunk(meta, k, d.content, "", lp, p.text_offset));
            p.text_offset += d.content.size();
          }
          if (!ok) return gone();
        }
        if (!finished[k] || p.ended) continue;
        p.ended = true;
        ++ended;
        const Exchange& ex = *exchanges[k];  // finished: the engine thread is done with it
        if (ex.reason == FinishReason::Error || ex.reason == FinishReason::Cancelled) {
          const ApiError e(ex.reason == FinishReason::Error ? 500 : 503,
                           ex.reason == FinishReason::Error ? "generation failed: " + ex.error
                                                            : "the request was cancelled");
          all->cancel_all(engine);
          if (!send(e.body())) return gone();
          return end();
        }
        const std::string finish = finish_reason_name(ex.reason, p.made_calls);
        if (!send(job.chat ? chat_chunk(meta, k, Json::object(), finish, nullptr)
                           : text_chunk(meta, k, "", finish, nullptr, p.text_offset)))
          return gone();
      }
      if (ended < n && peer_closed(fd)) return gone();
    }
    if (job.include_usage) {
      const RequestStats usage = all->usage();
      if (!send(job.chat ? chat_usage_chunk(meta, usage) : text_usage_chunk(meta, usage))) return gone();
    }
    return end();
  };
  // Runs when the response ends, also when the library gave up on the client.
  auto release = [all, &engine](bool) {
    std::lock_guard lock(all->exchanges.front()->channel->mu);
    if (!all->all_finished()) all->cancel_all(engine);
  };
  res.set_chunked_content_provider("text/event-stream", provider, release);
}

HttpServer::HttpServer(ServedModel model, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const ServerOptions& o = impl_->options;
  if (o.port == 0) {
    const int port = impl_->http.bind_to_any_port(o.host);
    if (port <= 0) throw std::runtime_error("cannot bind " + o.host);
    return port;
  }
  if (!impl_->http.bind_to_port(o.host, o.port))
    throw std::runtime_error("cannot bind " + o.host + ":" + std::to_string(o.port));
  return o.port;
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }

void HttpServer::stop() { impl_->http.stop(); }

}  // namespace zinc::server
