// Backend choice by name (see backend_choice.h).
#include "cli/backend_choice.h"

#include <stdexcept>

#ifdef ZINC_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace zinc::cli {

bool cuda_available() {
#ifdef ZINC_WITH_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, int n_threads) {
  if (name == "cpu") return make_cpu_backend(n_threads);
  if (name == "auto") return cuda_available() ? make_backend("cuda", n_threads) : make_cpu_backend(n_threads);
  if (name == "cuda") {
#ifdef ZINC_WITH_CUDA
    if (!cuda_available()) throw std::runtime_error("--backend cuda: no CUDA GPU found");
    return make_cuda_backend(0);
#else
    throw std::runtime_error("--backend cuda: this zinc was built without CUDA");
#endif
  }
  throw std::invalid_argument("unknown backend '" + name + "' (known: cpu, cuda, auto)");
}

}  // namespace zinc::cli
