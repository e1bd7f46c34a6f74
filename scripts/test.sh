#!/usr/bin/env bash
# The README's second command (and CI's): builds with warnings as errors (and the
# CUDA backend when nvcc is present) and runs every CPU test; then builds again
# under AddressSanitizer + UndefinedBehaviorSanitizer and runs the tests again, and
# checks that clang still compiles the sources (check_clang.sh). GPU tests skip
# cleanly where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/fetch_smollm2.sh
scripts/fetch_gemma3.sh

BUILD_DIR=build-test scripts/build.sh -DZINC_WERROR=ON
(cd build-test && ctest --output-on-failure -j2)
scripts/check_clang.sh

# The sanitizer pass skips CUDA (nvcc's host code is not built with the sanitizers). At -O1
# -g1 (line tables, enough for the reports' stack traces) it compiles in half the time of
# -O2 -g (511 s on two cores, session 61) and its tests take 7% more CPU time.
BUILD_DIR=build-asan scripts/build.sh -DZINC_WERROR=ON -DZINC_SANITIZE=ON -DZINC_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)
