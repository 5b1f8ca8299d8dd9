#!/usr/bin/env bash
# One device call on the H200 for a tree's final figures: the whole GPU suite, then the sparse MLA and mxfp4
# benches with their PyTorch peers, then one mxfp4 tuning run at M = 4096. A pack folder (default h200pack-s5)
# carries stripped bin/ + lib/ and all.db, every kernel the tests and benches use precompiled for sm_90a on a
# machine without a GPU (docs/sparse_mla_decode.md and docs/mxfp4_gemm.md, "Reproduce"). Files under $OUT.
#   KTUNE_PACK=h200pack-s5 bash bench/run_h200_final.sh
# KTUNE_PARTS (default "tests mla mxfp4 tune") picks the parts, so the run can span two device calls (one call is
# limited to 10 minutes): session 6 ran KTUNE_PARTS="tests mla", then KTUNE_PARTS=mxfp4.
set -u
cd "$(dirname "$0")/.."
PK=${KTUNE_PACK:-h200pack-s5}
OUT=${OUT:-/tmp/ktune-h200-final}
mkdir -p "$OUT"
cp "$PK/all.db" /tmp/all.db
export KTUNE_CACHE=/tmp/all.db
export LD_LIBRARY_PATH=$PWD/$PK/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
run() {  # run NAME LIMIT CMD... : output to $OUT/NAME.txt, a one-line status to stdout
  local name=$1 lim=$2
  shift 2
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$lim" "$@" >"$OUT/$name.txt" 2>&1
  echo "=== $name: exit $? after $(($(date +%s) - t0))s"
}
echo "ktune H200 final run $(date -u +%Y-%m-%dT%H:%M:%SZ), pack $PK"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
PARTS=" ${KTUNE_PARTS:-tests mla mxfp4 tune} "
has() { [[ "$PARTS" == *" $1 "* ]]; }
if has tests; then
  run gpu_tests 300 "$PK/bin/ktune_tests" "[gpu]" --durations yes
  grep -E "MATRIX|test cases|assertions|FAILED" "$OUT/gpu_tests.txt" | tail -5
fi
if has mla; then
  run bench_sparse_mla 90 "$PK/bin/bench_sparse_mla" run --json "$OUT/bench_sparse_mla.json" --reps 40
  run peers_sparse_mla 60 python3 bench/peers_sparse_mla.py --json "$OUT/peers_sparse_mla.json" --reps 20
  tail -n 12 "$OUT/bench_sparse_mla.txt"
fi
if has mxfp4; then
  run bench_mxfp4 240 "$PK/bin/bench_mxfp4" run --json "$OUT/bench_mxfp4.json" --reps 40
  run peers_mxfp4 60 python3 bench/peers_mxfp4.py --json "$OUT/peers_mxfp4.json" --reps 30
  tail -n 30 "$OUT/bench_mxfp4.txt"
fi
if has tune; then
  run tune_mxfp4 90 "$PK/bin/ktune" tune --family mxfp4_gemm --problem n8192.k8192.bf16-bf16 --tokens 4096 --cache /tmp/all.db
  tail -n 12 "$OUT/tune_mxfp4.txt"
fi
