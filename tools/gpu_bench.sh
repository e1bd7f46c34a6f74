#!/usr/bin/env bash
# The same-run comparison recorded in docs/PERFORMANCE.md, on a GPU machine without
# Debian packages: builds zinc (CLI11 headers carried in .deps/include) and, when its
# source is at .peer/llama.cpp (never committed), llama.cpp's llama-bench in parallel;
# writes the benchmark file; runs gpu-check, zinc bench, llama-bench and
# batched-bench; logs go to $OUT (default /tmp/zinc-gpu-bench).
#
#   tools/gpu_bench.sh [all|check|decode|prefill|serve]...
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/zinc-gpu-bench}
BUILD=${BUILD:-/root/build}
MODEL=${MODEL:-/root/35b.gguf}
mkdir -p "$OUT"
steps=("${@:-all}")
want() { [[ " ${steps[*]} " == *" all "* || " ${steps[*]} " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$OUT/gpu.txt" || true

llama_pid=
if [[ -d .peer/llama.cpp && ! -x /root/lb/bin/llama-bench ]] && (want decode || want prefill); then
  ( cmake -S .peer/llama.cpp -B /root/lb -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
      && ninja -C /root/lb -j12 llama-bench ) >/tmp/llama-build.log 2>&1 &
  llama_pid=$!
fi
cmake -S . -B "$BUILD" -G Ninja -DZINC_WERROR=ON -DZINC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DZINC_TESTS=OFF \
  -DZINC_EXTRA_INCLUDE="$PWD/.deps/include" >/dev/null
ninja -C "$BUILD" -j16 zinc >/tmp/zinc-build.log 2>&1 || { tail -30 /tmp/zinc-build.log; exit 1; }
Z="$BUILD/zinc"

if want check; then "$Z" gpu-check >"$OUT/gpu-check.log" 2>&1 || true; tail -3 "$OUT/gpu-check.log"; fi
[[ -f "$MODEL" ]] || "$Z" synth --preset 35b-a3b -o "$MODEL" --threads 16 >/dev/null
if want decode; then "$Z" bench -m "$MODEL" -p 0 -n 128 -d 0,8192,32768 -r 3 --backend cuda | tee "$OUT/zinc-decode.txt"; fi
if want prefill; then
  "$Z" bench -m "$MODEL" -p 512,2048,8192 -n 0 -d 0 -r 3 --backend cuda | tee "$OUT/zinc-prefill.txt"
  "$Z" bench -m "$MODEL" -p 2048 -n 0 -d 0 -r 1 --backend cuda --profile | tee -a "$OUT/zinc-prefill.txt"
fi
if want serve; then
  "$Z" batched-bench -m "$MODEL" --parallel 1,8,32 -p 512 -n 128 -r 1 --backend cuda | tee "$OUT/zinc-batched.txt"
  "$Z" batched-bench -m "$MODEL" --turn 5000 -n 32 --backend cuda | tee "$OUT/zinc-turn.txt"
fi
if [[ -n "$llama_pid" ]]; then wait "$llama_pid" || { tail -20 /tmp/llama-build.log; exit 1; }; fi
if [[ -x /root/lb/bin/llama-bench ]]; then
  if want decode; then /root/lb/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p 0 -n 128 -d 0,8192,32768 -r 3 | tee "$OUT/llama-decode.txt"; fi
  if want prefill; then /root/lb/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p 512,2048,8192 -n 0 -r 3 | tee "$OUT/llama-prefill.txt"; fi
fi
