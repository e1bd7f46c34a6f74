// GPT-OSS (GGUF `gpt-oss`: OpenAI's gpt-oss-20b / -120b): a pre-norm MoE transformer.
// Per layer:
//   x += attention(rms_norm(x, attn_norm));  x += moe(rms_norm(x, post_attention_norm))
//
// What sets it apart, as the GGUF and llama.cpp (src/models/openai-moe.cpp) read it:
// - Every projection has a bias (q, k, v, output, the router and each expert's gate,
//   up and down).
// - Attention sinks: each head's softmax has one more logit with no value
//   (blk.N.attn_sinks, backend.h's attention).
// - Sliding-window attention (`attention.sliding_window`, 128) on the even layers:
//   layer i is local unless (i + 1) is a multiple of `sliding_window_pattern` (default 2).
// - RoPE pairs are NEOX over the whole head, with YaRN scaling (factor 32 over an
//   original 4096 positions; weights.h): frequencies from the file's factors, and YaRN's
//   cos/sin factor folded into the query scale (squared: q and k both carry it).
// - Experts: top-k of the router's logits, softmax over those k (the same weights as a
//   softmax over all then renormalised), and GPT-OSS's clamped SwiGLU,
//   g·sigmoid(1.702·g)·(u + 1) with g ≤ 7 and |u| ≤ 7 (constants of the model, not in
//   the file; llama.cpp and Hugging Face fix them too).
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "model/blocks.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/weights.h"

namespace zinc {
namespace {

constexpr float kSwigluAlpha = 1.702f, kSwigluClamp = 7.0f;

struct Layer {
  Tensor attn_norm, post_attention_norm;
  blocks::AttentionWeights attn;
  blocks::MoeWeights moe;
  bool local = false;  // sliding-window attention
};

class GptOss final : public Model {
 public:
  GptOss(const gguf::GgufFile& f, Backend& be) : be_(be) {
    const std::string a = "gpt-oss.";
    n_layer_ = f.get_int(a + "block_count");
    n_embd_ = f.get_int(a + "embedding_length");
    n_ctx_train_ = f.get_int(a + "context_length");
    eps_ = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));

    blocks::AttentionOptions global;
    read_attention_heads(f, "gpt-oss", n_embd_, eps_, global);
    global.rope.neox = true;
    global.rope.theta = static_cast<float>(f.get_float_or(a + "rope.freq_base", 150000.0));
    float mscale = 1;
    if (f.get_string_or(a + "rope.scaling.type", "none") == "yarn") {
      const YarnScaling yarn = yarn_rope_scaling(f, "gpt-oss", global.rope.n_rot, global.rope.theta);
      rope_freqs_ = be.alloc_persistent(DType::F32, {global.rope.n_rot / 2});
      be.write(rope_freqs_, yarn.freq_factors.data(), yarn.freq_factors.size() * sizeof(float));
      global.rope.freq_factors = &rope_freqs_;
      mscale = yarn.mscale;
    } else {
      global.rope.freq_scale = linear_rope_scale(f, "gpt-oss");
    }
    global.scale = mscale * mscale / std::sqrt(static_cast<float>(global.head_dim));
    global_ = local_ = global;
    local_.window = static_cast<int>(f.get_int_or(a + "attention.sliding_window", 0));
    const int64_t pattern = f.get_int_or(a + "attention.sliding_window_pattern", 2);
    if (local_.window < 0 || pattern < 1)
      throw std::runtime_error(f.path() + ": bad sliding_window / sliding_window_pattern");

    moe_.n_used = static_cast<int>(f.get_int(a + "expert_used_count"));
    moe_.renormalize = true;
    const int64_t E = f.get_int(a + "expert_count"), ff = f.get_int(a + "expert_feed_forward_length");
    if (moe_.n_used < 1 || moe_.n_used > E) throw std::runtime_error(f.path() + ": bad expert_used_count");

    WeightLoader w(f, be);
    tok_embd_ = w.get("token_embd.weight", {n_embd_, -1});
    n_vocab_ = tok_embd_.ne[1];
    output_norm_ = w.get("output_norm.weight", {n_embd_});
    output_ = w.has("output.weight") ? w.get("output.weight", {n_embd_, n_vocab_}) : tok_embd_;
    const int64_t D = global.head_dim, Hq = global.n_head, Hkv = global.n_head_kv;
    for (int i = 0; i < n_layer_; ++i) {
      Layer L;
      auto name = [&](const char* s) { return WeightLoader::blk(i, s); };
      L.local = local_.window > 0 && (i + 1) % pattern != 0;
      L.attn_norm = w.get(name("attn_norm.weight"), {n_embd_});
      L.post_attention_norm = w.get(name("post_attention_norm.weight"), {n_embd_});
      L.attn.q = w.get(name("attn_q.weight"), {n_embd_, Hq * D});
      L.attn.k = w.get(name("attn_k.weight"), {n_embd_, Hkv * D});
      L.attn.v = w.get(name("attn_v.weight"), {n_embd_, Hkv * D});
      L.attn.o = w.get(name("attn_output.weight"), {Hq * D, n_embd_});
      L.attn.q_bias = w.get(name("attn_q.bias"), {Hq * D});
      L.attn.k_bias = w.get(name("attn_k.bias"), {Hkv * D});
      L.attn.v_bias = w.get(name("attn_v.bias"), {Hkv * D});
      L.attn.o_bias = w.get(name("attn_output.bias"), {n_embd_});
      L.attn.sinks = w.get(name("attn_sinks.weight"), {Hq});
      L.moe.router = w.get(name("ffn_gate_inp.weight"), {n_embd_, E});
      L.moe.router_bias = w.get(name("ffn_gate_inp.bias"), {E});
      ExpertWeights& ex = L.moe.experts;
      ex.gate = w.get(name("ffn_gate_exps.weight"), {n_embd_, ff, E});
      ex.up = w.get(name("ffn_up_exps.weight"), {n_embd_, ff, E});
      ex.down = w.get(name("ffn_down_exps.weight"), {ff, n_embd_, E});
      ex.gate_bias = w.get(name("ffn_gate_exps.bias"), {ff, E});
      ex.up_bias = w.get(name("ffn_up_exps.bias"), {ff, E});
      ex.down_bias = w.get(name("ffn_down_exps.bias"), {n_embd_, E});
      ex.alpha = kSwigluAlpha;
      ex.clamp = kSwigluClamp;
      layers_.push_back(std::move(L));
    }
  }

  std::string_view arch() const override { return "gpt-oss"; }
  int64_t n_vocab() const override { return n_vocab_; }
  int64_t n_ctx_train() const override { return n_ctx_train_; }

  // The local layers keep a ring of their window's rows (blocks::kv_cache_rows), the
  // global ones the whole context.
  SequenceState make_sequence(int64_t n_ctx, int64_t window_piece) override {
    std::vector<int> windows;
    for (const Layer& L : layers_) windows.push_back(L.local ? local_.window : 0);
    return blocks::kv_cache_sequence(be_, windows, global_.head_dim, global_.n_head_kv, n_ctx,
                                     window_piece);
  }

  Tensor forward_batch(std::span<const SequenceChunk> chunks) override {
    const blocks::Batch batch = blocks::begin_forward(be_, chunks);
    Tensor x = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
    be_.embed(tok_embd_, batch.ids, x);
    trace(x, "embed");
    // A layer reads h and writes the next layer's into h_next; the rest of its scratch is
    // given back when it ends.
    Tensor h = blocks::rms_norm(be_, x, layers_[0].attn_norm, eps_);
    Tensor h_next = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
    for (int il = 0; il < n_layer_; ++il) {
      const ScratchMark layer_start = be_.scratch_mark();
      const Layer& L = layers_[il];
      Tensor attn = blocks::attention(be_, L.attn, L.local ? local_ : global_, batch, il, h);
      trace(attn, "attn_out", il);
      // The output projection's bias rides in the residual norm (blocks::attention leaves it out).
      const Tensor hf =
          blocks::add_rms_norm(be_, x, attn, L.post_attention_norm, eps_, nullptr, blocks::given(L.attn.o_bias));
      Tensor ffn = blocks::moe(be_, L.moe, moe_, hf);
      trace(ffn, "ffn_out", il);
      const Tensor& next_norm = il + 1 < n_layer_ ? layers_[il + 1].attn_norm : output_norm_;
      be_.add_rms_norm(x, ffn, nullptr, nullptr, next_norm, eps_, x, h_next);
      trace(x, "layer_out", il);
      be_.scratch_rewind(layer_start);
      std::swap(h, h_next);
    }
    // h is the output norm of every row; the wanted rows go to the LM head.
    Tensor last = blocks::finish_forward(be_, batch, h);
    if (last.empty()) return last;
    return blocks::linear(be_, output_, last);
  }

 private:
  Backend& be_;
  int64_t n_layer_ = 0, n_embd_ = 0, n_vocab_ = 0, n_ctx_train_ = 0;
  float eps_ = 1e-5f;
  blocks::AttentionOptions global_, local_;
  blocks::MoeOptions moe_;
  Tensor tok_embd_, output_norm_, output_, rope_freqs_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_gpt_oss(const gguf::GgufFile& file, Backend& backend) {
  return std::make_unique<GptOss>(file, backend);
}

}  // namespace zinc
