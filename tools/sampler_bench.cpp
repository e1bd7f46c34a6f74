// Host time of one Sampler::sample() on a Qwen3.5-sized logits row (248320 tokens,
// normal logits with sd 3), for the truncation settings users pick. A sampled chat
// on the GPU pays this every token, beside the step itself (docs/PERFORMANCE.md).
//
//   g++ -std=c++20 -O3 -Isrc tools/sampler_bench.cpp src/sample/sampler.cpp -o /tmp/sampler_bench && /tmp/sampler_bench
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sample/sampler.h"

int main() {
  std::vector<float> logits(248320);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0, 3);
  for (float& l : logits) l = normal(gen);

  struct Setting {
    const char* name;
    int top_k;
    float top_p, min_p, repeat_penalty;
  };
  const Setting settings[] = {
      {"defaults (top-k 40, top-p 0.95, min-p 0.05)", 40, 0.95f, 0.05f, 1.0f},
      {"defaults + repeat penalty 1.1", 40, 0.95f, 0.05f, 1.1f},
      {"top-k 0, top-p 0.95, min-p 0.05", 0, 0.95f, 0.05f, 1.0f},
      {"top-k 0, top-p 0.95, min-p 0", 0, 0.95f, 0.0f, 1.0f},
  };
  std::printf("| setting | us per sample |\n|---|---|\n");
  for (const Setting& s : settings) {
    zinc::SamplerParams p;
    p.temperature = 0.8f;
    p.top_k = s.top_k;
    p.top_p = s.top_p;
    p.min_p = s.min_p;
    p.repeat_penalty = s.repeat_penalty;
    zinc::Sampler sampler(p);
    for (int i = 0; i < 64; ++i) sampler.accept(i * 7);
    const int reps = 100;
    int64_t sink = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) sink += sampler.sample(logits);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    std::printf("| %s | %.1f |\n", s.name, us / reps);
    if (sink < 0) return 1;  // keeps the draws
  }
  return 0;
}
