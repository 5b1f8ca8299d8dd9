#!/usr/bin/env bash
# ctest `python_package`: installs ./python into a fresh venv with no network (pip --no-index; the package's
# in-tree build backend needs nothing) and runs its unittest suite against this build's libktune.so on the
# host backend (NumPy; the torch tests skip without torch).
# Usage: run_python_tests.sh BUILD_DIR SOURCE_DIR     (exit 77 = skipped: no python3 with numpy and venv)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)

source "$(dirname "$0")/find_python.sh"
echo "python: $py ($("$py" --version 2>&1))"

venv="$build/python-venv"
rm -rf "$venv"
# --system-site-packages: Debian's python3-numpy (externally managed system Python) stays visible
"$py" -m venv --system-site-packages "$venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --no-index --no-deps --quiet "$src/python"

export KTUNE_LIBRARY="$build/lib/libktune.so"  # the link to this build's library, whatever its SONAME
export KTUNE_LOG=${KTUNE_LOG:-error}
cd "$build"  # not the checkout: the tests import the installed package
"$venv/bin/python" -c "import ktune, sys; print('ktune', ktune.version(), 'from', ktune.__file__, 'lib', ktune.library_path())"
"$venv/bin/python" -m unittest discover -s "$src/python/tests" -t "$src/python/tests" -v
