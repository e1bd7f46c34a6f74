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

// Whether this build runs under AddressSanitizer (scripts/test.sh's second pass). Model
// compute on real weights is about ten times slower there, so the tests that are mostly
// that compute skip: the sanitizers look for memory and UB errors, which the shorter
// tests on the same files and the tiny models reach.
#ifdef __SANITIZE_ADDRESS__
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace zinc::test
