#!/usr/bin/env bash
# Issue 9 on the H200: the README's new-user story (tests/readme/readme_story.sh) on a fresh machine.
# The H200 machine has no network for apt, so the README's `tools/setup.sh` runs on the CPU machine and its
# library travels in the pack (PACK, default h200pack-s3: lib/libktune.so.0 built by the same sources); this
# script puts it where the README expects it (build/lib/libktune.so.0), then runs the story (on a fresh machine
# the default cache ~/.cache/ktune/ktune.db is absent: the warmup compiles with the device's NVRTC and tunes on
# the GPU). Log: $OUT/readme_story.log.
set -uo pipefail
cd "$(dirname "$0")/.."
P=${PACK:-h200pack-s3}
OUT=${OUT:-/tmp/ktune-h200-readme}
mkdir -p "$OUT" build/lib
cp "$P/lib/libktune.so.0" build/lib/libktune.so.0
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
start=$(date +%s)
bash tests/readme/readme_story.sh >"$OUT/readme_story.log" 2>&1
rc=$?
grep -vE "^(warmup|ktune warmup).*[0-9]+/[0-9]+" "$OUT/readme_story.log" | tail -25
echo "readme story: exit $rc after $(($(date +%s) - start)) s"
exit $rc
