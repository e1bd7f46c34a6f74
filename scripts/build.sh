#!/usr/bin/env bash
# Configures and builds zinc into BUILD_DIR (default build/). Extra arguments go to
# cmake, e.g. scripts/build.sh -DZINC_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build_dir" -j"$(nproc)"
