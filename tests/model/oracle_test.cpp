// zinc's CPU forward pass against golden logits from transformers (made by
// tools/oracle_qwen35moe.py and tools/oracle_dense.py on the GPU machine; see
// tests/data/oracle/README.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model_test_util.h"
#include "test_util.h"

namespace zinc {
namespace {

struct Golden {
  std::string name;
  synth::Options opt;
  uint64_t seed = 0;
  uint64_t hash = 0;
  int64_t n_vocab = 0;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Golden read_golden(const std::filesystem::path& txt) {
  Golden g;
  g.name = txt.stem().string();
  std::ifstream f(txt);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "synth") {
      std::string flag, value;
      while (ls >> flag >> value) {
        if (flag == "--preset") g.opt.preset = value;
        else if (flag == "--arch") g.opt.arch = value;
        else if (flag == "--seed") g.seed = std::stoull(value);
        else if (flag == "--layers") g.opt.layers = std::stoll(value);
        else if (flag == "--experts") g.opt.experts = std::stoll(value);
        else if (flag == "--type") g.opt.type = type_from_name(value);
        else throw std::runtime_error("golden " + g.name + ": unknown synth flag " + flag);
      }
    } else if (key == "fnv1a64") {
      std::string hex;
      ls >> hex;
      g.hash = std::stoull(hex, nullptr, 16);
    } else if (key == "n_vocab") {
      ls >> g.n_vocab;
    } else if (key == "tokens") {
      std::string list, item;
      ls >> list;
      std::stringstream ts(list);
      while (std::getline(ts, item, ',')) g.tokens.push_back(std::stoi(item));
    }
  }
  std::filesystem::path bin = txt;
  bin.replace_extension(".bin");
  std::ifstream b(bin, std::ios::binary);
  g.logits.resize(g.tokens.size() * g.n_vocab);
  b.read(reinterpret_cast<char*>(g.logits.data()), g.logits.size() * sizeof(float));
  if (!b || g.tokens.empty()) throw std::runtime_error("golden " + g.name + ": unreadable");
  return g;
}

std::vector<std::filesystem::path> golden_files() {
  std::vector<std::filesystem::path> out;
  for (auto& e : std::filesystem::directory_iterator(test::source_dir() + "/tests/data/oracle"))
    if (e.path().extension() == ".txt") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(OracleTransformers, GoldensExist) { EXPECT_GE(golden_files().size(), 2u); }

TEST(OracleTransformers, CpuLogitsMatchTransformers) {
  for (const auto& path : golden_files()) {
    SCOPED_TRACE(path.filename().string());
    Golden g = read_golden(path);
    const std::string model_path = test::synth_model(g.opt, g.seed);
    ASSERT_EQ(test::fnv1a64_file(model_path), g.hash)
        << "zinc synth no longer reproduces the file the goldens were made from";
    auto file = gguf::GgufFile::open(model_path);
    auto backend = make_cpu_backend(2);
    auto model = load_model(*file, *backend);
    ASSERT_EQ(model->n_vocab(), g.n_vocab);
    const int64_t n = static_cast<int64_t>(g.tokens.size());

    // Prefill (chunked delta rule) and decode (recurrent step) both against the oracle.
    SequenceState seq = model->new_sequence(n);
    Tensor l = model->forward(seq, g.tokens, n);
    std::vector<float> prefill(n * g.n_vocab);
    backend->read(l, prefill.data(), prefill.size() * sizeof(float));
    SequenceState seq2 = model->new_sequence(n);
    std::vector<float> decode(n * g.n_vocab);
    for (int64_t i = 0; i < n; ++i) {
      Tensor d = model->forward(seq2, std::span(g.tokens).subspan(i, 1), 1);
      backend->read(d, decode.data() + i * g.n_vocab, g.n_vocab * sizeof(float));
    }
    // A sliding window's KV ring, kept small so that it wraps (pieces of 4 queries);
    // without windows, the whole cache again.
    SequenceState seq3 = model->new_sequence(n, 4);
    Tensor r = model->forward(seq3, g.tokens, n);
    std::vector<float> ring(n * g.n_vocab);
    backend->read(r, ring.data(), ring.size() * sizeof(float));
    for (auto [label, got] : {std::pair{"prefill", &prefill}, std::pair{"decode", &decode}, std::pair{"ring", &ring}}) {
      auto s = test::compare_logits(g.logits, *got, g.n_vocab);
      std::printf("[oracle] %s %s: %lld positions, top-1 agreement %.4f, mean KL %.3g, max |diff| %.3g\n",
                  g.name.c_str(), label, static_cast<long long>(n), s.top1_agreement, s.mean_kl, s.max_abs_diff);
      EXPECT_GE(s.top1_agreement, 0.99) << label;
      EXPECT_LT(s.mean_kl, 1e-3) << label;
    }
  }
}

}  // namespace
}  // namespace zinc
