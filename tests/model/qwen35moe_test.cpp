// qwen35moe on the CPU backend: the synthetic layout matches the benchmark file,
// prefill and token-by-token decode agree, and state carries across calls.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "model_test_util.h"

namespace zinc {
namespace {

// The benchmark file's table from qwen35moe.md, written out independently of synth.
TEST(Qwen35Moe, SynthFullSizePresetMatchesBenchmarkFile) {
  synth::Options opt;
  opt.preset = "35b-a3b";
  synth::ModelSpec spec = synth::make_spec(opt);
  std::map<std::string, const synth::TensorSpec*> by_name;
  for (const auto& t : spec.tensors) by_name[t.name] = &t;
  ASSERT_EQ(by_name.size(), spec.tensors.size()) << "duplicate tensor names";

  struct Want { std::string name; DType type; std::vector<int64_t> dims; };
  std::vector<Want> want = {
      {"token_embd.weight", DType::Q4_K, {2048, 248320}},
      {"output_norm.weight", DType::F32, {2048}},
      {"output.weight", DType::Q6_K, {2048, 248320}},
  };
  for (int i = 0; i < 40; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    want.push_back({b + "attn_norm.weight", DType::F32, {2048}});
    want.push_back({b + "post_attention_norm.weight", DType::F32, {2048}});
    if (i % 4 == 3) {
      want.push_back({b + "attn_q.weight", DType::Q8_0, {2048, 8192}});
      want.push_back({b + "attn_k.weight", DType::Q8_0, {2048, 512}});
      want.push_back({b + "attn_v.weight", DType::Q8_0, {2048, 512}});
      want.push_back({b + "attn_output.weight", DType::Q8_0, {4096, 2048}});
      want.push_back({b + "attn_q_norm.weight", DType::F32, {256}});
      want.push_back({b + "attn_k_norm.weight", DType::F32, {256}});
    } else {
      want.push_back({b + "attn_qkv.weight", DType::Q8_0, {2048, 8192}});
      want.push_back({b + "attn_gate.weight", DType::Q8_0, {2048, 4096}});
      want.push_back({b + "ssm_conv1d.weight", DType::F32, {4, 8192}});
      want.push_back({b + "ssm_dt.bias", DType::F32, {32}});
      want.push_back({b + "ssm_a", DType::F32, {32}});
      want.push_back({b + "ssm_beta.weight", DType::F32, {2048, 32}});
      want.push_back({b + "ssm_alpha.weight", DType::F32, {2048, 32}});
      want.push_back({b + "ssm_norm.weight", DType::F32, {128}});
      want.push_back({b + "ssm_out.weight", DType::Q8_0, {4096, 2048}});
    }
    want.push_back({b + "ffn_gate_inp.weight", DType::F32, {2048, 256}});
    want.push_back({b + "ffn_gate_exps.weight", DType::Q4_K, {2048, 512, 256}});
    want.push_back({b + "ffn_up_exps.weight", DType::Q4_K, {2048, 512, 256}});
    want.push_back({b + "ffn_down_exps.weight", DType::Q5_K, {512, 2048, 256}});
    want.push_back({b + "ffn_gate_inp_shexp.weight", DType::F32, {2048}});
    want.push_back({b + "ffn_gate_shexp.weight", DType::Q8_0, {2048, 512}});
    want.push_back({b + "ffn_up_shexp.weight", DType::Q8_0, {2048, 512}});
    want.push_back({b + "ffn_down_shexp.weight", DType::Q8_0, {512, 2048}});
  }
  EXPECT_EQ(spec.tensors.size(), want.size());
  for (const auto& w : want) {
    auto it = by_name.find(w.name);
    ASSERT_NE(it, by_name.end()) << "missing " << w.name;
    EXPECT_EQ(it->second->type, w.type) << w.name;
    EXPECT_EQ(it->second->dims, w.dims) << w.name;
  }
  const double gib = static_cast<double>(synth::total_bytes(spec)) / (1024.0 * 1024 * 1024);
  EXPECT_NEAR(gib, 20.27, 0.01);
}

class Qwen35MoeCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    synth::Options opt;
    opt.preset = "tiny";
    file_ = gguf::GgufFile::open(test::synth_model(opt, 11));
    backend_ = make_cpu_backend(2);
    model_ = load_model(*file_, *backend_);
    std::mt19937 rng(5);
    tokens_.resize(70);
    for (auto& t : tokens_) t = static_cast<int32_t>(rng() % model_->n_vocab());
  }
  std::vector<float> run(SequenceState& seq, std::span<const int32_t> toks, int64_t n_out) {
    Tensor l = model_->forward(seq, toks, n_out);
    std::vector<float> out(n_out * model_->n_vocab());
    backend_->read(l, out.data(), out.size() * sizeof(float));
    return out;
  }
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> tokens_;
};

TEST_F(Qwen35MoeCpu, PrefillEqualsTokenByTokenDecode) {
  const int64_t n = static_cast<int64_t>(tokens_.size()), V = model_->n_vocab();
  SequenceState a = model_->new_sequence(n);
  std::vector<float> prefill = run(a, tokens_, n);
  SequenceState b = model_->new_sequence(n);
  std::vector<float> decode;
  for (int64_t i = 0; i < n; ++i) {
    auto row = run(b, std::span(tokens_).subspan(i, 1), 1);
    decode.insert(decode.end(), row.begin(), row.end());
  }
  auto s = test::compare_logits(prefill, decode, V);
  EXPECT_EQ(s.top1_agreement, 1.0);
  EXPECT_LT(s.max_abs_diff, 1e-3);
  EXPECT_EQ(a.n_past, n);
}

TEST_F(Qwen35MoeCpu, PrefillThenDecodeEqualsLongerPrefill) {
  const int64_t n = 41;
  SequenceState a = model_->new_sequence(64);
  run(a, std::span(tokens_).first(n - 1), 1);
  std::vector<float> next = run(a, std::span(tokens_).subspan(n - 1, 1), 1);
  SequenceState b = model_->new_sequence(64);
  std::vector<float> whole = run(b, std::span(tokens_).first(n), 1);
  auto s = test::compare_logits(whole, next, model_->n_vocab());
  EXPECT_LT(s.max_abs_diff, 1e-3);
  // Logits vary: a model that ignored its input would pass the checks above.
  EXPECT_GT(std::abs(next[0] - next[1]) + std::abs(next[2] - next[3]), 1e-4);
}

TEST_F(Qwen35MoeCpu, DeviceIdsEqualHostIds) {
  // A chunk whose ids live in backend memory (a token sampled on the device) gives
  // the logits of the same ids passed from the host; its `tokens` only count them.
  const int64_t n = 5;
  SequenceState a = model_->new_sequence(16), b = model_->new_sequence(16);
  const std::vector<float> want = run(a, std::span(tokens_).first(n), n);
  Tensor ids = backend_->alloc_persistent(DType::I32, {n});
  backend_->write(ids, tokens_.data(), n * sizeof(int32_t));
  const std::vector<int32_t> placeholders(n, 0);
  const SequenceChunk chunk{&b, placeholders, n, &ids};
  Tensor l = model_->forward_batch(std::span(&chunk, 1));
  std::vector<float> got(want.size());
  backend_->read(l, got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, want);
  EXPECT_EQ(b.n_past, n);
  // An id tensor of the wrong size is refused.
  const SequenceChunk bad{&b, std::span(placeholders).first(2), 1, &ids};
  EXPECT_THROW(model_->forward_batch(std::span(&bad, 1)), std::invalid_argument);
}

TEST_F(Qwen35MoeCpu, ResetForgetsTheSequence) {
  SequenceState a = model_->new_sequence(64);
  std::vector<float> first = run(a, std::span(tokens_).first(10), 1);
  a.reset(*backend_);
  std::vector<float> again = run(a, std::span(tokens_).first(10), 1);
  EXPECT_EQ(first, again);
}

TEST_F(Qwen35MoeCpu, ContextOverflowIsAnError) {
  SequenceState a = model_->new_sequence(8);
  EXPECT_THROW(run(a, std::span(tokens_).first(9), 1), std::length_error);
}

TEST(Qwen35Moe, UnknownArchitectureIsAClearError) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "mystery");
  auto bytes = w.write_memory([](size_t, uint8_t*) {});
  auto file = gguf::GgufFile::from_memory(bytes, "mystery.gguf");
  auto be = make_cpu_backend(1);
  try {
    load_model(*file, *be);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported architecture 'mystery'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zinc
