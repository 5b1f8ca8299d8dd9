#!/usr/bin/env bash
# ctest example_family_python: test_example.py with the in-tree package (python/) over libktune_example.so.
# Usage: python_example.sh LIBKTUNE_EXAMPLE SOURCE_DIR     (exit 77 = skipped: no suitable python3)
set -euo pipefail
lib=$1 src=$(cd "$2" && pwd)
source "$src/tests/python/find_python.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KTUNE_LIBRARY="$lib" PYTHONPATH="$src/python" KTUNE_CACHE="$tmp/env.db" KTUNE_LOG=${KTUNE_LOG:-error}
cd "$tmp"
"$py" "$src/tests/example_family/test_example.py"
