#!/usr/bin/env bash
# The README's first command: installs what zinc needs, builds it, fetches a real
# small chat model (SmolLM2-135M-Instruct) and chats with it (on the GPU when zinc
# was built with CUDA and one is present, else on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
scripts/fetch_smollm2.sh
# Greedy, so the first answer is the model's most likely one on every run: at run's
# default temperature (0.8, a fresh seed) this 135M model sometimes wanders off.
./build/zinc run -m models/SmolLM2-135M-Instruct.Q4_1.gguf -n 64 --temp 0 \
  -p "${ZINC_PROMPT:-What is the capital of France? Answer in one sentence.}"
