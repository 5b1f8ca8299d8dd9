#!/usr/bin/env bash
# Installs ktune's build dependencies from Debian's packages (idempotent) and builds into ./build.
# Usage: tools/setup.sh            (deps + build)
#        tools/setup.sh --deps-only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make pkg-config libsqlite3-dev libsodium-dev libfmt-dev catch2 llvm-19-dev libclang-cpp19-dev libclang-19-dev)
packages+=(chromium)  # headless browser for the tuning report's test (tests/report/report_chromium.sh)
packages+=(python3 python3-venv python3-numpy)  # the Python package's tests (tests/python/run_python_tests.sh): venv + Debian's NumPy
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -f "$cuda_home/include/nvrtc.h" ]]; then
  echo "error: CUDA 13 toolkit headers not found under $cuda_home (set CUDA_HOME)" >&2
  exit 1
fi
[[ "${1:-}" == "--deps-only" ]] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTUNE_CUDA_HOME="$cuda_home" >/dev/null
cmake --build build -j "$(nproc)"
