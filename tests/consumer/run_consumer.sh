#!/usr/bin/env bash
# Installs the build tree into a temp prefix and builds + runs examples/consumer against it (find_package),
# then checks pkg-config. Usage: run_consumer.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" -j 2 >/dev/null
export LD_LIBRARY_PATH="$tmp/prefix/lib"
"$tmp/consumer/consumer" "$tmp/c.db" | grep -q "compiled"
"$tmp/consumer/consumer" "$tmp/c.db" | grep -q "cached"
"$tmp/consumer/consumer_c" "$tmp/c.db" | grep -q "compiled=0 compiles=0 cache_hits=1"
"$tmp/prefix/bin/ktune" --help | grep -q "warmup"
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs ktune | grep -q -- "-lktune"
echo "consumer OK"
