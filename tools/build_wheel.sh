#!/usr/bin/env bash
# A platform wheel of the Python package that carries this build's libktune under its SONAME (+ libktune_host.so when
# built) in ktune/lib/, stripped: `pip install` of it needs no KTUNE_LIBRARY and no system library.
#   tools/build_wheel.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, dist) -> OUT_DIR/ktune-<v>-py3-none-<plat>.whl
# Offline: the package's in-tree build backend needs nothing from an index.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
out=${2:-$src/dist}
mkdir -p "$out"
KTUNE_WHEEL_BUNDLE=1 KTUNE_WHEEL_LIBDIR="$build/lib" PIP_DISABLE_PIP_VERSION_CHECK=1 \
  python3 -m pip wheel --no-build-isolation --no-deps --no-index --quiet -w "$out" "$src/python"
ls "$out"/ktune-*-py3-none-*.whl | grep -v none-any
