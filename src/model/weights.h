// Fetching an architecture's weights from a GGUF by name, with the shape checked
// against what the architecture expects, so a malformed file fails at load with a
// message naming the tensor rather than at some op later.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf.h"

namespace zinc {

// The position scale of RoPE from `<arch>.rope.scaling.*`: 1, or 1/factor for linear
// scaling; other schemes would silently give wrong logits at every position, so they
// are refused.
float linear_rope_scale(const gguf::GgufFile& f, const std::string& arch);

class WeightLoader {
 public:
  WeightLoader(const gguf::GgufFile& file, Backend& backend) : file_(file), backend_(backend) {}

  // dims in GGML order, -1 for any; the tensor may omit trailing 1s ({2048} for {2048, 1}).
  Tensor get(const std::string& name, std::initializer_list<int64_t> dims) const;
  Tensor get_optional(const std::string& name, std::initializer_list<int64_t> dims) const;
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // A per-layer tensor name: "blk.<layer>.<suffix>".
  static std::string blk(int layer, const char* suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

  const gguf::GgufFile& file() const { return file_; }

 private:
  const gguf::GgufFile& file_;
  Backend& backend_;
};

}  // namespace zinc
