// The sampler chain: each stage against hand-computed values, greedy decoding, and
// the seeded draw's distribution and reproducibility.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace zinc {
namespace {

std::vector<int32_t> ids_of(const std::vector<Candidate>& c) {
  std::vector<int32_t> ids;
  for (const Candidate& x : c) ids.push_back(x.id);
  return ids;
}

// Candidates 0..n-1 whose logits are the logs of the given probabilities.
std::vector<Candidate> from_probs(const std::vector<double>& probs) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < probs.size(); ++i)
    c.push_back({static_cast<int32_t>(i), static_cast<float>(std::log(probs[i]))});
  return c;
}

// n normal logits (sd 2), or with `ties` rounded to a handful of values.
std::vector<float> random_row(std::mt19937& gen, size_t n, bool ties) {
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> row(n);
  for (float& l : row) l = ties ? std::round(normal(gen) * 0.5f) : normal(gen);
  return row;
}

// A candidate for every token of a row, in id order.
std::vector<Candidate> all_candidates(const std::vector<float>& row) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < row.size(); ++i) c.push_back({static_cast<int32_t>(i), row[i]});
  return c;
}

SamplerParams plain(float temperature, uint64_t seed) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = seed;
  return p;
}

TEST(Sampler, PenaltiesByHand) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f};
  const std::vector<int32_t> recent = {0, 1, 1};
  apply_penalties(logits, recent, 2.0f, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2 - 1 * 0.5f - 0.25f);     // positive: divided
  EXPECT_FLOAT_EQ(logits[1], -2.0f * 2 - 2 * 0.5f - 0.25f);    // negative: multiplied, counted twice
  EXPECT_FLOAT_EQ(logits[2], 1.0f);                            // not in the history
  EXPECT_FLOAT_EQ(logits[3], 0.5f);
}

// DRY on a 10-token vocabulary with all logits 0, multiplier 1, base 2: what each
// token loses after `history`.
std::vector<float> dry_penalties(const std::vector<int32_t>& history, int allowed_length,
                                 const std::vector<int32_t>& breakers = {}) {
  std::vector<float> logits(10, 0.0f);
  apply_dry(logits, history, 1.0f, 2.0f, allowed_length, breakers);
  for (float& l : logits) l = -l;
  return logits;
}

TEST(Sampler, DryPenalisesTheTokenThatContinuesARepeat) {
  // "1 2 3" was followed by 4 before: n = 3, 2^(3-2) = 2. Nothing else repeats.
  auto p = dry_penalties({1, 2, 3, 4, 1, 2, 3}, 2);
  EXPECT_FLOAT_EQ(p[4], 2.0f);
  for (int t : {0, 1, 2, 3, 5}) EXPECT_EQ(p[t], 0.0f) << t;
  // Allowed length 3: 2^0 = 1; allowed length 4: the repeat is too short.
  EXPECT_FLOAT_EQ(dry_penalties({1, 2, 3, 4, 1, 2, 3}, 3)[4], 1.0f);
  EXPECT_EQ(dry_penalties({1, 2, 3, 4, 1, 2, 3}, 4)[4], 0.0f);
  // n = 1 (only "2" repeats): below the default allowed length 2, 2^0 at length 1.
  EXPECT_EQ(dry_penalties({1, 2, 5, 2}, 2)[5], 0.0f);
  EXPECT_FLOAT_EQ(dry_penalties({1, 2, 5, 2}, 1)[5], 1.0f);
}

TEST(Sampler, DryUsesEachTokensLongestRepeat) {
  // "3 1 2" was followed by 9 (n = 3) and "4 1 2" too (n = 2): the longest counts, once.
  EXPECT_FLOAT_EQ(dry_penalties({3, 1, 2, 9, 4, 1, 2, 9, 3, 1, 2}, 2)[9], 2.0f);
  // Overlapping copies: in "7 7 7 7" the last three tokens repeat at the start, then 7.
  EXPECT_FLOAT_EQ(dry_penalties({7, 7, 7, 7}, 2)[7], 2.0f);
}

TEST(Sampler, DryRepeatsStopAtBreakers) {
  // Without breakers "1 9 2 3" repeats (n = 4, 2^2); with 9 a breaker only "2 3" (2^0).
  EXPECT_FLOAT_EQ(dry_penalties({1, 9, 2, 3, 7, 1, 9, 2, 3}, 2)[7], 4.0f);
  EXPECT_FLOAT_EQ(dry_penalties({1, 9, 2, 3, 7, 1, 9, 2, 3}, 2, {9})[7], 1.0f);
  // A breaker is never penalised, and a history ending in one penalises nothing.
  EXPECT_EQ(dry_penalties({1, 2, 9, 1, 2}, 2, {9})[9], 0.0f);
  EXPECT_EQ(dry_penalties({1, 2, 9, 1, 2}, 2)[9], 1.0f);
  auto p = dry_penalties({1, 9, 5, 1, 9}, 1, {9});
  for (float x : p) EXPECT_EQ(x, 0.0f);
}

TEST(Sampler, DryPenaltyStaysFinite) {
  std::vector<int32_t> history(400, 3);  // n = 399: 2^397 overflows a float
  std::vector<float> logits(10, 0.0f);
  apply_dry(logits, history, 1.0f, 2.0f, 2, {});
  EXPECT_TRUE(std::isfinite(logits[3]));
  EXPECT_LT(logits[3], -1e29f);
}

TEST(Sampler, DryInTheChain) {
  // Token 4 wins greedily unless DRY takes 2 off it after "1 2 3 4 1 2 3".
  const std::vector<float> logits = {0, 0, 0, 0, 2.5f, 1.0f, 0, 0, 0, 0};
  const std::vector<int32_t> history = {1, 2, 3, 4, 1, 2, 3};
  SamplerParams p = plain(0.0f, 1);
  Sampler off(p);  // DRY is off by default
  for (int32_t t : history) off.accept(t);
  EXPECT_EQ(off.sample(logits), 4);

  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  Sampler on(p);
  for (int32_t t : history) on.accept(t);
  EXPECT_EQ(on.sample(logits), 5);  // 2.5 - 2 < 1

  p.dry_penalty_last_n = 4;  // sees only "4 1 2 3": nothing repeats
  Sampler window(p);
  for (int32_t t : history) window.accept(t);
  EXPECT_EQ(window.sample(logits), 4);

  p.dry_penalty_last_n = -1;
  p.dry_breakers = {2};  // the repeat is only "3": too short
  Sampler broken(p);
  for (int32_t t : history) broken.accept(t);
  EXPECT_EQ(broken.sample(logits), 4);
}

TEST(Sampler, ArgmaxTakesLowestIdOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -1.0f};
  EXPECT_EQ(argmax(logits), 1);
}

TEST(Sampler, TopKKeepsTheKLargestSorted) {
  std::vector<Candidate> c = {{0, 0.1f}, {1, 0.5f}, {2, 0.3f}, {3, 0.9f}};
  keep_top_k(c, 2);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{3, 1}));
  std::vector<Candidate> all = {{0, 0.1f}, {1, 0.5f}, {2, 0.3f}};
  keep_top_k(all, 0);  // off, but sorted
  EXPECT_EQ(ids_of(all), (std::vector<int32_t>{1, 2, 0}));
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: cumulative 0.5, 0.8, 0.95, 1.
  auto c = from_probs({0.15, 0.5, 0.05, 0.3});
  keep_top_p(c, 0.75f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3}));
  c = from_probs({0.15, 0.5, 0.05, 0.3});
  keep_top_p(c, 0.85f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3, 0}));
  c = from_probs({0.15, 0.5, 0.05, 0.3});
  keep_top_p(c, 0.4f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1}));
}

TEST(Sampler, MinPDropsCandidatesBelowAFractionOfTheBest) {
  auto c = from_probs({0.5, 0.3, 0.15, 0.05});
  keep_min_p(c, 0.25f);  // threshold 0.125
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0, 1, 2}));
  c = from_probs({0.5, 0.3, 0.15, 0.05});
  keep_min_p(c, 0.35f);  // threshold 0.175
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0, 1}));
}

TEST(Sampler, TemperatureScalesLogitsBeforeSoftmax) {
  const std::vector<Candidate> c = {{0, 0.0f}, {1, static_cast<float>(std::log(4.0))}};
  const auto p = candidate_probabilities(c, 2.0f);  // exp(0) : exp(ln 4 / 2) = 1 : 2
  EXPECT_NEAR(p[0], 1.0 / 3, 1e-6);
  EXPECT_NEAR(p[1], 2.0 / 3, 1e-6);
}

TEST(Sampler, DrawIndexWalksTheCumulativeDistribution) {
  const std::vector<double> p = {0.2, 0.5, 0.3};
  EXPECT_EQ(draw_index(p, 0.0), 0u);
  EXPECT_EQ(draw_index(p, 0.19), 0u);
  EXPECT_EQ(draw_index(p, 0.21), 1u);
  EXPECT_EQ(draw_index(p, 0.69), 1u);
  EXPECT_EQ(draw_index(p, 0.71), 2u);
  EXPECT_EQ(draw_index(p, 0.999999), 2u);
}

TEST(Sampler, GreedyIsArgmaxOfThePenalisedLogits) {
  const std::vector<float> logits = {1.0f, 4.0f, 3.0f, 2.0f};
  Sampler greedy(plain(0.0f, 1));
  EXPECT_EQ(greedy.sample(logits), 1);
  EXPECT_EQ(greedy.sample(logits), 1);  // no randomness

  SamplerParams p = plain(0.0f, 1);
  p.repeat_penalty = 2.0f;  // 4 / 2 = 2 < 3
  Sampler penalised(p);
  penalised.accept(1);
  EXPECT_EQ(penalised.sample(logits), 2);
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
  const std::vector<float> logits = {4.0f, 3.0f, 0.0f};
  SamplerParams p = plain(0.0f, 1);
  p.repeat_penalty = 2.0f;
  p.penalty_last_n = 2;
  Sampler s(p);
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);  // 0 penalised to 2
  s.accept(2);
  s.accept(2);  // 0 has left the window of 2
  EXPECT_EQ(s.sample(logits), 0);
}

// Frequencies of n draws from the chain with these parameters.
std::vector<double> frequencies(const SamplerParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<double> f(logits.size(), 0);
  for (int i = 0; i < n; ++i) f[s.sample(logits)] += 1.0 / n;
  return f;
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  const int n = 40000;  // standard error <= 0.0025: 0.012 is ~5 sigma
  const auto f = frequencies(plain(1.0f, 42), logits, n);
  const double expect[] = {0.1, 0.2, 0.3, 0.4};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], expect[i], 0.012) << "token " << i;

  // T = 0.5 squares the probabilities: 1 : 4 : 9 : 16.
  const auto g = frequencies(plain(0.5f, 43), logits, n);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(g[i], (i + 1) * (i + 1) / 30.0, 0.012) << "token " << i;
}

TEST(Sampler, TruncationComesBeforeTemperature) {
  // top-k 2 keeps tokens 3 and 2 (0.4 and 0.3); renormalised: 3/7 and 4/7.
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  SamplerParams p = plain(1.0f, 7);
  p.top_k = 2;
  const auto f = frequencies(p, logits, 40000);
  EXPECT_EQ(f[0], 0);
  EXPECT_EQ(f[1], 0);
  EXPECT_NEAR(f[2], 3.0 / 7, 0.012);
  EXPECT_NEAR(f[3], 4.0 / 7, 0.012);

  // A high temperature cannot bring back what min-p removed (0.1 < 0.3 * 0.4).
  SamplerParams hot = plain(5.0f, 8);
  hot.min_p = 0.3f;
  const auto h = frequencies(hot, logits, 20000);
  EXPECT_EQ(h[0], 0);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, SameSeedSameOutput) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * static_cast<float>(i)) * 3;
  SamplerParams p;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, T 0.8
  p.seed = 1234;
  Sampler a(p), b(p);
  std::vector<int32_t> out_a, out_b;
  for (int i = 0; i < 64; ++i) {
    out_a.push_back(a.sample(logits));
    out_b.push_back(b.sample(logits));
  }
  EXPECT_EQ(out_a, out_b);
  p.seed = 1235;
  Sampler c(p);
  std::vector<int32_t> out_c;
  for (int i = 0; i < 64; ++i) out_c.push_back(c.sample(logits));
  EXPECT_NE(out_a, out_c);
}

TEST(Sampler, TopKOfARowEqualsKeepTopK) {
  std::mt19937 gen(9);
  for (int trial = 0; trial < 60; ++trial) {
    const std::vector<float> row = random_row(gen, 200 + trial, trial % 2 == 1);
    for (int k : {1, 2, 16, 17, 40, static_cast<int>(row.size()) - 1, static_cast<int>(row.size())}) {
      std::vector<Candidate> want = all_candidates(row);
      keep_top_k(want, k);
      std::vector<Candidate> got;
      top_k_of_row(row, k, got);
      ASSERT_EQ(ids_of(got), ids_of(want)) << "trial " << trial << " k " << k;
    }
  }
  std::vector<Candidate> out;
  EXPECT_THROW(top_k_of_row(std::vector<float>{1, 2}, 3, out), std::invalid_argument);
  EXPECT_THROW(top_k_of_row(std::vector<float>{1, 2}, 0, out), std::invalid_argument);
}

TEST(Sampler, WholeVocabularyTruncationEqualsTheStagesInOrder) {
  // sample() truncates without sorting the whole row; the stage functions applied in
  // order to every token, with the same uniform draws, pick the same tokens. Rows with
  // many equal logits check the ties (lower id first).
  std::mt19937 gen(5);
  struct Case {
    int top_k;
    float top_p, min_p;
  };
  const Case cases[] = {{40, 0.95f, 0.05f}, {1, 1, 0},     {0, 0.9f, 0},      {0, 1, 0.1f},  {0, 0.5f, 0.05f},
                        {5000, 1, 0},       {999, 0.8f, 0}, {3, 0.99f, 0.5f}, {0, 0.999f, 0}};
  for (const Case& k : cases)
    for (int trial = 0; trial < 40; ++trial) {
      const std::vector<float> row = random_row(gen, 1000, trial % 2 == 1);
      SamplerParams p;
      p.temperature = 0.7f;
      p.top_k = k.top_k;
      p.top_p = k.top_p;
      p.min_p = k.min_p;
      p.seed = 100 + trial;
      Sampler sampler(p);
      std::mt19937_64 rng(p.seed);
      for (int draw = 0; draw < 4; ++draw) {
        std::vector<Candidate> c = all_candidates(row);
        keep_top_k(c, p.top_k);
        keep_top_p(c, p.top_p);
        keep_min_p(c, p.min_p);
        const double uniform = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        const int32_t want = c[draw_index(candidate_probabilities(c, p.temperature), uniform)].id;
        ASSERT_EQ(sampler.sample(row), want)
            << "top-k " << k.top_k << " top-p " << k.top_p << " min-p " << k.min_p << " trial " << trial;
      }
    }
}

TEST(Sampler, RowDrawsAreTheChainsDraws) {
  // A sampler that draws from the raw logits gives the backend draw_from_row's
  // parameters, and that draw is sample()'s, with the same random numbers in turn.
  std::mt19937 gen(9);
  struct Case {
    float temperature;
    int top_k;
    float top_p, min_p;
  };
  const Case cases[] = {{0, 40, 0.95f, 0.05f}, {0.8f, 40, 0.95f, 0.05f}, {0.7f, 1, 1, 0},   {1.3f, 5, 0.5f, 0},
                        {0.3f, 128, 1, 0.2f},  {2.0f, 128, 0.999f, 0},   {1, 7, 1, 0.05f}, {0.9f, 0, 0.9f, 0.05f},
                        {1.1f, 0, 1, 0.1f},    {0.6f, 0, 0.3f, 0}};
  for (const Case& k : cases)
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<float> row = random_row(gen, 300 + trial, trial % 2 == 1);
      SamplerParams p;
      p.temperature = k.temperature;
      p.top_k = k.top_k;
      p.top_p = k.top_p;
      p.min_p = k.min_p;
      p.seed = 7 + trial;
      Sampler host(p), row_draws(p);
      ASSERT_TRUE(row_draws.draws_from_row(static_cast<int64_t>(row.size())));
      for (int draw = 0; draw < 4; ++draw) {
        const RowSampling s = row_draws.next_row_sampling();
        EXPECT_EQ(s.top_k, k.temperature > 0 ? k.top_k : 1);
        ASSERT_EQ(draw_from_row(row, s), host.sample(row)) << "case top-k " << k.top_k << " trial " << trial;
      }
    }
}

TEST(Sampler, DrawsFromRowWithASmallTopKAndPenaltyWindowAndWithoutDry) {
  SamplerParams p;  // the defaults: top-k 40, no penalties
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  EXPECT_FALSE(Sampler(p).draws_from_row(40));  // top-k keeps the whole row: the host's path
  EXPECT_FALSE(Sampler(p).may_decline());
  p.top_k = kMaxRowTopK + 1;
  EXPECT_FALSE(Sampler(p).draws_from_row(1000));
  p.top_k = 0;  // off: top-p and min-p over the row, which a backend may decline
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  EXPECT_TRUE(Sampler(p).may_decline());
  p.min_p = 0;
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  p.top_p = 1;  // no truncation at all: the host's path
  EXPECT_FALSE(Sampler(p).draws_from_row(1000));
  p.temperature = 0;  // greedy: top-1 whatever top-k says
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  EXPECT_FALSE(Sampler(p).may_decline());
  p = SamplerParams{};
  p.repeat_penalty = 1.1f;
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  p.penalty_last_n = kMaxRowRecent;
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  p.penalty_last_n = kMaxRowRecent + 1;  // a longer window: the host's path
  EXPECT_FALSE(Sampler(p).draws_from_row(1000));
  p = SamplerParams{};
  p.presence_penalty = 0.5f;
  p.temperature = 0;
  EXPECT_TRUE(Sampler(p).draws_from_row(1000));
  EXPECT_FALSE(Sampler(p).picks_argmax());
  p = SamplerParams{};
  p.dry_multiplier = 0.8f;
  EXPECT_FALSE(Sampler(p).draws_from_row(1000));
}

TEST(Sampler, ABackendDeclinesTopKOffRowsWhoseSurvivorsPassItsCandidates) {
  // With top-k off a backend holds the row's kMaxRowTopK best: it declines a row
  // exactly when top-p's prefix (probabilities over the whole row) and min-p's cut
  // both end past them, so every row it draws has its survivors among them.
  std::mt19937 gen(21);
  struct Case {
    float top_p, min_p;
  };
  int declined = 0, drawn = 0;
  for (const Case& k : {Case{0.9f, 0.05f}, Case{0.5f, 0}, Case{1, 0.2f}, Case{0.99f, 0.01f}})
    for (int trial = 0; trial < 24; ++trial) {
      std::vector<float> row = random_row(gen, 1000, trial % 2 == 1);
      for (float& l : row) l *= 0.25f * static_cast<float>(1 + trial % 12);  // flat to peaked
      RowSampling s;
      s.top_k = 0, s.top_p = k.top_p;
      s.log_min_p = k.min_p > 0 ? std::log(static_cast<double>(k.min_p)) : -std::numeric_limits<double>::infinity();
      std::vector<Candidate> sorted = all_candidates(row);
      keep_top_k(sorted, 0);
      size_t top_p_len = sorted.size(), min_p_len = sorted.size();
      if (k.top_p < 1) {
        const std::vector<double> probs = candidate_probabilities(sorted, 1.0f);
        double cumulative = 0;
        for (size_t i = 0; i < probs.size(); ++i)
          if ((cumulative += probs[i]) >= k.top_p) {
            top_p_len = i + 1;
            break;
          }
      }
      if (k.min_p > 0) {
        min_p_len = 1;
        while (min_p_len < sorted.size() && sorted[min_p_len].logit >= sorted[0].logit + s.log_min_p) ++min_p_len;
      }
      const bool want = top_p_len > static_cast<size_t>(kMaxRowTopK) && min_p_len >= static_cast<size_t>(kMaxRowTopK);
      ASSERT_EQ(row_draw_declined(row, s), want) << "top-p " << k.top_p << " min-p " << k.min_p << " trial " << trial;
      ++(want ? declined : drawn);
      s.top_k = 40;  // top-k on: never declined
      EXPECT_FALSE(row_draw_declined(row, s));
    }
  EXPECT_GT(declined, 10);
  EXPECT_GT(drawn, 10);
}

TEST(Sampler, PenalisedRowDrawsEqualSample) {
  // penalise_row + draw_from_row with next_row_sampling()'s parameters equal sample()
  // with penalties, for windows shorter and longer than penalty_last_n, with the
  // window complete on the host or ending with the id the backend holds (the host
  // has not accepted it yet: then_id). Ties and repeats included.
  std::mt19937 gen(11);
  struct Case {
    float temperature, repeat, frequency, presence;
    int last_n, history;
  } cases[] = {{0.8f, 1.3f, 0.2f, 0.5f, 64, 100}, {0.0f, 1.5f, 0.0f, 0.0f, 16, 5},   {1.2f, 0.7f, -0.3f, 1.0f, 1, 3},
               {1.0f, 1.0f, 0.4f, 0.0f, 256, 300}, {0.5f, 2.0f, 1.0f, -1.0f, 256, 40}, {0.9f, 1.1f, 0.1f, 0.1f, 8, 1}};
  for (int trial = 0; trial < 48; ++trial) {
    const Case& k = cases[trial % std::size(cases)];
    const std::vector<float> row = random_row(gen, 500, trial % 2 == 1);
    SamplerParams p;
    p.temperature = k.temperature;
    p.repeat_penalty = k.repeat, p.frequency_penalty = k.frequency, p.presence_penalty = k.presence;
    p.penalty_last_n = k.last_n;
    p.seed = 3 + trial;
    Sampler host(p), row_draws(p);
    ASSERT_TRUE(row_draws.draws_from_row(static_cast<int64_t>(row.size())));
    // A history over the 12 best tokens, so that the penalties move the top-k.
    std::vector<int32_t> best(row.size());
    std::iota(best.begin(), best.end(), 0);
    std::partial_sort(best.begin(), best.begin() + 12, best.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    std::vector<int32_t> history;
    for (int i = 0; i < k.history; ++i) history.push_back(best[gen() % 12]);
    const bool then_id = trial % 4 >= 2;
    for (int32_t t : history) host.accept(t);
    for (size_t i = 0; i + (then_id ? 1 : 0) < history.size(); ++i) row_draws.accept(history[i]);
    for (int draw = 0; draw < 3; ++draw) {
      const RowSampling s = row_draws.next_row_sampling(then_id);
      EXPECT_EQ(s.recent_then_id, then_id ? 1 : 0);
      EXPECT_EQ(s.n_recent + s.recent_then_id, std::min(k.last_n, k.history));
      std::vector<float> penalised = row;
      penalise_row(penalised, s, history.back());
      ASSERT_EQ(draw_from_row(penalised, s), host.sample(row)) << "trial " << trial << " draw " << draw;
    }
  }
}

TEST(Sampler, RejectsNonsenseParameters) {
  SamplerParams p;
  p.top_p = 0;
  EXPECT_THROW(Sampler{p}, std::invalid_argument);
  p = SamplerParams{};
  p.repeat_penalty = 0;
  EXPECT_THROW(Sampler{p}, std::invalid_argument);
  p = SamplerParams{};
  p.dry_multiplier = -1;
  EXPECT_THROW(Sampler{p}, std::invalid_argument);
}

}  // namespace
}  // namespace zinc
