// The serving engine (see engine.h).
#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "runtime/generator.h"
#include "runtime/prefix_cache.h"

namespace zinc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Log-softmax of the chosen token and the k most likely, from a logits row.
void fill_logprobs(std::span<const float> logits, int k, TokenEvent& ev) {
  const double log_z = row_log_z(logits);
  ev.logprob = static_cast<float>(logits[ev.token] - log_z);
  if (k <= 0) return;
  std::vector<Candidate> top;
  top_k_of_row(logits, static_cast<int>(std::min<size_t>(static_cast<size_t>(k), logits.size())), top);
  for (const Candidate& c : top) ev.top.push_back({c.id, static_cast<float>(c.logit - log_z)});
}

}  // namespace

struct Engine::Impl {
  struct Request {
    uint64_t id = 0;
    RequestOptions options;
    RequestCallbacks callbacks;
    std::unique_ptr<Sampler> sampler;
    RequestStats stats;
    Clock::time_point submitted, admitted, first_token;
  };
  // One sequence of the batch. `tokens` is what the sequence holds or is about to:
  // the prompt, then each generated token once it is to be fed back.
  struct Slot {
    SequenceState seq;
    std::unique_ptr<Request> request;  // null: free
    std::vector<int32_t> tokens;
    int64_t prompt_len = 0;
    uint64_t admitted_order = 0;
    bool prefilling() const { return seq.n_past < prompt_len; }
  };

  Impl(Model& m, Backend& b, const EngineOptions& o) : model(m), backend(b), options(o) {
    if (o.n_parallel < 1 || o.n_ctx < 2 || o.prefix_block < 1 || o.prefix_checkpoint_tokens < 1 || o.max_queue < 0)
      throw std::invalid_argument(
          "engine: n_parallel, n_ctx, prefix_block, prefix_checkpoint_tokens and max_queue must be positive");
    if (o.warm_up_tokens < 0) throw std::invalid_argument("engine: warm_up_tokens must not be negative");
    if (o.step_tokens < o.prefix_block + o.n_parallel)
      throw std::invalid_argument("engine: step_tokens must be at least prefix_block + n_parallel");
    if (o.prefix_cache_bytes > 0) cache = std::make_unique<PrefixCache>(o.prefix_block, o.prefix_cache_bytes);
    slots.resize(static_cast<size_t>(o.n_parallel));
    for (Slot& s : slots) s.seq = model.new_sequence(o.n_ctx);
    if (cache) cache->reserve(backend, slots.front().seq);  // a fresh server's first prompts do not pay for it
    next_ids = backend.alloc_persistent(DType::I32, {o.n_parallel});
    // A row per output row of a step: a scored prompt's chunk has many.
    row_params = backend.alloc_persistent(DType::I32, {kRowSamplingWords, o.step_tokens});
    score_ids = backend.alloc_persistent(DType::I32, {2 * o.step_tokens});  // a step has at most step_tokens rows
    score_out = backend.alloc_persistent(DType::F32, {2 * o.step_tokens});
    if (o.warm_up_tokens > 0) warm_up(o.warm_up_tokens);
    thread = std::thread([this] { run(); });
  }

  // The prompt (token 0 throughout, in chunks of at most a block as a request's) and
  // three greedy decode steps fed on the backend, as a lone request runs them (admit()
  // resets the slot before a request uses it). The prefix cache and the metrics see
  // none of it.
  void warm_up(int64_t n) {
    const auto t0 = Clock::now();
    SequenceState& seq = slots.front().seq;
    constexpr int64_t kSteps = 3;  // the graph is captured at the second identical step
    n = std::min(n, options.n_ctx - kSteps - 1);
    if (n < 1) return;
    const std::vector<int32_t> prompt(static_cast<size_t>(n), 0);
    Tensor ids = next_ids;
    ids.ne[0] = 1;
    for (int64_t p = 0; p < n; p += options.prefix_block) {
      const int64_t len = std::min(options.prefix_block, n - p);
      const bool last = p + len == n;
      const Tensor logits = model.forward(
          seq, std::span<const int32_t>(prompt).subspan(static_cast<size_t>(p), static_cast<size_t>(len)),
          last ? 1 : 0);
      if (last) pick_on_backend(backend, logits, nullptr, ids);
    }
    greedy_on_device(model, backend, seq, ids, kSteps);
    metrics.warm_up_seconds = seconds(t0, Clock::now());
  }

  ~Impl() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
  }

  uint64_t submit(RequestOptions request, RequestCallbacks callbacks) {
    const int64_t n = static_cast<int64_t>(request.prompt.size());
    if (n == 0) throw std::invalid_argument("the prompt is empty");
    if (n >= options.n_ctx)
      throw std::invalid_argument("the prompt has " + std::to_string(n) + " tokens; the context holds " +
                                  std::to_string(options.n_ctx) + " (prompt and reply together)");
    for (int32_t t : request.prompt)
      if (t < 0 || t >= model.n_vocab()) throw std::invalid_argument("token id " + std::to_string(t) + " out of range");
    if (request.max_tokens < (request.prompt_logprobs ? 0 : 1))
      throw std::invalid_argument("max_tokens must be at least 1 (0 only when scoring the prompt)");
    if (request.top_logprobs > 20) throw std::invalid_argument("top_logprobs must be at most 20");
    auto r = std::make_unique<Request>();
    r->sampler = std::make_unique<Sampler>(request.sampling);
    r->options = std::move(request);
    r->callbacks = std::move(callbacks);
    r->submitted = Clock::now();
    r->stats.prompt_tokens = n;
    std::lock_guard lock(mu);
    // Requests in slots or about to take one do not count against the queue.
    const int64_t queued = static_cast<int64_t>(waiting.size()) + metrics.requests_running - options.n_parallel;
    if (queued >= options.max_queue)
      throw QueueFull("the queue is full (" + std::to_string(options.max_queue) + " requests waiting)");
    r->id = ++last_id;
    const uint64_t id = r->id;
    waiting.push_back(std::move(r));
    ++metrics.requests_total;
    metrics.requests_waiting = static_cast<int64_t>(waiting.size());
    cv.notify_all();
    return id;
  }

  void cancel(uint64_t id) {
    std::lock_guard lock(mu);
    cancelled.insert(id);
    cv.notify_all();
  }

  // ---- the engine thread ---------------------------------------------------------
  void run() {
    for (;;) {
      std::vector<std::unique_ptr<Request>> admitted, dropped;
      std::unordered_set<uint64_t> cancel_now;
      {
        std::unique_lock lock(mu);
        cv.wait(lock,
                [&] { return stopping || !cancelled.empty() || has_active() || (!waiting.empty() && has_free()); });
        if (stopping) break;
        cancel_now.swap(cancelled);
        for (auto it = waiting.begin(); it != waiting.end();) {
          if (cancel_now.count((*it)->id)) {
            dropped.push_back(std::move(*it));
            it = waiting.erase(it);
          } else {
            ++it;
          }
        }
        for (size_t free = count_free(); free > 0 && !waiting.empty(); --free) {
          admitted.push_back(std::move(waiting.front()));
          waiting.pop_front();
          ++metrics.requests_running;
        }
        metrics.requests_waiting = static_cast<int64_t>(waiting.size());
      }
      for (auto& r : dropped) finish_request(*r, FinishReason::Cancelled, "");
      for (Slot& s : slots)
        if (s.request && cancel_now.count(s.request->id)) finish(s, FinishReason::Cancelled, "");
      for (auto& r : admitted) admit(std::move(r));
      step();
    }
    if (ahead) backend.wait_read(ahead->ticket);
    for (Slot& s : slots)
      if (s.request) finish(s, FinishReason::Cancelled, "");
    std::deque<std::unique_ptr<Request>> rest;
    {
      std::lock_guard lock(mu);
      rest.swap(waiting);
    }
    for (auto& r : rest) finish_request(*r, FinishReason::Cancelled, "");
  }

  bool has_active() const {
    return std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return s.request != nullptr; });
  }
  size_t count_free() const {
    return static_cast<size_t>(std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return !s.request; }));
  }
  bool has_free() const { return count_free() > 0; }

  void admit(std::unique_ptr<Request> r) {
    Slot& s = *std::find_if(slots.begin(), slots.end(), [](const Slot& x) { return !x.request; });
    r->admitted = Clock::now();
    r->stats.queue_seconds = seconds(r->submitted, r->admitted);
    const auto& prompt = r->options.prompt;
    s.tokens = prompt;
    s.prompt_len = static_cast<int64_t>(prompt.size());
    s.admitted_order = ++admissions;
    // Leave at least the last prompt token to compute: its logits start the reply.
    int64_t cached = 0;
    if (cache && !r->options.prompt_logprobs) cached = cache->restore(backend, prompt, s.prompt_len - 1, s.seq);
    else s.seq.reset(backend);
    r->stats.cached_tokens = cached;
    for (int32_t t : prompt) r->sampler->accept(t);
    s.request = std::move(r);
    std::lock_guard lock(mu);
    metrics.cached_tokens_total += cached;
  }

  // One forward pass over every active sequence.
  void step() {
    if (ahead) return step_ahead();
    std::vector<Slot*> order;
    for (Slot& s : slots)
      if (s.request) order.push_back(&s);
    if (order.empty()) return;
    // Decoding sequences first (one token each), then prompts in admission order.
    std::stable_sort(order.begin(), order.end(), [](const Slot* a, const Slot* b) {
      if (a->prefilling() != b->prefilling()) return !a->prefilling();
      return a->admitted_order < b->admitted_order;
    });
    std::vector<SequenceChunk> chunks;
    std::vector<Slot*> members;
    std::vector<bool> replies;  // per member: its last output row draws the request's next token
    std::vector<bool> scoring;  // per member: a scored prompt's chunk, a row per token
    int64_t budget = options.step_tokens;
    for (Slot* s : order) {
      const int64_t p = s->seq.n_past;
      const bool scores = s->prefilling() && s->request->options.prompt_logprobs;
      int64_t end = p + 1;
      if (s->prefilling()) {
        // A chunk never crosses a block boundary, so every prompt is cut at the same
        // positions whether or not a prefix was restored: identical arithmetic.
        const int64_t block = options.prefix_block;
        end = std::min(s->prompt_len, (p / block + 1) * block);
        if (scores) end = std::min(end, p + kScoredRows);
      }
      const int64_t n = end - p;
      if (n > budget) break;
      budget -= n;
      const bool reply = (!s->prefilling() || end == s->prompt_len) && s->request->options.max_tokens > 0;
      chunks.push_back({&s->seq,
                        std::span<const int32_t>(s->tokens).subspan(static_cast<size_t>(p), static_cast<size_t>(n)),
                        scores ? n : reply ? 1 : 0});
      members.push_back(s);
      replies.push_back(reply);
      scoring.push_back(scores);
    }
    if (members.size() == order.size() && decodes_on_backend(members)) {
      try {
        launch_on_backend(chunks, members, false);
      } catch (const std::exception& e) {
        for (Slot* s : members) finish(*s, FinishReason::Error, e.what());
      }
      return;
    }
    const int64_t V = model.n_vocab();
    // Output rows whose request the backend samples (greedy or top-k, penalties but
    // no DRY, processors or logprobs) take their token from the backend: 4 bytes read
    // instead of the row's n_vocab floats, and no pass over them on the host. So do the
    // rows of a scored prompt whose logprobs the backend computes (scored.token).
    std::vector<Request*> drawn;  // per output row: its request when drawn on the backend, else null
    std::vector<bool> host_row;   // per output row: the host reads it (unless drawn and picked)
    BackendScores scored;
    for (size_t i = 0; i < members.size(); ++i) {
      const Slot& s = *members[i];
      Request* r = s.request.get();
      for (int64_t j = 0; j < chunks[i].n_out; ++j) {
        const bool reply_row = replies[i] && j + 1 == chunks[i].n_out;
        const int64_t next = s.seq.n_past + j + 1;  // the prompt position a scoring row predicts
        const bool scores = scoring[i] && next < s.prompt_len;
        drawn.push_back(reply_row && draws_on_backend(*r) ? r : nullptr);
        scored.token.push_back(scores && scores_on_backend(*r) ? s.tokens[static_cast<size_t>(next)] : -1);
        host_row.push_back((reply_row && !drawn.back()) || (scores && scored.token.back() < 0));
      }
    }
    const int64_t n_out = static_cast<int64_t>(drawn.size());
    const auto n_picked = std::count_if(drawn.begin(), drawn.end(), [](const Request* r) { return r != nullptr; });
    std::vector<int32_t> picked;
    try {
      const Tensor* params = n_picked > 0 ? write_row_params(drawn, false) : nullptr;
      if (scored.any()) write_scored_tokens(scored);
      Tensor logits = model.forward_batch(chunks);
      host_logits.resize(static_cast<size_t>(n_out * V));
      if (n_picked > 0) picked = backend_picks(backend, logits, params);
      if (scored.any()) read_backend_scores(logits, scored);
      for (int64_t r = 0; r < n_out && n_picked > 0; ++r)  // rows whose draw the backend declined (left penalised)
        if (drawn[r] && picked[r] < 0) host_row[r] = true;
      const size_t row_bytes = static_cast<size_t>(V) * sizeof(float);
      if (n_out > 0 && std::all_of(host_row.begin(), host_row.end(), [](bool b) { return b; }))
        backend.read(logits, host_logits.data(), host_logits.size() * sizeof(float));
      else
        for (int64_t r = 0; r < n_out; ++r)
          if (host_row[r]) backend.read(logits, host_logits.data() + r * V, row_bytes, r * row_bytes);
    } catch (const std::exception& e) {
      for (Slot* s : members) finish(*s, FinishReason::Error, e.what());
      return;
    }
    int64_t row = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      Slot& s = *members[i];
      const int64_t n_rows = chunks[i].n_out;
      const auto row_at = [&](int64_t r) {
        return std::span<float>(host_logits).subspan(static_cast<size_t>(r * V), static_cast<size_t>(V));
      };
      store_prefix(s);
      const int64_t start = s.seq.n_past - static_cast<int64_t>(chunks[i].tokens.size());
      if (scoring[i]) score_prompt(s, start, row, n_rows, scored);
      row += n_rows;
      if (!replies[i]) {
        if (s.request->options.max_tokens == 0 && s.seq.n_past == s.prompt_len) {
          note_first_token(*s.request);
          finish(s, FinishReason::Length, "");
        }
        continue;
      }
      const int64_t r = row - 1;
      if (drawn[r] && picked[r] >= 0) take(s, picked[r], {});
      else if (drawn[r]) take(s, draw_from_row(row_at(r), drawn_params[r]), {});  // declined, read above
      else sample(s, row_at(r));
    }
    if (cache) {
      std::lock_guard lock(mu);
      metrics.prefix_cache_bytes = cache->bytes();
      metrics.prefix_cache_entries = cache->entries();
      metrics.prefix_cache_checkpoints = cache->checkpoints();
    }
  }

  // ---- decoding one step ahead ------------------------------------------------------
  // When every active sequence decodes with its token drawn on the backend (argmax or
  // sample_rows), the engine queues step k + 1, fed on the backend with step k's tokens
  // (next_ids), before it reads them: the host's work for a step (reading, streaming,
  // building the next batch) overlaps the step before on the device, as
  // greedy_on_device() does.
  // A sequence that ends at step k (end of generation, a stop, a cancel) has its row
  // of step k + 1 dropped: its slot is reset when a request takes it again.
  struct Ahead {
    std::vector<Slot*> members;     // in batch order
    std::vector<uint64_t> request;  // each member's request id when queued
    std::vector<int32_t> ids;       // the step's tokens, once the read is done
    uint64_t ticket = 0;
  };

  // Running ahead also needs draws the backend never declines (top-k on).
  bool decodes_on_backend(const std::vector<Slot*>& members) const {
    return !members.empty() && std::all_of(members.begin(), members.end(), [&](const Slot* s) {
             return !s->prefilling() && draws_on_backend(*s->request) && !s->request->sampler->may_decline();
           });
  }

  // Step k + 1 may be queued before step k's tokens are read: every member draws on
  // the backend and step k ends none of them by length or context (whose step k + 1
  // would be wasted, or would not fit), or has its state stored in the prefix cache
  // (which must happen before step k + 1 changes it). n_past already counts step k.
  bool can_run_ahead(const std::vector<Slot*>& members) const {
    if (!decodes_on_backend(members)) return false;
    return std::none_of(members.begin(), members.end(), [&](const Slot* s) {
      const int64_t past = s->seq.n_past;
      return past + 1 >= s->seq.n_ctx || s->request->stats.generated_tokens + 1 >= s->request->options.max_tokens ||
             (cache && past % options.prefix_block == 0);
    });
  }

  // Queues one step over the members (chunks: their one token each, or none when
  // fed_from_next_ids: then the step before's tokens, not yet taken) with their tokens
  // drawn into next_ids, and the read of those.
  void launch_on_backend(const std::vector<SequenceChunk>& chunks, const std::vector<Slot*>& members,
                         bool fed_from_next_ids) {
    std::vector<Request*> drawn;
    for (Slot* s : members) drawn.push_back(s->request.get());
    const Tensor* params = write_row_params(drawn, fed_from_next_ids);
    const Tensor logits = model.forward_batch(chunks);
    Tensor ids = next_ids;
    ids.ne[0] = static_cast<int64_t>(members.size());
    pick_on_backend(backend, logits, params, ids);
    auto a = std::make_unique<Ahead>();
    a->members = members;
    for (const Slot* s : members) a->request.push_back(s->request->id);
    a->ids.resize(members.size());
    a->ticket = backend.read_async(ids, a->ids.data(), a->ids.size() * sizeof(int32_t));
    ahead = std::move(a);
  }

  // Step k is in flight: queue step k + 1 first when the batch stays as it is, then
  // take step k's tokens.
  void step_ahead() {
    std::unique_ptr<Ahead> done = std::move(ahead);
    // The same batch: every active sequence is a member, still on the same request.
    bool same = slots.size() - count_free() == done->members.size();
    for (size_t i = 0; same && i < done->members.size(); ++i)
      same = done->members[i]->request && done->members[i]->request->id == done->request[i];
    if (same && can_run_ahead(done->members)) {
      static const int32_t kFedOnDevice = 0;  // sizes a chunk: its id comes from next_ids
      std::vector<Tensor> fed(done->members.size());
      std::vector<SequenceChunk> chunks;
      for (size_t i = 0; i < done->members.size(); ++i) {
        fed[i] = next_ids;
        fed[i].ne[0] = 1;
        fed[i].data = static_cast<int32_t*>(next_ids.data) + i;
        chunks.push_back({&done->members[i]->seq, std::span(&kFedOnDevice, 1), 1, &fed[i]});
      }
      try {
        launch_on_backend(chunks, done->members, true);
      } catch (const std::exception&) {
        // Nothing queued: the step after this one runs on its own and reports the error.
      }
    }
    backend.wait_read(done->ticket);
    const int64_t steps_ahead = ahead ? 1 : 0;
    for (size_t i = 0; i < done->members.size(); ++i) {
      Slot& s = *done->members[i];
      if (!s.request || s.request->id != done->request[i]) continue;  // ended (cancelled) meanwhile
      if (!ahead) store_prefix(s);  // running ahead waits for steps that end no block (can_run_ahead)
      take(s, done->ids[i], {}, steps_ahead);
    }
    if (!ahead) return;
    const auto& queued = ahead->members;
    if (std::none_of(queued.begin(), queued.end(), [](const Slot* s) { return s->request != nullptr; })) {
      // Every member ended: nothing will take the step's tokens.
      backend.wait_read(ahead->ticket);
      ahead.reset();
    }
  }

  // A sequence that has just absorbed a whole prefix block leaves its KV rows in the
  // cache, and its recurrent state where a later prompt is likely to resume: at the
  // prompt's last whole block (the next turn of a chat extends the prompt) and every
  // prefix_checkpoint_tokens (where prompts that share a start branch off, or a next
  // turn that keeps the reply resumes). A checkpoint costs far more than a block's KV
  // rows (PrefixCache), so short blocks do not all get one.
  void store_prefix(const Slot& s) {
    const int64_t past = s.seq.n_past, block = options.prefix_block;
    if (!cache || past % block != 0 || s.request->options.prompt_logprobs) return;
    const bool checkpoint = past % std::max(block, options.prefix_checkpoint_tokens) < block ||
                            (past <= s.prompt_len && s.prompt_len - past < block);
    cache->store(backend, std::span<const int32_t>(s.tokens).first(static_cast<size_t>(past)), s.seq, checkpoint);
  }

  // ---- scoring prompts -----------------------------------------------------------
  // A scored prompt's logprobs come from the backend (token_logprobs) when they need no
  // more than the top-1, which is the row's argmax: two floats and an id a row are read
  // instead of n_vocab floats, and the rows' log-sum-exps run on the device.
  struct BackendScores {
    std::vector<int32_t> token;  // per output row: the prompt token it scores on the backend, or -1
    std::vector<float> logprob;  // {n_out, 2}: each row's logprob of its token, then of its best
    std::vector<int32_t> best;   // per output row: its argmax
    bool any() const {
      return std::any_of(token.begin(), token.end(), [](int32_t t) { return t >= 0; });
    }
  };

  bool scores_on_backend(const Request& r) const { return r.options.top_logprobs <= 1; }

  // Before the pass, as write_row_params.
  void write_scored_tokens(const BackendScores& scored) {
    std::vector<int32_t> ids(scored.token);
    for (int32_t& t : ids) t = std::max(t, 0);  // rows that score nothing: any valid id
    backend.write(score_ids, ids.data(), ids.size() * sizeof(int32_t));
  }

  // The rows' argmax goes after their tokens in score_ids, so one token_logprobs call
  // takes both.
  void read_backend_scores(const Tensor& logits, BackendScores& scored) {
    const int64_t n_out = static_cast<int64_t>(scored.token.size());
    Tensor ids = score_ids, best = score_ids, out = score_out;
    ids.ne[0] = n_out, ids.ne[1] = 2;
    best.ne[0] = n_out;
    best.data = static_cast<int32_t*>(score_ids.data) + n_out;
    out.ne[0] = n_out, out.ne[1] = 2;
    backend.argmax(logits, best);
    backend.token_logprobs(logits, ids, out);
    scored.logprob.resize(static_cast<size_t>(2 * n_out));
    scored.best.resize(static_cast<size_t>(n_out));
    backend.read(out, scored.logprob.data(), scored.logprob.size() * sizeof(float));
    backend.read(best, scored.best.data(), scored.best.size() * sizeof(int32_t));
  }

  // A scoring request's chunk of n_rows tokens from position `start`, whose rows begin
  // at output row `row`: each row's logprob of the prompt token after it, while there
  // is one, from the backend (scored) or from the row read to the host.
  void score_prompt(Slot& s, int64_t start, int64_t row, int64_t n_rows, const BackendScores& scored) {
    Request& r = *s.request;
    const size_t V = static_cast<size_t>(model.n_vocab()), n_out = scored.token.size();
    std::vector<TokenEvent> events;
    for (int64_t j = 0; j < n_rows && start + j + 1 < s.prompt_len; ++j) {
      const size_t at = static_cast<size_t>(row + j);
      TokenEvent ev;
      ev.token = s.tokens[static_cast<size_t>(start + j + 1)];
      if (scored.token[at] >= 0) {
        ev.logprob = scored.logprob[at];
        if (r.options.top_logprobs == 1) ev.top.push_back({scored.best[at], scored.logprob[n_out + at]});
      } else {
        fill_logprobs(std::span<const float>(host_logits).subspan(at * V, V), std::max(r.options.top_logprobs, 0),
                      ev);
      }
      events.push_back(std::move(ev));
    }
    if (!events.empty() && r.callbacks.on_prompt) r.callbacks.on_prompt(events);
  }

  bool draws_on_backend(const Request& r) const {
    return r.options.processors.empty() && r.options.top_logprobs < 0 && r.sampler->draws_from_row(model.n_vocab());
  }

  // The step's draw parameters for pick_on_backend, one per output row (`drawn`: its
  // request, or null for rows the host samples, which get a placeholder top-1),
  // written with each drawing request's random number and penalty window; or null
  // when every drawing request is greedy without penalties, for which the argmax
  // serves. fed_tokens_unread: the rows' last tokens are in next_ids, not yet taken,
  // and the backend completes the windows with them. Called before the step's forward
  // pass: a write inside it would end the backend's graph replay.
  const Tensor* write_row_params(const std::vector<Request*>& drawn, bool fed_tokens_unread) {
    if (std::all_of(drawn.begin(), drawn.end(), [](const Request* r) { return !r || r->sampler->picks_argmax(); }))
      return nullptr;
    drawn_params.assign(drawn.size(), RowSampling{});
    for (size_t i = 0; i < drawn.size(); ++i)
      if (drawn[i]) drawn_params[i] = drawn[i]->sampler->next_row_sampling(fed_tokens_unread);
    backend.write(row_params, drawn_params.data(), drawn_params.size() * sizeof(RowSampling));
    return &row_params;
  }

  // The request's processors and sampler chain on its logits row, then take().
  void sample(Slot& s, std::span<float> logits) {
    Request& r = *s.request;
    for (auto& p : r.options.processors) p->process(logits);
    if (std::none_of(logits.begin(), logits.end(),
                     [](float l) { return l > -std::numeric_limits<float>::infinity(); })) {
      note_first_token(r);
      finish(s, FinishReason::Error, "the constraints allow no next token");
      return;
    }
    take(s, r.sampler->sample(logits), logits);
  }

  void note_first_token(Request& r) {
    if (r.stats.generated_tokens > 0) return;
    r.first_token = Clock::now();
    r.stats.prompt_seconds = seconds(r.admitted, r.first_token);
    std::lock_guard lock(mu);
    metrics.prompt_tokens_total += r.stats.prompt_tokens;
    metrics.prompt_seconds_total += r.stats.prompt_seconds;
  }

  // The request's next token: streamed and fed back, or the end of the request.
  // `logits`: the row it was sampled from (for logprobs; empty when picked on the backend).
  void take(Slot& s, int32_t token, std::span<const float> logits, int64_t steps_ahead = 0) {
    Request& r = *s.request;
    note_first_token(r);
    TokenEvent ev;
    ev.token = token;
    r.sampler->accept(ev.token);
    for (auto& p : r.options.processors) p->accept(ev.token);
    const auto& eog = r.options.eog_ids;
    if (std::find(eog.begin(), eog.end(), ev.token) != eog.end()) {
      finish(s, FinishReason::EndOfGeneration, "");
      return;
    }
    if (r.options.top_logprobs >= 0) fill_logprobs(logits, r.options.top_logprobs, ev);
    ++r.stats.generated_tokens;
    {
      std::lock_guard lock(mu);
      ++metrics.generated_tokens_total;
    }
    if (!r.callbacks.on_token(ev)) return finish(s, FinishReason::Stopped, "");
    // The sequence holds the prompt and all but this token: stop when prompt and
    // reply together fill the context.
    if (r.stats.generated_tokens >= r.options.max_tokens || s.seq.n_past - steps_ahead + 1 >= s.seq.n_ctx)
      return finish(s, FinishReason::Length, "");
    s.tokens.push_back(ev.token);
  }

  void finish(Slot& s, FinishReason reason, const std::string& error) {
    std::unique_ptr<Request> r = std::move(s.request);
    {
      std::lock_guard lock(mu);
      --metrics.requests_running;
    }
    finish_request(*r, reason, error);
  }

  void finish_request(Request& r, FinishReason reason, const std::string& error) {
    if (r.stats.generated_tokens > 0) r.stats.generation_seconds = seconds(r.first_token, Clock::now());
    {
      std::lock_guard lock(mu);
      metrics.generation_seconds_total += r.stats.generation_seconds;
    }
    if (r.callbacks.on_finish) r.callbacks.on_finish(reason, r.stats, error);
  }

  Model& model;
  Backend& backend;
  const EngineOptions options;
  std::unique_ptr<PrefixCache> cache;
  std::vector<Slot> slots;
  std::vector<float> host_logits;
  Tensor next_ids;               // I32 {n_parallel}: the tokens of the step in flight
  Tensor row_params;             // I32 {kRowSamplingWords, step_tokens}: RowSampling per output row of a step
  Tensor score_ids, score_out;   // I32 / F32 {2 · rows}: BackendScores' tokens and argmax, and their logprobs
  std::vector<RowSampling> drawn_params;  // what write_row_params wrote, for a declined row's draw on the host
  std::unique_ptr<Ahead> ahead;  // the step in flight, whose tokens are not read yet
  uint64_t admissions = 0;

  mutable std::mutex mu;  // guards what the callers' threads touch: below
  std::condition_variable cv;
  std::deque<std::unique_ptr<Request>> waiting;
  std::unordered_set<uint64_t> cancelled;
  EngineMetrics metrics;
  uint64_t last_id = 0;
  bool stopping = false;
  std::thread thread;  // last: starts after everything above exists
};

Engine::Engine(Model& model, Backend& backend, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(model, backend, options)) {}
Engine::~Engine() = default;

uint64_t Engine::submit(RequestOptions request, RequestCallbacks callbacks) {
  return impl_->submit(std::move(request), std::move(callbacks));
}
void Engine::cancel(uint64_t id) { impl_->cancel(id); }
EngineMetrics Engine::metrics() const {
  std::lock_guard lock(impl_->mu);
  return impl_->metrics;
}
const EngineOptions& Engine::options() const { return impl_->options; }
const Model& Engine::model() const { return impl_->model; }

}  // namespace zinc
