// Gemma 3 (GGUF `gemma3`, text): a pre-norm transformer with a norm after each
// sub-block as well, GeGLU MLPs, and sliding-window attention on most layers. Per layer:
//   h = attention(rms_norm(x, attn_norm));    x += rms_norm(h, post_attention_norm)
//   h = geglu_mlp(rms_norm(x, ffn_norm));     x += rms_norm(h, post_ffw_norm)
//
// What the GGUF leaves implicit, as llama.cpp reads it (src/models/gemma3.cpp there):
// - The token embedding is scaled by sqrt(n_embd) (exactly, in f32).
// - Layer i attends over a sliding window of `attention.sliding_window` positions
//   unless (i + 1) is a multiple of `attention.sliding_window_pattern` (default 6:
//   five local layers, then a global one). Local layers use RoPE base
//   `rope.freq_base_swa` (default 10000) without scaling; global ones `rope.freq_base`
//   and the file's linear scaling (Gemma 3 4B and up: factor 8).
// - Queries are scaled by 1/sqrt(head_dim), except in the 27B (62 layers), whose
//   query_pre_attn_scalar is n_embd / n_head.
// - q and k pass a per-head RMSNorm; RoPE pairs are NEOX (j, j + D/2). Every norm
//   weight is stored with Gemma's +1 already added by the converter, so it is used as is.
// - The LM head is the embedding (tied) unless output.weight is present.
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

struct Layer {
  Tensor attn_norm, post_attention_norm, ffn_norm, post_ffw_norm;
  blocks::AttentionWeights attn;
  blocks::FfnWeights ffn;
  bool local = false;  // sliding-window attention
};

class Gemma3 final : public Model {
 public:
  Gemma3(const gguf::GgufFile& f, Backend& be) : be_(be) {
    const std::string a = "gemma3.";
    n_layer_ = f.get_int(a + "block_count");
    n_embd_ = f.get_int(a + "embedding_length");
    n_ctx_train_ = f.get_int(a + "context_length");
    eps_ = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
    if (f.get_float_or(a + "final_logit_softcapping", 0.0) != 0.0)
      throw std::runtime_error(f.path() + ": final logit soft-capping (Gemma 2) is not supported");

    blocks::AttentionOptions global;
    read_attention_heads(f, "gemma3", n_embd_, eps_, global);
    global.rope.neox = true;
    global.rope.theta = static_cast<float>(f.get_float_or(a + "rope.freq_base", 1000000.0));
    global.rope.freq_scale = linear_rope_scale(f, "gemma3");  // the global layers only
    const float scale_dim = n_layer_ == 62 ? static_cast<float>(n_embd_ / global.n_head)
                                           : static_cast<float>(global.head_dim);
    global.scale = 1.0f / std::sqrt(scale_dim);
    global_ = local_ = global;
    local_.rope.theta = static_cast<float>(f.get_float_or(a + "rope.freq_base_swa", 10000.0));
    local_.rope.freq_scale = 1.0f;
    local_.window = static_cast<int>(f.get_int_or(a + "attention.sliding_window", 0));
    const int64_t pattern = f.get_int_or(a + "attention.sliding_window_pattern", 6);
    if (local_.window < 0 || pattern < 1)
      throw std::runtime_error(f.path() + ": bad sliding_window / sliding_window_pattern");

    WeightLoader w(f, be);
    tok_embd_ = w.get("token_embd.weight", {n_embd_, -1});
    n_vocab_ = tok_embd_.ne[1];
    output_norm_ = w.get("output_norm.weight", {n_embd_});
    output_ = w.has("output.weight") ? w.get("output.weight", {n_embd_, n_vocab_}) : tok_embd_;
    const int64_t D = global.head_dim, Hq = global.n_head, Hkv = global.n_head_kv;
    const int64_t ff = f.get_int(a + "feed_forward_length");
    for (int i = 0; i < n_layer_; ++i) {
      Layer L;
      auto name = [&](const char* s) { return WeightLoader::blk(i, s); };
      L.local = local_.window > 0 && (i + 1) % pattern != 0;
      L.attn_norm = w.get(name("attn_norm.weight"), {n_embd_});
      L.post_attention_norm = w.get(name("post_attention_norm.weight"), {n_embd_});
      L.ffn_norm = w.get(name("ffn_norm.weight"), {n_embd_});
      L.post_ffw_norm = w.get(name("post_ffw_norm.weight"), {n_embd_});
      L.attn.q = w.get(name("attn_q.weight"), {n_embd_, Hq * D});
      L.attn.k = w.get(name("attn_k.weight"), {n_embd_, Hkv * D});
      L.attn.v = w.get(name("attn_v.weight"), {n_embd_, Hkv * D});
      L.attn.o = w.get(name("attn_output.weight"), {Hq * D, n_embd_});
      L.attn.q_norm = w.get(name("attn_q_norm.weight"), {D});
      L.attn.k_norm = w.get(name("attn_k_norm.weight"), {D});
      L.ffn = {w.get(name("ffn_gate.weight"), {n_embd_, ff}), w.get(name("ffn_up.weight"), {n_embd_, ff}),
               w.get(name("ffn_down.weight"), {ff, n_embd_})};
      layers_.push_back(std::move(L));
    }
  }

  std::string_view arch() const override { return "gemma3"; }
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
    be_.scale(x, std::sqrt(static_cast<float>(n_embd_)), x);
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
      const Tensor hf = blocks::add_rms_norm(be_, x, attn, L.ffn_norm, eps_, &L.post_attention_norm);
      Tensor ffn = blocks::glu_ffn(be_, L.ffn, hf, blocks::Glu::Gelu);
      trace(ffn, "ffn_out", il);
      const Tensor& next_norm = il + 1 < n_layer_ ? layers_[il + 1].attn_norm : output_norm_;
      be_.add_rms_norm(x, ffn, nullptr, &L.post_ffw_norm, next_norm, eps_, x, h_next);
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
  float eps_ = 1e-6f;
  blocks::AttentionOptions global_, local_;
  Tensor tok_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_gemma3(const gguf::GgufFile& file, Backend& backend) {
  return std::make_unique<Gemma3>(file, backend);
}

}  // namespace zinc
