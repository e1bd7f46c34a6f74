// The one place the CLI picks the backend a command runs on. Today that is the CPU
// backend; the CUDA backend will be chosen here when it is built and a GPU is present.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace zinc::cli {

// n_threads: CPU threads, 0 for all cores.
std::unique_ptr<Backend> make_default_backend(int n_threads = 0);

}  // namespace zinc::cli
