#!/usr/bin/env bash
# Installs zinc's build and test dependencies from Debian's packages (only those
# missing). The CUDA toolkit is optional: when nvcc is on PATH the CUDA backend is
# built too.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config xz-utils python3-pip
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
