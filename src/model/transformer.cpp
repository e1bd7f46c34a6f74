// Plain pre-norm transformers: GGUF `llama` (Llama 2/3, SmolLM2), `qwen3` and
// `qwen3moe`. Every layer is x += attention(rms_norm(x)); x += ffn(rms_norm(x)),
// the FFN a SwiGLU MLP or (qwen3moe) a routed MoE without shared expert.
//
// What tells them apart, and why:
// - llama: llama.cpp's converter permutes the q/k projection rows so that RoPE over
//   adjacent pairs (2j, 2j+1) reproduces Hugging Face's rotate_half; hence normal
//   (not NEOX) pairing. Llama 3.1+ files carry rope_freqs.weight, the per-frequency
//   divisors of its long-context scaling.
// - qwen3 / qwen3moe: q/k rows are stored as in Hugging Face (NEOX pairing), and
//   each head's q and k pass a per-head RMSNorm whose weight is stored as is (not +1).
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

struct Variant {
  bool neox_rope;  // NEOX pairing (j, j + n_rot/2) rather than adjacent pairs
  bool qk_norm;    // attn_q_norm / attn_k_norm per head
  bool moe;        // routed experts instead of a dense FFN
};

struct Layer {
  Tensor attn_norm, ffn_norm;
  blocks::AttentionWeights attn;
  blocks::FfnWeights ffn;
  blocks::MoeWeights moe;
};

class Transformer final : public Model {
 public:
  Transformer(const gguf::GgufFile& f, Backend& be, Variant v) : be_(be), arch_(f.architecture()), variant_(v) {
    const std::string a = arch_ + ".";
    n_layer_ = f.get_int(a + "block_count");
    n_embd_ = f.get_int(a + "embedding_length");
    n_ctx_train_ = f.get_int(a + "context_length");
    eps_ = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));

    read_attention_heads(f, arch_, n_embd_, eps_, attn_);
    attn_.rope.n_rot = static_cast<int>(f.get_int_or(a + "rope.dimension_count", attn_.head_dim));
    attn_.rope.theta = static_cast<float>(f.get_float_or(a + "rope.freq_base", 10000.0));
    attn_.rope.neox = variant_.neox_rope;
    attn_.rope.freq_scale = linear_rope_scale(f, arch_);
    if (!variant_.moe && f.get_int_or(a + "expert_count", 0) > 0)
      throw std::runtime_error(f.path() + ": " + arch_ + " with experts (Mixtral-style) is not supported");

    WeightLoader w(f, be);
    tok_embd_ = w.get("token_embd.weight", {n_embd_, -1});
    n_vocab_ = tok_embd_.ne[1];
    output_norm_ = w.get("output_norm.weight", {n_embd_});
    // Tied embeddings (SmolLM2, small Qwen3) have no output.weight.
    output_ = w.has("output.weight") ? w.get("output.weight", {n_embd_, n_vocab_}) : tok_embd_;
    rope_freqs_ = w.get_optional("rope_freqs.weight", {attn_.rope.n_rot / 2});
    if (!rope_freqs_.empty()) attn_.rope.freq_factors = &rope_freqs_;

    const int64_t D = attn_.head_dim, Hq = attn_.n_head, Hkv = attn_.n_head_kv;
    if (variant_.moe) {
      moe_.n_used = static_cast<int>(f.get_int(a + "expert_used_count"));
      moe_.renormalize = true;  // Qwen3 MoE's norm_topk_prob; llama.cpp assumes it too
    }
    for (int i = 0; i < n_layer_; ++i) {
      Layer L;
      auto name = [&](const char* s) { return WeightLoader::blk(i, s); };
      L.attn_norm = w.get(name("attn_norm.weight"), {n_embd_});
      L.ffn_norm = w.get(name("ffn_norm.weight"), {n_embd_});
      L.attn.q = w.get(name("attn_q.weight"), {n_embd_, Hq * D});
      L.attn.k = w.get(name("attn_k.weight"), {n_embd_, Hkv * D});
      L.attn.v = w.get(name("attn_v.weight"), {n_embd_, Hkv * D});
      L.attn.o = w.get(name("attn_output.weight"), {Hq * D, n_embd_});
      if (variant_.qk_norm) {
        L.attn.q_norm = w.get(name("attn_q_norm.weight"), {D});
        L.attn.k_norm = w.get(name("attn_k_norm.weight"), {D});
      }
      if (variant_.moe) {
        const int64_t E = f.get_int(a + "expert_count"), ff = f.get_int(a + "expert_feed_forward_length");
        L.moe.router = w.get(name("ffn_gate_inp.weight"), {n_embd_, E});
        L.moe.experts.gate = w.get(name("ffn_gate_exps.weight"), {n_embd_, ff, E});
        L.moe.experts.up = w.get(name("ffn_up_exps.weight"), {n_embd_, ff, E});
        L.moe.experts.down = w.get(name("ffn_down_exps.weight"), {ff, n_embd_, E});
      } else {
        const int64_t ff = f.get_int(a + "feed_forward_length");
        L.ffn = {w.get(name("ffn_gate.weight"), {n_embd_, ff}), w.get(name("ffn_up.weight"), {n_embd_, ff}),
                 w.get(name("ffn_down.weight"), {ff, n_embd_})};
      }
      layers_.push_back(std::move(L));
    }
  }

  std::string_view arch() const override { return arch_; }
  int64_t n_vocab() const override { return n_vocab_; }
  int64_t n_ctx_train() const override { return n_ctx_train_; }

  SequenceState make_sequence(int64_t n_ctx, int64_t window_piece) override {
    return blocks::kv_cache_sequence(be_, std::vector<int>(n_layer_, 0), attn_.head_dim, attn_.n_head_kv, n_ctx,
                                     window_piece);
  }

  Tensor forward_batch(std::span<const SequenceChunk> chunks) override {
    const blocks::Batch batch = blocks::begin_forward(be_, chunks);
    Tensor x = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
    be_.embed(tok_embd_, batch.ids, x);
    trace(x, "embed");
    // The residual x is summed in place, each add fused with the norm after it (the next
    // layer's, or the output norm). A layer reads h and writes the next layer's into
    // h_next; the rest of its scratch is given back when it ends.
    Tensor h = blocks::rms_norm(be_, x, layers_[0].attn_norm, eps_);
    Tensor h_next = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
    for (int il = 0; il < n_layer_; ++il) {
      const ScratchMark layer_start = be_.scratch_mark();
      const Layer& L = layers_[il];
      Tensor attn = blocks::attention(be_, L.attn, attn_, batch, il, h);
      trace(attn, "attn_out", il);
      // x + attn goes to x_mid (a MoE router's launch forms it with its norm), the layer's
      // output back to x.
      const Tensor x_mid = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
      const Tensor ffn = blocks::swiglu_or_moe_after_add(be_, variant_.moe ? &L.moe : nullptr, moe_, L.ffn, x, attn,
                                                         L.ffn_norm, eps_, x_mid);
      trace(ffn, "ffn_out", il);
      be_.add_rms_norm(x_mid, ffn, nullptr, nullptr, il + 1 < n_layer_ ? layers_[il + 1].attn_norm : output_norm_,
                       eps_, x, h_next);
      trace(x, "layer_out", il);
      be_.scratch_rewind(layer_start);
      std::swap(h, h_next);
    }
    Tensor last = blocks::finish_forward(be_, batch, h);
    if (last.empty()) return last;
    return blocks::linear(be_, output_, last);
  }

 private:
  Backend& be_;
  std::string arch_;
  Variant variant_;
  int64_t n_layer_ = 0, n_embd_ = 0, n_vocab_ = 0, n_ctx_train_ = 0;
  float eps_ = 1e-5f;
  blocks::AttentionOptions attn_;
  blocks::MoeOptions moe_;
  Tensor tok_embd_, output_norm_, output_, rope_freqs_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_llama(const gguf::GgufFile& file, Backend& backend) {
  return std::make_unique<Transformer>(file, backend, Variant{.neox_rope = false, .qk_norm = false, .moe = false});
}

std::unique_ptr<Model> load_qwen3(const gguf::GgufFile& file, Backend& backend) {
  return std::make_unique<Transformer>(file, backend, Variant{.neox_rope = true, .qk_norm = true, .moe = false});
}

std::unique_ptr<Model> load_qwen3moe(const gguf::GgufFile& file, Backend& backend) {
  return std::make_unique<Transformer>(file, backend, Variant{.neox_rope = true, .qk_norm = true, .moe = true});
}

}  // namespace zinc
