// A loaded model: weights on a backend plus one forward pass, written once per
// architecture against the backend's ops. Architectures register by their GGUF
// `general.architecture` name in registry.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "runtime/sequence.h"

namespace zinc {

namespace gguf { class GgufFile; }

// One sequence's part of a batched forward pass: tokens to absorb at positions
// [seq->n_past, seq->n_past + n), and how many of its last positions want logits
// (0: none, e.g. a prompt chunk that is not the last).
struct SequenceChunk {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  int64_t n_out = 1;
  // When set (I32 {tokens.size()} in backend memory, e.g. the token the last step
  // sampled on the device), the chunk's ids are read from here and `tokens` only
  // gives their count: the host need not know them before it submits the step.
  const Tensor* device_ids = nullptr;
};

// Called with intermediate tensors when set (for diffing against an oracle); layer
// is -1 outside the layers. Costs nothing when unset.
using TraceFn = std::function<void(const Tensor& t, std::string_view name, int layer)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string_view arch() const = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_ctx_train() const = 0;

  // Queries per attention call over a sliding window's KV ring: a longer chunk of a
  // sequence's tokens attends in pieces of this many, and the ring keeps the
  // window's rows and a piece's (blocks::kv_cache_rows).
  static constexpr int64_t kWindowPiece = 512;
  // State for one sequence of up to n_ctx tokens, zeroed. A smaller window_piece
  // (tests) makes a sliding window's ring smaller.
  SequenceState new_sequence(int64_t n_ctx, int64_t window_piece = kWindowPiece) {
    return make_sequence(n_ctx, window_piece);
  }
  // One pass over several sequences at once (each at most once): every weight is
  // read once for all their tokens; attention and recurrent state stay per
  // sequence. Advances each n_past. Returns logits {n_vocab, sum of n_out}, the
  // chunks' rows in order, in backend scratch memory valid until the next forward;
  // an empty tensor when no chunk wants logits.
  virtual Tensor forward_batch(std::span<const SequenceChunk> batch) = 0;

  // Absorbs tokens at positions [seq.n_past, seq.n_past + n) and advances n_past.
  // Returns logits {n_vocab, n_out} for the last n_out tokens.
  Tensor forward(SequenceState& seq, std::span<const int32_t> tokens, int64_t n_out = 1) {
    const SequenceChunk chunk{&seq, tokens, n_out};
    return forward_batch(std::span(&chunk, 1));
  }

  void set_trace(TraceFn fn) { trace_fn_ = std::move(fn); }

 protected:
  virtual SequenceState make_sequence(int64_t n_ctx, int64_t window_piece) = 0;
  void trace(const Tensor& t, std::string_view name, int layer = -1) const {
    if (trace_fn_) trace_fn_(t, name, layer);
  }

 private:
  TraceFn trace_fn_;
};

// Builds the model for the file's architecture on the backend. The file must
// outlive the model (the CPU backend reads weights from the map). Throws with a
// clear message for an unknown architecture or a tensor of the wrong shape.
std::unique_ptr<Model> load_model(const gguf::GgufFile& file, Backend& backend);

}  // namespace zinc
