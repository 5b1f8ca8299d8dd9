#!/usr/bin/env bash
# ctest example_family_cli: the ktune CLI built against libktune_example.so (bin/ktune_example) knows
# example_scale by its registration alone -- `info` lists it, `compile` builds it for sm_90a through NVRTC and
# then hits the cache, `cache ls` names its rows; on the host CPU (LLVM backend) `tune` and `warmup` of a
# preset with an example op tune it and `replay` runs it under KTUNE_JIT=0 with 0 compiles and 0 tunings. The
# library's own CLI (bin/ktune) does not know the family.
# usage: cli_example.sh KTUNE_EXAMPLE KTUNE BUILD_DIR
set -euo pipefail
K=$1 plain=$2 build=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KTUNE_CACHE="$tmp/example.db"
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

"$K" info --json | grep -q '"example_scale"' || { echo "FAIL: info does not list example_scale"; exit 1; }
if "$plain" compile --family example_scale --arch sm_90a >"$tmp/plain.txt" 2>&1; then
  echo "FAIL: libktune's own CLI knows example_scale"; exit 1
fi
grep -q "unknown family 'example_scale'" "$tmp/plain.txt"

out=$("$K" compile --family example_scale --config '{"cols": 4096, "dtype": "bf16"}' --arch sm_90a --json)
[[ $(echo "$out" | json compiled) == 1 ]] || { echo "FAIL: first compile: $out"; exit 1; }
out=$("$K" compile --family example_scale --config '{"cols": 4096, "dtype": "bf16"}' --arch sm_90a --json)
[[ $(echo "$out" | json compiled) == 0 && $(echo "$out" | json cache_hits) == 1 ]] ||
  { echo "FAIL: second compile: $out"; exit 1; }
"$K" cache ls | grep -q "example_scale/sm_90a/c4096.bf16/t256.v1" || { echo "FAIL: cache ls"; "$K" cache ls; exit 1; }
if "$K" compile --family example_scale --config '{"cols": 0}' --arch sm_90a 2>"$tmp/err.txt"; then
  echo "FAIL: a bad problem compiled"; exit 1
fi
grep -q "cols: expected a positive integer, got 0" "$tmp/err.txt" || { cat "$tmp/err.txt"; exit 1; }

source "$(dirname "$0")/../support/skip.sh"
[[ -f "$build/lib/libktune_host.so" ]] ||  # what ran above passed: only the host half is skipped
  skip_or_fail host "example CLI OK (info, compile, cache); host tune/warmup/replay: libktune_host.so not built" 0
out=$("$K" tune --family example_scale --config '{"cols": 256}' --tokens 8 --arch host --json)
[[ $(echo "$out" | json key) == "c256.f32|m8" ]] || { echo "FAIL: tune: $out"; exit 1; }
cat >"$tmp/preset.json" <<'JSON'
{"name": "scale-only", "buckets": {"batch": {"min": 1, "max": 4}, "seq_len": {"min": 128, "max": 128}},
 "ops": [{"label": "scale", "family": "example_scale", "problem": {"cols": 256, "dtype": "bf16"}}]}
JSON
warm=$("$K" warmup --preset "$tmp/preset.json" --arch host --json)
[[ $(echo "$warm" | json tuned) == 3 && $(echo "$warm" | json failed) == 0 ]] || { echo "FAIL: warmup: $warm"; exit 1; }
replay=$(KTUNE_JIT=0 "$K" replay --preset "$tmp/preset.json" --arch host --json)
[[ $(echo "$replay" | json compiles) == 0 && $(echo "$replay" | json tunings) == 0 &&
   $(echo "$replay" | json tuning_misses) == 0 ]] || { echo "FAIL: replay: $replay"; exit 1; }
[[ $(grep -o '"source": *"tuned"' <<<"$replay" | wc -l) == 3 ]] || { echo "FAIL: replay sources: $replay"; exit 1; }
echo "example CLI OK: info, compile + cache hit, cache ls, host tune, warmup (3 keys), replay (0 compiles, 0 tunings)"
