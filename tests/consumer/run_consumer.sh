#!/usr/bin/env bash
# Installs the build tree into a temp prefix, checks that it installs headers under include/ktune/ only and
# that each compiles with -I<prefix>/include alone, builds + runs examples/consumer against it (find_package, the
# project configured for C++14: the target must carry C++17), then builds and runs the C and C++ consumers with
# nothing but `pkg-config --cflags --libs ktune` from that prefix (the .pc file is relocatable), and checks that
# the installed binaries carry no debug info (stripped install).
# Usage: run_consumer.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# Public headers are installed under ktune/ only: a consumer's include path gets no generic names
# (common/dtype.h, xqa_decode/spec.hpp, ...), and every installed header compiles with nothing but it.
top=$(ls "$tmp/prefix/include")
if [ "$top" != "ktune" ]; then
  echo "FAIL: $tmp/prefix/include holds: $(echo $top) (expected only ktune/)"
  exit 1
fi
for h in "$tmp"/prefix/include/ktune/*.hpp "$tmp"/prefix/include/ktune/ktune.h; do
  name=${h#"$tmp/prefix/include/"}
  if ! echo "#include \"$name\"" | c++ -std=c++17 -fsyntax-only -I"$tmp/prefix/include" -x c++ - 2>"$tmp/hdr.log"; then
    echo "FAIL: installed $name does not compile with -I<prefix>/include alone:"
    cat "$tmp/hdr.log"
    exit 1
  fi
done
# The consumer project sets no C++ standard and is configured for C++14: ktune::ktune must raise it to the C++17
# its headers need (compile feature cxx_std_17), or the build fails.
cmake -S "$src/examples/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_CXX_STANDARD=14 \
  >/dev/null
if ! cmake --build "$tmp/consumer" -j 2 >"$tmp/build.log" 2>&1; then
  echo "FAIL: examples/consumer (CMAKE_CXX_STANDARD=14) does not build against ktune::ktune:"
  grep -E "error|std=" "$tmp/build.log" | head -20
  exit 1
fi
export LD_LIBRARY_PATH="$tmp/prefix/lib"
first=$("$tmp/consumer/consumer" "$tmp/c.db")
grep -qF "writable layer $tmp/c.db, signatures unchecked" <<<"$first"
grep -q "^shared module .* compiled$" <<<"$first"
"$tmp/consumer/consumer" "$tmp/c.db" | grep -q "cached"
# ktune_compile finds the default config's binary and the problem's shared module (combine, helpers).
"$tmp/consumer/consumer_c" "$tmp/c.db" | grep -q "compiled=0 compiles=0 cache_hits=2"
"$tmp/prefix/bin/ktune" --help | grep -q "warmup"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs ktune)
grep -q -- "-lktune" <<<"$flags"
# shellcheck disable=SC2086  # the flags are words
cc -std=c11 -o "$tmp/consumer_pc" "$src/examples/consumer/main.c" $flags
"$tmp/consumer_pc" "$tmp/c.db" | grep -q "compiled=0 compiles=0 cache_hits=2"
# A C++ consumer through pkg-config names the standard itself (ktune.pc's Cflags serve C consumers too).
# shellcheck disable=SC2086
c++ -std=c++17 -o "$tmp/consumer_pc_cpp" "$src/examples/consumer/main.cpp" $flags
"$tmp/consumer_pc_cpp" "$tmp/c.db" | grep -q "cached"
for f in "$tmp/prefix/lib/libktune.so" "$tmp/prefix/bin/ktune"; do
  if readelf -S "$(readlink -f "$f")" | grep -q "\.debug_info"; then
    echo "FAIL: $f was installed with debug info (expected a stripped install)"
    exit 1
  fi
done
echo "consumer OK (find_package, pkg-config under --prefix $tmp/prefix, stripped install)"
