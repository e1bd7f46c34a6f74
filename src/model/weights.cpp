#include "model/weights.h"

#include <stdexcept>
#include <vector>

namespace zinc {

namespace {
std::string dims_string(const std::vector<int64_t>& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}
}  // namespace

float linear_rope_scale(const gguf::GgufFile& f, const std::string& arch) {
  const std::string type = f.get_string_or(arch + ".rope.scaling.type", "none");
  if (type == "none") return 1.0f;
  if (type == "linear") return static_cast<float>(1.0 / f.get_float(arch + ".rope.scaling.factor"));
  throw std::runtime_error(f.path() + ": rope scaling '" + type + "' is not supported");
}

Tensor WeightLoader::get(const std::string& name, std::initializer_list<int64_t> dims) const {
  const gguf::TensorInfo* info = file_.find_tensor(name);
  if (!info) throw std::runtime_error(file_.path() + ": missing tensor " + name);
  std::vector<int64_t> want(dims);
  bool ok = info->dims.size() <= 4;
  for (size_t i = 0; ok && i < 4; ++i) {
    const int64_t d = i < want.size() ? want[i] : 1;
    ok = d < 0 || info->dim(i) == d;
  }
  if (!ok)
    throw std::runtime_error(file_.path() + ": tensor " + name + " has dims " + dims_string(info->dims) +
                             ", expected " + dims_string(want));
  return backend_.upload_weight(*info);
}

Tensor WeightLoader::get_optional(const std::string& name, std::initializer_list<int64_t> dims) const {
  return has(name) ? get(name, dims) : Tensor{};
}

}  // namespace zinc
