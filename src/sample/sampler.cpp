// The sampler chain (see sampler.h for the order of the stages and why).
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace zinc {

namespace {
bool by_logit_desc(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void sort_if_needed(std::vector<Candidate>& c) {
  if (!std::is_sorted(c.begin(), c.end(), by_logit_desc)) std::sort(c.begin(), c.end(), by_logit_desc);
}

// Sorted candidates whose logit is at least the best one's + offset (never the best).
void keep_above_best_plus(std::vector<Candidate>& c, double offset) {
  if (c.empty() || offset == -std::numeric_limits<double>::infinity()) return;
  const double threshold = static_cast<double>(c.front().logit) + offset;
  size_t keep = 1;
  while (keep < c.size() && c[keep].logit >= threshold) ++keep;
  c.resize(keep);
}

// keep_top_p then keep_min_p on the whole row, sorting only the prefix they keep:
// both keep a prefix of the sorted row, so the shorter one is the answer. Top-p's
// probabilities are over the whole row (its normaliser summed in id order). Without
// min-p's cut, their mass per quarter-logit band below the best bounds where top-p's
// prefix can end (a band of margin for rounding). The tokens above the cut are
// sorted in growing pieces until they reach p; should rounding still leave p
// unreached there, every token is taken.
void top_p_min_p_of_row(std::span<const float> row, float top_p, double log_min_p, std::vector<Candidate>& out) {
  const float max_logit = *std::max_element(row.begin(), row.end());
  // min-p's cut (keep_min_p), or everything.
  const bool min_p = log_min_p != -std::numeric_limits<double>::infinity();
  const double threshold = min_p ? static_cast<double>(max_logit) + log_min_p : log_min_p;
  constexpr int kBands = 128, kBandsPerLogit = 4;
  const auto band = [&](float l) {
    const double below = (static_cast<double>(max_logit) - l) * kBandsPerLogit;
    return below < kBands - 1 ? static_cast<int>(below) : kBands - 1;  // -inf and NaN: the last
  };
  const auto collect = [&](int last_band) {
    out.clear();
    const bool every_band = last_band == kBands - 1;
    for (size_t i = 0; i < row.size(); ++i)
      if (row[i] >= threshold && (every_band || band(row[i]) <= last_band))
        out.push_back({static_cast<int32_t>(i), row[i]});
  };
  if (top_p >= 1) {
    collect(kBands - 1);
    return std::sort(out.begin(), out.end(), by_logit_desc);
  }
  double sum = 0;
  int last_band = kBands - 1;
  if (min_p) {
    for (float l : row) sum += std::exp(static_cast<double>(l) - max_logit);
  } else {
    double mass[kBands] = {};
    for (float l : row) {
      const double e = std::exp(static_cast<double>(l) - max_logit);
      sum += e;
      mass[band(l)] += e;
    }
    double reached = 0;
    for (int b = 0; b < kBands; ++b) {
      reached += mass[b] / sum;
      if (reached >= top_p) {
        last_band = std::min(b + 1, kBands - 1);
        break;
      }
    }
  }
  for (int pass = 0; pass < 2; ++pass, last_band = kBands - 1) {
    collect(last_band);
    if (out.size() <= 1) return;
    double cumulative = 0;
    for (size_t done = 0, end = std::min<size_t>(64, out.size()); done < out.size();
         done = end, end = std::min(out.size(), 4 * end)) {
      std::nth_element(out.begin() + done, out.begin() + end - 1, out.end(), by_logit_desc);
      std::sort(out.begin() + done, out.begin() + end, by_logit_desc);
      for (size_t i = done; i < end; ++i) {
        cumulative += std::exp(static_cast<double>(out[i].logit) - max_logit) / sum;
        if (cumulative >= top_p) return out.resize(i + 1);
      }
    }
    if (last_band == kBands - 1) return;  // p unreached over every token: keep them all
  }
}
}  // namespace

void apply_penalties(std::span<float> logits, std::span<const int32_t> recent, float repeat_penalty,
                     float frequency_penalty, float presence_penalty) {
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : recent)
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) ++counts[t];
  for (const auto& [token, count] : counts) {
    float& l = logits[token];
    // Dividing a negative logit would make the token more likely; multiply it instead.
    l = l > 0 ? l / repeat_penalty : l * repeat_penalty;
    l -= static_cast<float>(count) * frequency_penalty + presence_penalty;
  }
}

void apply_dry(std::span<float> logits, std::span<const int32_t> history, float multiplier, float base,
               int allowed_length, std::span<const int32_t> breakers) {
  const size_t n = history.size();
  if (multiplier == 0 || n < 2) return;
  auto is_breaker = [&](int32_t t) { return std::find(breakers.begin(), breakers.end(), t) != breakers.end(); };
  // A repeat may not span a breaker: only the last `span` tokens can be matched.
  size_t span = 0;
  while (span < n && !is_breaker(history[n - 1 - span])) ++span;
  if (span == 0) return;
  // Z-function of the reversed history: z[k] is how many tokens end both at the
  // last position and at position n-1-k, so one O(n) pass finds every repeat.
  std::vector<int32_t> r(history.rbegin(), history.rend());
  std::vector<size_t> z(n, 0);
  for (size_t k = 1, left = 0, right = 0; k < n; ++k) {
    if (k < right) z[k] = std::min(right - k, z[k - left]);
    while (k + z[k] < n && r[z[k]] == r[k + z[k]]) ++z[k];
    if (k + z[k] > right) left = k, right = k + z[k];
  }
  std::unordered_map<int32_t, size_t> longest;  // candidate -> its longest repeat
  for (size_t k = 1; k < n; ++k) {
    const size_t match = std::min(z[k], span);
    if (match == 0 || match < static_cast<size_t>(std::max(allowed_length, 0))) continue;
    const int32_t next = history[n - k];  // the token that followed the earlier copy
    if (next < 0 || static_cast<size_t>(next) >= logits.size() || is_breaker(next)) continue;
    size_t& best = longest[next];
    best = std::max(best, match);
  }
  for (const auto& [token, match] : longest) {
    const double exponent = static_cast<double>(match) - allowed_length;
    const double penalty = std::min(multiplier * std::pow(static_cast<double>(base), exponent), 1e30);
    logits[token] -= static_cast<float>(penalty);
  }
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("argmax: empty logits");
  // max_element returns the first of equal maxima: the lowest id.
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void keep_top_k(std::vector<Candidate>& candidates, int k) {
  if (k <= 0 || static_cast<size_t>(k) >= candidates.size()) {
    sort_if_needed(candidates);
    return;
  }
  std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(), by_logit_desc);
  candidates.resize(k);
}

// One pass keeps the k best in a heap whose front is the worst of them. Ids only
// grow along the row, so a logit equal to the front's never wins its tie: only a
// larger one gets in.
void top_k_of_row(std::span<const float> row, int k, std::vector<Candidate>& out) {
  if (k < 1 || static_cast<size_t>(k) > row.size()) throw std::invalid_argument("top_k_of_row: k out of range");
  out.clear();
  for (size_t i = 0; i < static_cast<size_t>(k); ++i) out.push_back({static_cast<int32_t>(i), row[i]});
  std::make_heap(out.begin(), out.end(), by_logit_desc);
  float worst = out.front().logit;
  const auto offer = [&](size_t i) {
    if (!(row[i] > worst)) return;
    std::pop_heap(out.begin(), out.end(), by_logit_desc);
    out.back() = {static_cast<int32_t>(i), row[i]};
    std::push_heap(out.begin(), out.end(), by_logit_desc);
    worst = out.front().logit;
  };
  // Runs of 16 whose largest logit does not beat the worst kept are skipped whole
  // (nearly all of them, and a vectorisable test).
  constexpr size_t kRun = 16;
  size_t i = static_cast<size_t>(k);
  for (; i + kRun <= row.size(); i += kRun) {
    float best = row[i];
    for (size_t j = 1; j < kRun; ++j) best = std::max(best, row[i + j]);
    if (best > worst)
      for (size_t j = 0; j < kRun; ++j) offer(i + j);
  }
  for (; i < row.size(); ++i) offer(i);
  std::sort_heap(out.begin(), out.end(), by_logit_desc);
}

void keep_top_p(std::vector<Candidate>& candidates, float p) {
  sort_if_needed(candidates);
  if (p >= 1 || candidates.size() <= 1) return;
  const std::vector<double> probs = candidate_probabilities(candidates, 1.0f);
  double cumulative = 0;
  size_t keep = candidates.size();
  for (size_t i = 0; i < probs.size(); ++i) {
    cumulative += probs[i];
    if (cumulative >= p) {
      keep = i + 1;
      break;
    }
  }
  candidates.resize(keep);
}

void keep_min_p(std::vector<Candidate>& candidates, float min_p) {
  sort_if_needed(candidates);
  if (min_p <= 0 || candidates.empty()) return;
  // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p), whatever the normaliser.
  keep_above_best_plus(candidates, std::log(static_cast<double>(min_p)));
}

std::vector<double> candidate_probabilities(std::span<const Candidate> candidates, float temperature) {
  if (candidates.empty()) return {};
  if (!(temperature > 0)) throw std::invalid_argument("candidate_probabilities: temperature must be > 0");
  float max_logit = candidates.front().logit;
  for (const Candidate& c : candidates) max_logit = std::max(max_logit, c.logit);
  std::vector<double> probs(candidates.size());
  double sum = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    probs[i] = std::exp((static_cast<double>(candidates[i].logit) - max_logit) / temperature);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  return probs;
}

size_t draw_index(std::span<const double> probs, double uniform) {
  if (probs.empty()) throw std::invalid_argument("draw_index: no candidates");
  double total = 0;
  for (double p : probs) total += p;
  const double target = uniform * total;
  double cumulative = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    cumulative += probs[i];
    if (target < cumulative) return i;
  }
  return probs.size() - 1;  // rounding left target at the very top
}

int32_t draw_from_row(std::span<const float> row, const RowSampling& s) {
  std::vector<Candidate> candidates;
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < row.size()) {
    top_k_of_row(row, s.top_k, candidates);
    keep_top_p(candidates, s.top_p);
    keep_above_best_plus(candidates, s.log_min_p);
  } else if (s.top_k > 0 || s.top_p < 1 || s.log_min_p != -std::numeric_limits<double>::infinity()) {
    top_p_min_p_of_row(row, s.top_p, s.log_min_p, candidates);  // a top-k of the whole row keeps it sorted
  } else {  // no truncation: the draw needs no sorted order
    candidates.resize(row.size());
    for (size_t i = 0; i < row.size(); ++i) candidates[i] = {static_cast<int32_t>(i), row[i]};
  }
  const std::vector<double> probs = candidate_probabilities(candidates, s.temperature);
  return candidates[draw_index(probs, s.uniform)].id;
}

bool row_draw_declined(std::span<const float> row, const RowSampling& s) {
  if (s.top_k > 0 || row.size() <= static_cast<size_t>(kMaxRowTopK)) return false;
  std::vector<Candidate> best;
  top_k_of_row(row, kMaxRowTopK, best);
  const float max_logit = best.front().logit;
  if (s.log_min_p != -std::numeric_limits<double>::infinity()) {
    const double threshold = static_cast<double>(max_logit) + s.log_min_p;
    for (size_t i = 1; i < best.size(); ++i)
      if (!(best[i].logit >= threshold)) return false;  // min-p cuts among them
  }
  if (s.top_p < 1) {
    double sum = 0;
    for (float l : row) sum += std::exp(static_cast<double>(l) - max_logit);
    double cumulative = 0;
    for (const Candidate& c : best) {
      cumulative += std::exp(static_cast<double>(c.logit) - max_logit) / sum;
      if (cumulative >= s.top_p) return false;  // top-p's prefix ends among them
    }
  }
  return true;
}

void penalise_row(std::span<float> row, const RowSampling& s, int32_t id) {
  if (s.n_recent <= 0 && !s.recent_then_id) return;
  int32_t window[kMaxRowRecent + 1];
  const int n = std::clamp(s.n_recent, 0, kMaxRowRecent);
  std::copy(s.recent, s.recent + n, window);
  const int total = n + (s.recent_then_id ? 1 : 0);
  if (s.recent_then_id) window[n] = id;
  apply_penalties(row, std::span<const int32_t>(window, static_cast<size_t>(total)), s.repeat_penalty,
                  s.frequency_penalty, s.presence_penalty);
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
  if (params_.repeat_penalty <= 0) throw std::invalid_argument("repeat penalty must be > 0");
  if (params_.top_p <= 0) throw std::invalid_argument("top-p must be > 0");
  if (params_.min_p >= 1) throw std::invalid_argument("min-p must be < 1");
  if (params_.dry_multiplier < 0) throw std::invalid_argument("DRY multiplier must be >= 0");
  if (params_.dry_multiplier != 0 && params_.dry_base < 1) throw std::invalid_argument("DRY base must be >= 1");
  if (params_.dry_penalty_last_n < -1) throw std::invalid_argument("DRY last-n must be >= -1");
}

bool Sampler::uses_penalties() const {
  return params_.penalty_last_n > 0 &&
         (params_.repeat_penalty != 1 || params_.frequency_penalty != 0 || params_.presence_penalty != 0);
}

void Sampler::accept(int32_t token) {
  if (uses_dry()) {
    dry_history_.push_back(token);
    if (params_.dry_penalty_last_n > 0)
      while (dry_history_.size() > static_cast<size_t>(params_.dry_penalty_last_n)) dry_history_.pop_front();
  }
  if (params_.penalty_last_n <= 0) return;
  recent_.push_back(token);
  while (recent_.size() > static_cast<size_t>(params_.penalty_last_n)) recent_.pop_front();
}

bool Sampler::draws_from_row(int64_t n_vocab) const {
  if (uses_dry() || (uses_penalties() && params_.penalty_last_n > kMaxRowRecent)) return false;
  if (may_decline()) return params_.top_p < 1 || params_.min_p > 0;  // top-k off: truncated below
  const int k = params_.temperature <= 0 ? 1 : params_.top_k;
  return k >= 1 && k <= kMaxRowTopK && k < n_vocab;
}

RowSampling Sampler::row_sampling(double uniform) const {
  RowSampling s;
  if (params_.temperature <= 0) return s;  // top-1: the argmax, lowest id on ties
  s.uniform = uniform;
  s.log_min_p = params_.min_p > 0 ? std::log(static_cast<double>(params_.min_p))
                                  : -std::numeric_limits<double>::infinity();
  s.top_p = params_.top_p;
  s.temperature = params_.temperature;
  s.top_k = params_.top_k > 0 ? params_.top_k : 0;
  return s;
}

RowSampling Sampler::next_row_sampling(bool then_id) {
  RowSampling s = row_sampling(params_.temperature <= 0 ? 0.0 : next_uniform());
  if (!uses_penalties()) return s;
  s.repeat_penalty = params_.repeat_penalty;
  s.frequency_penalty = params_.frequency_penalty;
  s.presence_penalty = params_.presence_penalty;
  s.recent_then_id = then_id ? 1 : 0;
  // The window's last penalty_last_n tokens, the one on the backend among them.
  const size_t room = static_cast<size_t>(std::min(params_.penalty_last_n, kMaxRowRecent)) - (then_id ? 1 : 0);
  const size_t n = std::min(recent_.size(), room);
  std::copy(recent_.end() - static_cast<std::ptrdiff_t>(n), recent_.end(), s.recent);
  s.n_recent = static_cast<int32_t>(n);
  return s;
}

double Sampler::next_uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // 53 random bits: [0, 1)
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("sample: empty logits row");
  std::span<const float> row = logits;
  if (uses_dry() || uses_penalties()) {
    penalised_.assign(logits.begin(), logits.end());
    row = penalised_;
  }
  if (uses_dry()) {
    dry_buffer_.assign(dry_history_.begin(), dry_history_.end());
    apply_dry(penalised_, dry_buffer_, params_.dry_multiplier, params_.dry_base, params_.dry_allowed_length,
              params_.dry_breakers);
  }
  if (uses_penalties()) {
    recent_buffer_.assign(recent_.begin(), recent_.end());
    apply_penalties(penalised_, recent_buffer_, params_.repeat_penalty, params_.frequency_penalty,
                    params_.presence_penalty);
  }
  if (params_.temperature <= 0) return argmax(row);
  // Truncation without a sort of the whole vocabulary (248k tokens for Qwen3.5): the
  // same survivors, in the same order, as keep_top_k, keep_top_p and keep_min_p.
  return draw_from_row(row, row_sampling(next_uniform()));
}

}  // namespace zinc
