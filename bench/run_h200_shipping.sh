#!/usr/bin/env bash
# docs/shipping.md on a GPU: §1 (warm up on the GPU build host, replay, report), §2 (export, sign, verify) and
# §3 (the runtime image's view: the signed file read-only, KTUNE_JIT=0, KTUNE_TRUSTED_KEYS) with the commands
# as the page writes them, paths under /tmp/ship. Then the other families' presets warmed up on the GPU and
# replayed (deepseek-v3.2: sparse MLA; gpt-oss-120b: XQA with sinks/window + MXFP4 MoE), each within a
# tuning budget. The CLI and library come from the pack (PACK, default h200pack-s3: bin/ktune, lib/).
# Logs under $OUT; a table last.
set -uo pipefail
cd "$(dirname "$0")/.."
P=${PACK:-h200pack-s3}
OUT=${OUT:-/tmp/ktune-h200-shipping}
BUDGET=${KTUNE_PRESET_BUDGET:-120s}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$PWD/$P/bin:$PATH KTUNE_LOG=warn
rm -rf /tmp/ship && mkdir -p /tmp/ship
declare -a ROWS
step() {  # step NAME CMD...: runs it, logs it, one table row
  local name=$1; shift
  local t0=$(date +%s)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  ROWS+=("| $name | $rc | $(($(date +%s) - t0)) s | $(grep -E "compiles|tuned|verified|signature|refused|error|keys" "$OUT/$name.log" | tail -2 | tr '\n' ' ' | cut -c1-220) |")
  return $rc
}
export KTUNE_CACHE=/tmp/ship/ktune-build.db
step info ktune info
step warmup ktune warmup --preset llama-3.1-8b
step replay ktune replay --preset llama-3.1-8b
step report ktune report --cache /tmp/ship/ktune-build.db -o /tmp/ship/tuning-report.html
step keygen ktune cache keygen --out /tmp/ship/ship.key
step export ktune cache export --cache /tmp/ship/ktune-build.db --out /tmp/ship/ktune-llama.db
step sign ktune cache sign --cache /tmp/ship/ktune-llama.db --key /tmp/ship/ship.key
step verify ktune cache verify --cache /tmp/ship/ktune-llama.db --pubkey /tmp/ship/ship.key.pub
chmod 0444 /tmp/ship/ktune-llama.db
step image_replay env KTUNE_CACHE='/tmp/ship/ktune-llama.db?ro' KTUNE_JIT=0 \
  KTUNE_TRUSTED_KEYS=/tmp/ship/ship.key.pub ktune replay --preset llama-3.1-8b
step other_keygen ktune cache keygen --out /tmp/ship/other.key
step image_untrusted env KTUNE_CACHE='/tmp/ship/ktune-llama.db?ro' KTUNE_JIT=0 \
  KTUNE_TRUSTED_KEYS=/tmp/ship/other.key.pub ktune replay --preset llama-3.1-8b
for preset in deepseek-v3.2 gpt-oss-120b; do
  export KTUNE_CACHE=/tmp/ship/$preset.db
  step "warmup_$preset" ktune warmup --preset "$preset" --budget "$BUDGET"
  step "replay_$preset" ktune replay --preset "$preset"
done
{
  echo "| step | exit | time | last lines |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
} | tee "$OUT/summary.md"
