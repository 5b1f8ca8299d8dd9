#!/usr/bin/env bash
# A host object the JIT cannot run because of the environment (executable memory refused, as under W^X) is not
# the object's fault: the call fails naming why, and the cached object stays (ctest: host_exec_refused_keeps_cache).
# Only an object the JIT refuses to parse is quarantined and dropped. Skips (exit 77) without the LLVM host
# backend; fails instead under KTUNE_TEST_REQUIRE=host.
# usage: exec_refused_keeps_cache.sh BUILD_DIR SHIM_SO RUNNER
set -euo pipefail
build="${1:?usage: exec_refused_keeps_cache.sh BUILD_DIR SHIM_SO RUNNER}"
shim="${2:?}"
runner="${3:?}"
ktune="$build/bin/ktune"
source "$(dirname "$0")/../support/skip.sh"
[[ -f "$build/lib/libktune_host.so" ]] || skip_or_fail host "$build/lib/libktune_host.so was not built (LLVM 19 absent)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KTUNE_CACHE="$tmp/host.db"
lib="$build/lib/libktune.so"
count() { "$ktune" cache ls --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["count"])'; }

"$ktune" compile --family xqa_decode --arch host --problem d64.h4.kv2.p32.hnd.bf16-bf16-bf16.q1.none >/dev/null
before="$(count)"
[[ "$before" -ge 1 ]] || { echo "FAIL: the compile stored nothing"; exit 1; }
"$runner" "$lib" >/dev/null || { echo "FAIL: the call fails before anything is refused"; exit 1; }

if out="$(KTUNE_JIT=0 KTUNE_TEST_REFUSE_EXEC=1 LD_PRELOAD="$shim" "$runner" "$lib" 2>&1)"; then
  echo "FAIL: a host call ran with executable memory refused: $out"; exit 1
fi
grep -qF "the cached object is kept" <<<"$out" || { echo "FAIL: the error does not say the object is kept: $out"; exit 1; }
if grep -qF "quarantined" <<<"$out"; then echo "FAIL: the object was quarantined: $out"; exit 1; fi
after="$(count)"
[[ "$after" == "$before" ]] || { echo "FAIL: $before cached binaries before, $after after"; exit 1; }
KTUNE_JIT=0 "$runner" "$lib" >/dev/null || { echo "FAIL: the kept object does not run once execution is allowed"; exit 1; }
echo "host: executable memory refused -> the call fails, the $after cached binaries stay and run afterwards"
