// A tensor in a backend's memory: contiguous, row-major, ne[0] innermost (GGML's
// order, so a weight [out, in] has ne = {in, out}). Tensors do not own memory: the
// backend that allocated them does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "quant/types.h"

namespace zinc {

struct Tensor {
  DType type = DType::F32;
  std::array<int64_t, 4> ne{0, 1, 1, 1};
  void* data = nullptr;

  static Tensor make(DType t, std::initializer_list<int64_t> dims, void* data = nullptr) {
    Tensor r;
    r.type = t;
    size_t i = 0;
    for (int64_t d : dims) r.ne.at(i++) = d;
    r.data = data;
    return r;
  }

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const { return zinc::row_bytes(type, ne[0]); }
  size_t nbytes() const { return row_bytes() * static_cast<size_t>(rows()); }
  bool empty() const { return data == nullptr; }

  // Same memory, new shape (element count must match).
  Tensor reshape(std::initializer_list<int64_t> dims) const {
    Tensor r = make(type, dims, data);
    if (r.n_elements() != n_elements()) throw std::logic_error("reshape: element count differs");
    return r;
  }
  // The slab [first, first+count) along the outermost non-trivial dim `dim` (0..3);
  // contiguous because every dim inside it is whole. Along dim 0 (a vector, such as
  // positions), first is a whole number of the type's blocks.
  Tensor slice(int dim, int64_t first, int64_t count) const {
    Tensor r = *this;
    for (int d = dim + 1; d < 4; ++d)
      if (ne[d] != 1) throw std::logic_error("slice: dims outside the sliced one must be 1");
    r.ne[dim] = count;
    if (dim == 0) {
      r.data = static_cast<char*>(data) + zinc::row_bytes(type, first);
      return r;
    }
    size_t inner = row_bytes();
    for (int d = 1; d < dim; ++d) inner *= static_cast<size_t>(ne[d]);
    r.data = static_cast<char*>(data) + inner * static_cast<size_t>(first);
    return r;
  }
  template <class T> T* as() const { return static_cast<T*>(data); }
  std::string shape_string() const {
    return "[" + std::to_string(ne[0]) + "," + std::to_string(ne[1]) + "," + std::to_string(ne[2]) + "," +
           std::to_string(ne[3]) + "]";
  }
};

}  // namespace zinc
