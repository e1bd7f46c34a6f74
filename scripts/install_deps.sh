#!/usr/bin/env bash
# Installs zinc's build and test dependencies from Debian's packages (only those
# missing), and the Python packages of the server tests into .venv (pinned, from
# PyPI). The CUDA toolkit is optional: when nvcc is on PATH the CUDA backend is
# built too.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config xz-utils python3-pip python3-venv
          libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "zinc: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# tests/server/python: `zinc serve` against the official openai client.
if ! .venv/bin/python -c "import openai, jsonschema, pytest" 2>/dev/null; then
  echo "zinc: installing openai, jsonschema and pytest into .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q openai==3.54.0 jsonschema==4.26.0 pytest==9.2.0
fi
