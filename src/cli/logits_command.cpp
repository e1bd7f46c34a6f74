// `zinc logits`: next-token logits at each position of a token sequence, for
// scripts and oracle comparisons.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"
#include "cli/backend_choice.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace zinc::cli {

namespace {
std::vector<int32_t> parse_tokens(const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    long v = std::stol(item, &used);
    if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument("bad token id '" + item + "'");
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) throw std::invalid_argument("--tokens needs at least one id");
  return out;
}
}  // namespace

void add_logits_command(CLI::App& app) {
  struct Args {
    std::string model, tokens, backend = "cpu";
    int top = 0;
    int threads = 0;
    bool decode = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("logits", "Print next-token logits at each position");
  cmd->add_option("-m,--model", args->model, "GGUF model")->required();
  cmd->add_option("--tokens", args->tokens, "Comma-separated token ids")->required();
  cmd->add_option("--top", args->top, "Print only the top-k (id:logit) per position");
  cmd->add_option("--threads", args->threads, "CPU threads");
  cmd->add_option("--backend", args->backend, "cpu, cuda or auto")->capture_default_str();
  cmd->add_flag("--decode", args->decode, "Feed tokens one at a time instead of one prefill");
  cmd->callback([args] {
    auto file = gguf::GgufFile::open(args->model);
    auto backend = make_backend(args->backend, args->threads);
    auto model = load_model(*file, *backend);
    const std::vector<int32_t> tokens = parse_tokens(args->tokens);
    for (int32_t t : tokens)
      if (t >= model->n_vocab()) throw std::invalid_argument("token id " + std::to_string(t) + " >= vocab size");
    SequenceState seq = model->new_sequence(static_cast<int64_t>(tokens.size()));
    const int64_t V = model->n_vocab(), n = static_cast<int64_t>(tokens.size());
    std::vector<float> logits(n * V);
    if (args->decode) {
      for (int64_t i = 0; i < n; ++i) {
        Tensor l = model->forward(seq, std::span(tokens).subspan(i, 1), 1);
        backend->read(l, logits.data() + i * V, V * sizeof(float));
      }
    } else {
      Tensor l = model->forward(seq, tokens, n);
      backend->read(l, logits.data(), logits.size() * sizeof(float));
    }
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits.data() + i * V;
      std::printf("%lld:", static_cast<long long>(i));
      if (args->top > 0) {
        std::vector<int32_t> idx(V);
        std::iota(idx.begin(), idx.end(), 0);
        const int k = static_cast<int>(std::min<int64_t>(args->top, V));
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return row[a] > row[b]; });
        for (int j = 0; j < k; ++j) std::printf(" %d:%.6f", idx[j], row[idx[j]]);
      } else {
        for (int64_t v = 0; v < V; ++v) std::printf(" %.6g", row[v]);
      }
      std::printf("\n");
    }
  });
}

}  // namespace zinc::cli
