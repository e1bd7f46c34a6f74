// Moving tensors between a test and a backend.
#pragma once

#include <initializer_list>
#include <vector>

#include "backend/backend.h"

namespace zinc::test {

inline std::vector<float> read_floats(Backend& be, const Tensor& t) {
  std::vector<float> v(t.n_elements());
  be.read(t, v.data(), t.nbytes());
  return v;
}

// A persistent tensor holding `data` (as many bytes as the type and dims take).
inline Tensor upload(Backend& be, DType type, std::initializer_list<int64_t> dims, const void* data) {
  Tensor t = be.alloc_persistent(type, dims);
  be.write(t, data, t.nbytes());
  return t;
}

}  // namespace zinc::test
