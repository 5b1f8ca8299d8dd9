#!/usr/bin/env bash
# ctest `python_wheel`: the platform wheel (tools/build_wheel.sh) installed into a fresh venv with no network
# finds the libktune.so it carries (ktune/lib/, no KTUNE_LIBRARY set) and passes the host-backend tests.
# Usage: run_wheel_test.sh BUILD_DIR SOURCE_DIR     (exit 77 = skipped: no python3 with numpy and venv)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
source "$(dirname "$0")/find_python.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The wheel: built by the venv's pip so nothing outside the venv is needed beyond python3 itself.
"$py" -m venv --system-site-packages "$tmp/venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1
KTUNE_WHEEL_BUNDLE=1 KTUNE_WHEEL_LIBDIR="$build/lib" \
  "$tmp/venv/bin/python" -m pip wheel --no-build-isolation --no-deps --no-index --quiet -w "$tmp/dist" "$src/python"
whl=$(ls "$tmp"/dist/ktune-*.whl)
case "$whl" in *-none-any.whl) echo "FAIL: $whl is a pure wheel, expected a platform tag"; exit 1 ;; esac
"$tmp/venv/bin/python" -m pip install --no-index --no-deps --quiet "$whl"
unset KTUNE_LIBRARY KTUNE_PREFIX
export KTUNE_LOG=${KTUNE_LOG:-error} KTUNE_CACHE=$tmp/wheel.db LD_LIBRARY_PATH=
cd "$tmp"  # neither the checkout nor the build tree: only the wheel's copy can be found
"$tmp/venv/bin/python" - <<'PY'
import os, ktune
path = ktune.library_path()
pkg = os.path.dirname(ktune.__file__)
print("ktune", ktune.version(), "library", path)
assert os.path.realpath(path).startswith(os.path.realpath(os.path.join(pkg, "lib"))), f"{path} is not the wheel's"
PY
"$tmp/venv/bin/python" -m unittest discover -s "$src/python/tests" -t "$src/python/tests" -p "test_host*.py" -v
