// Backend choice for the CLI (see default_backend.h).
#include "cli/default_backend.h"

namespace zinc::cli {

std::unique_ptr<Backend> make_default_backend(int n_threads) { return make_cpu_backend(n_threads); }

}  // namespace zinc::cli
