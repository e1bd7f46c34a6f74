// Backends by name for the CLI's --backend options: "cpu", "cuda", or "auto" (the
// CUDA backend when zinc was built with it and a GPU is present, else the CPU one).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace zinc::cli {

// n_threads: CPU threads (0: all cores). Throws for an unknown name, or "cuda"
// without CUDA support or a GPU.
std::unique_ptr<Backend> make_backend(const std::string& name, int n_threads = 0);
// True when zinc was built with CUDA and the runtime sees a GPU.
bool cuda_available();

}  // namespace zinc::cli
