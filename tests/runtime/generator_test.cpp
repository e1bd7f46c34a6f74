// The generation loop on a tiny random model: greedy output equals a hand-written
// forward/argmax loop whatever the prefill chunking, and each way of stopping
// leaves the sequence and the result as documented, for greedy steps that run ahead
// on the backend and for a sampler on the host; sampling drawn on the backend (top-k,
// penalties) equals the host's chain.
#include "runtime/generator.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "model/model_test_util.h"

namespace zinc {
namespace {

class Generator : public ::testing::Test {
 protected:
  void SetUp() override {
    synth::Options opt;
    opt.arch = "qwen35moe";
    opt.preset = "tiny";
    file_ = gguf::GgufFile::open(test::synth_model(opt, 11));
    backend_ = make_cpu_backend(2);
    model_ = load_model(*file_, *backend_);
    for (int i = 0; i < 9; ++i) prompt_.push_back(static_cast<int32_t>((i * 37 + 5) % model_->n_vocab()));
  }

  // Greedy continuation written directly against Model::forward, feeding `tokens`
  // (the prompt unless given) `chunk` tokens at a time.
  std::vector<int32_t> reference_greedy(size_t chunk, int n, const std::vector<int32_t>& given = {}) {
    const std::vector<int32_t>& tokens = given.empty() ? prompt_ : given;
    SequenceState seq = model_->new_sequence(64);
    std::vector<float> row(model_->n_vocab());
    Tensor l;
    for (size_t i = 0; i < tokens.size(); i += chunk)
      l = model_->forward(seq, std::span(tokens).subspan(i, std::min(chunk, tokens.size() - i)), 1);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      backend_->read(l, row.data(), row.size() * sizeof(float));
      out.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      l = model_->forward(seq, std::span(out).subspan(out.size() - 1, 1), 1);
    }
    return out;
  }

  // Greedy decoding (on the backend, steps run ahead), or with `on_host` a sampler
  // that reads every logits row (DRY, which only the host runs, too weak to change
  // the pick).
  GenerationResult run(SequenceState& seq, GenerateOptions opt, const TokenCallback& cb = nullptr,
                       bool on_host = false, std::span<const int32_t> prompt = {}) {
    SamplerParams params;
    params.temperature = 0;
    if (on_host) params.dry_multiplier = 1e-6f;
    Sampler sampler(params);
    EXPECT_EQ(sampler.picks_argmax(), !on_host);
    std::vector<int32_t> streamed;
    GenerationResult r =
        generate(*model_, *backend_, seq, prompt.empty() ? prompt_ : prompt, sampler, opt, [&](int32_t t) {
          streamed.push_back(t);
          return cb ? cb(t) : true;
        });
    EXPECT_EQ(streamed, r.tokens);  // every token reached the callback, in order
    return r;
  }

  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> prompt_;
};

TEST_F(Generator, GreedyOnDeviceEqualsTheHostLoop) {
  // Tokens fed back in backend memory and read one step behind: the same continuation.
  const std::vector<int32_t> want = reference_greedy(prompt_.size(), 12);
  SequenceState seq = model_->new_sequence(64);
  Tensor next = backend_->alloc_persistent(DType::I32, {1});
  backend_->argmax(model_->forward(seq, prompt_, 1), next);
  int32_t first = -1;
  backend_->read(next, &first, sizeof first);
  std::vector<int32_t> got{first};
  const std::vector<int32_t> rest = greedy_on_device(*model_, *backend_, seq, next, 11);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(seq.n_past, static_cast<int64_t>(prompt_.size()) + 11);
  EXPECT_TRUE(greedy_on_device(*model_, *backend_, seq, next, 0).empty());
}

TEST_F(Generator, GreedyMatchesForwardArgmaxForEveryChunking) {
  for (size_t chunk : {size_t{1}, size_t{4}, size_t{512}}) {
    const std::vector<int32_t> want = reference_greedy(chunk, 8);
    SequenceState seq = model_->new_sequence(64);
    GenerateOptions opt;
    opt.max_tokens = 8;
    opt.prefill_chunk = static_cast<int64_t>(chunk);
    const GenerationResult r = run(seq, opt);
    EXPECT_EQ(r.tokens, want) << "prefill chunk " << chunk;
    EXPECT_EQ(r.stop, StopReason::MaxTokens);
    // The last token was streamed but not fed.
    EXPECT_EQ(r.not_absorbed, std::vector<int32_t>{want.back()});
    EXPECT_EQ(seq.n_past, static_cast<int64_t>(prompt_.size()) + 7);
    EXPECT_EQ(r.stats.prompt_tokens, static_cast<int64_t>(prompt_.size()));
    EXPECT_EQ(r.stats.generated_tokens, 8);
    EXPECT_GT(r.stats.prompt_tokens_per_second(), 0);
    EXPECT_GT(r.stats.generation_tokens_per_second(), 0);
  }
}

TEST_F(Generator, StopsAtEndOfGenerationWithoutStreamingIt) {
  const std::vector<int32_t> want = reference_greedy(512, 6);
  const int32_t eog = want[3];
  const auto first = std::find(want.begin(), want.end(), eog) - want.begin();
  for (bool on_host : {false, true}) {
    SequenceState seq = model_->new_sequence(64);
    GenerateOptions opt;
    opt.max_tokens = 6;
    opt.eog_ids = {eog};
    const GenerationResult r = run(seq, opt, nullptr, on_host);
    EXPECT_EQ(r.stop, StopReason::EndOfGeneration);
    EXPECT_EQ(r.tokens, std::vector<int32_t>(want.begin(), want.begin() + first));
    EXPECT_TRUE(r.not_absorbed.empty());
    EXPECT_EQ(r.end_token, eog);
    // Greedy steps ran ahead of the end token, so the sequence took it; a host
    // sampler's did not.
    EXPECT_EQ(r.end_absorbed, !on_host);
    EXPECT_EQ(seq.n_past, static_cast<int64_t>(prompt_.size()) + first + (on_host ? 0 : 1));
  }
}

TEST_F(Generator, CallbackCanStop) {
  for (bool on_host : {false, true}) {
    SequenceState seq = model_->new_sequence(64);
    GenerateOptions opt;
    opt.max_tokens = 10;
    int calls = 0;
    const GenerationResult r = run(seq, opt, [&](int32_t) { return ++calls < 2; }, on_host);
    EXPECT_EQ(r.stop, StopReason::Callback);
    EXPECT_EQ(r.tokens.size(), 2u);
    // A greedy step after the last token was queued before the callback said stop.
    EXPECT_EQ(r.not_absorbed.size(), on_host ? 1u : 0u);
    EXPECT_EQ(seq.n_past, static_cast<int64_t>(prompt_.size()) + (on_host ? 1 : 2));
  }
}

TEST_F(Generator, ANextTurnSeesExactlyWhatTheSequenceAbsorbed) {
  // As a chat goes on: the next turn feeds what the sequence is owed (not_absorbed),
  // the end token unless it was absorbed, then the new prompt; the reply equals one
  // computed from scratch on everything in order.
  const std::vector<int32_t> next{3, 1, 4, 1, 5};
  const std::vector<int32_t> want = reference_greedy(512, 6);
  for (bool on_host : {false, true})
    for (bool by_eog : {true, false}) {
      SequenceState seq = model_->new_sequence(64);
      GenerateOptions opt;
      opt.max_tokens = 6;
      if (by_eog) opt.eog_ids = {want[2]};
      int calls = 0;
      const GenerationResult r = run(seq, opt, [&](int32_t) { return by_eog || ++calls < 2; }, on_host);
      std::vector<int32_t> conversation = prompt_;  // every token, in order
      conversation.insert(conversation.end(), r.tokens.begin(), r.tokens.end());
      std::vector<int32_t> feed = r.not_absorbed;
      if (by_eog) {
        ASSERT_EQ(r.stop, StopReason::EndOfGeneration);
        conversation.push_back(r.end_token);
        if (!r.end_absorbed) feed.push_back(r.end_token);
      }
      feed.insert(feed.end(), next.begin(), next.end());
      GenerateOptions opt2;
      opt2.max_tokens = 4;
      const GenerationResult second = run(seq, opt2, nullptr, on_host, feed);
      conversation.insert(conversation.end(), next.begin(), next.end());
      EXPECT_EQ(second.tokens, reference_greedy(512, 4, conversation)) << "on_host " << on_host << " by_eog " << by_eog;
    }
}

TEST_F(Generator, SamplingDrawsOnTheBackendAsTheHostChain) {
  // Top-k sampling, with or without penalties, and greedy decoding with penalties are
  // drawn on the backend (sample_rows) with steps run ahead (each penalty window then
  // ends with the token the backend holds): the tokens of a host loop that reads
  // every row and samples it with the same seed, and an end token leaves the sequence
  // having absorbed it. A 4-token window slides within the 10 tokens. With top-k off
  // (settings 3 and 4) the steps go one at a time and the backend declines the rows
  // whose survivors it cannot bound, which the host then draws: the same tokens.
  const size_t n_vocab = static_cast<size_t>(model_->n_vocab());
  ASSERT_GT(n_vocab, static_cast<size_t>(kMaxRowTopK));
  std::vector<int32_t> unpenalised[3];  // setting 0's tokens per seed
  int declined = 0, drawn = 0;          // setting 3's rows, as the backend takes them
  for (int case_index = 0; case_index < 15; ++case_index) {
    const int setting = case_index / 3;
    const uint64_t seed = 1 + case_index % 3;
    SamplerParams p;  // top-k 40, top-p 0.95, min-p 0.05
    p.temperature = setting == 2 ? 0.0f : 1.5f;
    if (setting == 3) p.top_k = 0, p.min_p = 0.1f;  // min-p's cut lands on both sides of the 128 best
    if (setting == 4) p.top_k = 0, p.top_p = 0.6f, p.min_p = 0;
    // Negative penalties: recent tokens are boosted, so the draws depend on the window.
    if (setting == 1 || setting == 2 || setting == 4)
      p.repeat_penalty = 0.5f, p.frequency_penalty = -1.0f, p.presence_penalty = -2.0f;
    p.penalty_last_n = 4;
    p.seed = seed;
    Sampler host(p);
    for (int32_t t : prompt_) host.accept(t);
    SequenceState ref = model_->new_sequence(64);
    std::vector<float> row(n_vocab);
    Tensor l = model_->forward(ref, prompt_, 1);
    std::vector<int32_t> want;
    for (int i = 0; i < 10; ++i) {
      backend_->read(l, row.data(), row.size() * sizeof(float));
      if (setting == 3) {  // no penalties: the raw row is the one the backend draws from
        RowSampling s;
        s.top_k = 0, s.top_p = p.top_p, s.log_min_p = std::log(static_cast<double>(p.min_p));
        ++(row_draw_declined(row, s) ? declined : drawn);
      }
      want.push_back(host.sample(row));
      host.accept(want.back());
      l = model_->forward(ref, std::span(want).last(1), 1);
    }
    SCOPED_TRACE("setting " + std::to_string(setting) + " seed " + std::to_string(seed));
    if (setting == 0) unpenalised[seed - 1] = want;
    if (setting == 1) {
      EXPECT_NE(want, unpenalised[seed - 1]);  // the penalties change the draws
    }
    for (bool by_eog : {false, true}) {
      Sampler sampler(p);
      ASSERT_TRUE(sampler.draws_from_row(model_->n_vocab()));
      ASSERT_EQ(sampler.picks_argmax(), false);
      const bool ahead = !sampler.may_decline();  // an end token is absorbed only by a step run ahead
      ASSERT_EQ(ahead, setting < 3);
      SequenceState seq = model_->new_sequence(64);
      GenerateOptions opt;
      opt.max_tokens = 10;
      if (by_eog) opt.eog_ids = {want[4]};
      const GenerationResult r =
          generate(*model_, *backend_, seq, prompt_, sampler, opt, [](int32_t) { return true; });
      const auto end = by_eog ? std::find(want.begin(), want.end(), want[4]) - want.begin() : 10;
      EXPECT_EQ(r.tokens, std::vector<int32_t>(want.begin(), want.begin() + end));
      EXPECT_EQ(r.stop, by_eog ? StopReason::EndOfGeneration : StopReason::MaxTokens);
      EXPECT_EQ(r.end_absorbed, by_eog && ahead);
      EXPECT_EQ(seq.n_past, static_cast<int64_t>(prompt_.size()) + (by_eog ? end + (ahead ? 1 : 0) : 9));
    }
  }
  EXPECT_GT(declined, 0);  // both ways of a top-k-off draw were taken
  EXPECT_GT(drawn, 0);
}

TEST_F(Generator, NoTokenWantedStillTimesThePrompt) {
  SequenceState seq = model_->new_sequence(64);
  GenerateOptions opt;
  opt.max_tokens = 0;
  const GenerationResult r = run(seq, opt);
  EXPECT_EQ(r.stop, StopReason::MaxTokens);
  EXPECT_TRUE(r.tokens.empty() && r.not_absorbed.empty());
  EXPECT_EQ(seq.n_past, static_cast<int64_t>(prompt_.size()));
  EXPECT_EQ(r.stats.prompt_tokens, static_cast<int64_t>(prompt_.size()));
  EXPECT_GT(r.stats.prompt_seconds, 0);
}

TEST_F(Generator, StopsWhenTheContextIsFull) {
  const int64_t room = 3;
  SequenceState seq = model_->new_sequence(static_cast<int64_t>(prompt_.size()) + room);
  GenerateOptions opt;
  opt.max_tokens = 100;
  const GenerationResult r = run(seq, opt);
  EXPECT_EQ(r.stop, StopReason::ContextFull);
  // Each of the `room` free positions absorbs one token; one more is sampled from the last.
  EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), room + 1);
  EXPECT_EQ(seq.n_past, seq.n_ctx);
  EXPECT_EQ(r.tokens, reference_greedy(512, static_cast<int>(room + 1)));
}

TEST_F(Generator, ContinuesASequence) {
  // A second turn appends to what the sequence holds, as a chat does.
  SequenceState seq = model_->new_sequence(64);
  GenerateOptions opt;
  opt.max_tokens = 3;
  const GenerationResult first = run(seq, opt);
  const int64_t held = seq.n_past;
  const GenerationResult second = run(seq, opt);
  EXPECT_EQ(seq.n_past, held + static_cast<int64_t>(prompt_.size()) + 2);
  EXPECT_EQ(second.tokens.size(), 3u);
}

TEST_F(Generator, RejectsAPromptThatDoesNotFit) {
  SequenceState seq = model_->new_sequence(static_cast<int64_t>(prompt_.size()) - 1);
  SamplerParams p;
  Sampler sampler(p);
  EXPECT_THROW(generate(*model_, *backend_, seq, prompt_, sampler, {}, [](int32_t) { return true; }),
               std::invalid_argument);
  EXPECT_THROW(generate(*model_, *backend_, seq, {}, sampler, {}, [](int32_t) { return true; }),
               std::invalid_argument);
}

}  // namespace
}  // namespace zinc
