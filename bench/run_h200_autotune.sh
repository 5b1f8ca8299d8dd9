#!/usr/bin/env bash
# Issue 4 on the H200, one device call: warmup of llama-3.1-8b from a cache precompiled without a GPU (so the
# warmup only tunes), replay in a second process (compiles, tunings, first vs steady call), the same replay
# with KTUNE_JIT=0, and the autotune quality bench (tuned winner vs exhaustive best, 5 repeated tunings).
#   PACK=h200pack bench/run_h200_autotune.sh    (PACK holds bin/, lib/ and warmup.db, built on a CPU machine)
set -u
cd "$(dirname "$0")/.."
PACK=${PACK:-h200pack}
OUT=${OUT:-/tmp/ktune-h200-autotune}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$PACK/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PACK/bin/ktune
DB=/tmp/ktune-warmup.db
cp "$PACK/warmup.db" "$DB"
RANGE=(--preset llama-3.1-8b --max-batch 64 --max-seq-len 16384)
LOG=$OUT/log.txt
run() { echo "=== $*" | tee -a "$LOG"; "$@" 2>>"$LOG"; }
run "$K" info --cache "$DB" | tee -a "$LOG"
run "$K" cache stats --cache "$DB" | tee -a "$LOG"
/usr/bin/time -f "warmup wall %e s" "$K" warmup "${RANGE[@]}" --cache "$DB" --json 2>>"$LOG" | tee "$OUT/warmup.json"
"$K" replay "${RANGE[@]}" --cache "$DB" --json 2>>"$LOG" | tee "$OUT/replay.json" | head -c 600; echo
KTUNE_JIT=0 "$K" replay "${RANGE[@]}" --cache "$DB" --no-preload 2>>"$LOG" | tee "$OUT/replay_nojit.txt" | tail -3
run "$K" warmup "${RANGE[@]}" --cache "$DB" --json | tee -a "$LOG"   # resumable: everything done earlier
timeout 300 "$PACK/bin/bench_autotune" --cache "$DB" --json "$OUT/autotune.json" 2>>"$LOG" | tee "$OUT/autotune.md"
"$K" cache show "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none|b64.l4096" --cache "$DB" | head -c 1500 >> "$LOG"
cp "$DB" "$OUT/warmup.db" 2>/dev/null
echo; echo "== summary"; tail -3 "$OUT/replay_nojit.txt"; cat "$OUT/warmup.json"; cat "$OUT/autotune.md"
