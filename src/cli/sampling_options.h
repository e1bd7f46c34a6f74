// The sampler chain's truncation as the CLI spells it: zinc run, chat and serve, and
// the benches' sampled runs take --top-k, --top-p and --min-p the same way.
#pragma once

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "sample/sampler.h"

namespace zinc::cli {

inline void add_truncation_options(CLI::App& cmd, SamplerParams& s) {
  cmd.add_option("--top-k", s.top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  cmd.add_option("--top-p", s.top_p, "Keep the most likely tokens up to this probability (1: off)")
      ->capture_default_str();
  cmd.add_option("--min-p", s.min_p, "Drop tokens below this fraction of the best one's probability (0: off)")
      ->capture_default_str();
}

// "top-k 40, top-p 0.95, min-p 0.05", for a bench's report.
inline std::string describe_truncation(const SamplerParams& s) {
  char text[80];
  std::snprintf(text, sizeof text, "top-k %d, top-p %g, min-p %g", s.top_k, s.top_p, s.min_p);
  return text;
}

}  // namespace zinc::cli
