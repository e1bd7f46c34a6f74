#!/usr/bin/env bash
# clang still compiles the sources for AVX2 and AVX-512 targets (README: clang builds
# zinc at the width of the target it is given; it once could not, PERFORMANCE.md
# session 37). Syntax and templates only, no code: about a minute and a half on two
# cores. Skipped where there is no clang++.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "check_clang: no clang++, skipped"
  exit 0
fi
flags=(-std=c++20 -fsyntax-only -I src -DZINC_WITH_TEXT=1 -DPCRE2_CODE_UNIT_WIDTH=8 -DZINC_WITH_SERVER=1)
for target in x86-64-v3 x86-64-v4; do
  find src -name '*.cpp' -not -path 'src/backend/cuda/*' -print0 |
    xargs -0 -P "$(nproc)" -n 8 clang++ "${flags[@]}" -march="$target"
  echo "check_clang: $(clang++ --version | head -1), -march=$target: sources compile"
done
