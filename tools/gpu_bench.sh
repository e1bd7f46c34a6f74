#!/usr/bin/env bash
# The same-run comparison recorded in docs/PERFORMANCE.md, on a GPU machine without
# Debian packages: builds zinc (CLI11 headers carried in .deps/include), writes the
# benchmark file, runs gpu-check, zinc bench and batched-bench, and the peer's
# llama-bench when LLAMA_BENCH names its binary (built outside this repository, see
# ../shared/docs/testing.md). Logs go to $OUT (default /tmp/zinc-gpu-bench).
#
#   [LLAMA_BENCH=/path/to/llama-bench] tools/gpu_bench.sh [all|check|decode|prefill|serve]...
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/zinc-gpu-bench}
BUILD=${BUILD:-/root/build}
MODEL=${MODEL:-/root/35b.gguf}
JOBS=${JOBS:-16}
LLAMA_BENCH=${LLAMA_BENCH:-}
mkdir -p "$OUT"
steps=("${@:-all}")
want() { [[ " ${steps[*]} " == *" all "* || " ${steps[*]} " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$OUT/gpu.txt" || true

cmake -S . -B "$BUILD" -G Ninja -DZINC_WERROR=ON -DZINC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DZINC_TESTS=OFF \
  -DZINC_EXTRA_INCLUDE="$PWD/.deps/include" >/dev/null
ninja -C "$BUILD" -j"$JOBS" zinc >"$OUT/zinc-build.log" 2>&1 || { tail -30 "$OUT/zinc-build.log"; exit 1; }
Z="$BUILD/zinc"

[[ -f "$MODEL" ]] || "$Z" synth --preset 35b-a3b -o "$MODEL" --threads 16 >/dev/null
if want check; then "$Z" gpu-check >"$OUT/gpu-check.log" 2>&1 || true; tail -3 "$OUT/gpu-check.log"; fi
if want decode; then "$Z" bench -m "$MODEL" -p 0 -n 128 -d 0,8192,32768 -r 3 --backend cuda | tee "$OUT/zinc-decode.txt"; fi
if want prefill; then
  "$Z" bench -m "$MODEL" -p 154,512,2048,8192 -n 0 -d 0 -r 3 --backend cuda | tee "$OUT/zinc-prefill.txt"
  "$Z" bench -m "$MODEL" -p 2048 -n 0 -d 0 -r 1 --backend cuda --profile | tee "$OUT/zinc-profile.txt"
fi
if want serve; then
  "$Z" batched-bench -m "$MODEL" --parallel 1,8,32 -p 512 -n 128 -r 1 --backend cuda | tee "$OUT/zinc-batched.txt"
  "$Z" batched-bench -m "$MODEL" --turn 5000 -n 32 --backend cuda | tee "$OUT/zinc-turn.txt"
fi
if [[ -n "$LLAMA_BENCH" ]]; then
  L=("$LLAMA_BENCH" -m "$MODEL" -ngl 99 -fa 1)
  if want decode; then "${L[@]}" -p 0 -n 128 -d 0,8192,32768 -r 3 | tee "$OUT/llama-decode.txt"; fi
  if want prefill; then
    "${L[@]}" -p 154,512,2048,8192 -n 0 -r 3 | tee "$OUT/llama-prefill.txt"
    # The peer with zinc's default prompt chunk (its default micro-batch is 512).
    "${L[@]}" -p 2048,8192 -n 0 -ub 2048 -r 3 | tee "$OUT/llama-prefill-ub2048.txt"
  fi
fi
