// Paths and small helpers shared by the tests.
#pragma once

#include <string>

namespace zinc::test {

// The repository root (compiled in).
inline std::string source_dir() { return ZINC_SOURCE_DIR; }
// ../shared beside the checkout (test data that is not committed here).
inline std::string shared_dir() { return std::string(ZINC_SOURCE_DIR) + "/../shared"; }
// The zinc binary built alongside the tests.
inline std::string zinc_binary() { return ZINC_BINARY; }
// A fresh directory under the system temp dir, removed at process exit.
std::string temp_dir();

}  // namespace zinc::test
