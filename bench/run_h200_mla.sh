#!/usr/bin/env bash
# One device call on the H200 for sparse_mla_decode (issue 6). Builds nothing: a pack folder (default
# h200pack-mla) carries stripped bin/ + lib/ and a cache of every kernel the tests and the bench use, compiled
# ahead for sm_90a on a machine without a GPU (see docs/sparse_mla_decode.md "Reproduce"). Runs
#   GPU tests [sparse_mla] -> bench_sparse_mla run -> peers_sparse_mla.py
# and writes under $OUT: log.txt, tests.txt, bench.json, peers.json, summary.md (the table, printed last).
#   KTUNE_PACK=h200pack-mla KTUNE_H200_BUDGET=420 bench/run_h200_mla.sh
set -u
cd "$(dirname "$0")/.."
PK=${KTUNE_PACK:-h200pack-mla}
OUT=${OUT:-/tmp/ktune-h200-mla}
mkdir -p "$OUT"
export KTUNE_CACHE=${KTUNE_CACHE:-$PWD/$PK/mla.db}
export KTUNE_JIT=${KTUNE_JIT:-1}
export LD_LIBRARY_PATH=$PWD/$PK/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: >"$LOG"
t_start=$(date +%s)
budget=${KTUNE_H200_BUDGET:-420}

step() {  # step NAME MAX_SECONDS OUTFILE CMD...
  local name=$1 max=$2 file=$3
  shift 3
  local left=$((budget - ($(date +%s) - t_start) - 15))
  local lim=$((max < left ? max : left))
  if ((lim < 5)); then
    echo "=== $name: SKIPPED (no time left)" | tee -a "$LOG"
    return
  fi
  echo "=== $name (limit ${lim}s): $*" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$lim" "$@" >>"$file" 2>&1
  local rc=$?
  [ "$file" != "$LOG" ] && tail -n 40 "$file" >>"$LOG"
  echo "=== $name: exit $rc after $(($(date +%s) - t0))s" | tee -a "$LOG"
}

echo "ktune H200 sparse_mla run $(date -u +%Y-%m-%dT%H:%M:%SZ), pack $PK, cache $KTUNE_CACHE" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | tee -a "$LOG"
: >"$OUT/tests.txt"
TB=$PK/bin/mla_tests  # tests/main.cpp + tests/sparse_mla/*.cpp; a full ktune_tests works the same
[ -x "$TB" ] || TB=$PK/bin/ktune_tests
step gpu_tests 150 "$OUT/tests.txt" "$TB" "[sparse_mla]" --durations yes
: >"$OUT/bench.txt"
step bench 120 "$OUT/bench.txt" "$PK/bin/bench_sparse_mla" run --json "$OUT/bench.json" --reps 40
: >"$OUT/peers.txt"
step peers 80 "$OUT/peers.txt" python3 bench/peers_sparse_mla.py --json "$OUT/peers.json" --reps 20

python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/summary.md" | tee -a "$LOG"
import json, os, re, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception as e:
        return {"_error": str(e)}
b, pe = load("bench.json"), load("peers.json")
print(f"## ktune sparse_mla_decode on {b.get('device', '?')} ({b.get('arch', '?')}), NVRTC {b.get('nvrtc', '?')}, torch {pe.get('torch', '?')}")
print(f"copy (read+write): cuMemcpyDtoD {b.get('copy_tbs', float('nan')):.2f} TB/s, torch copy_ {pe.get('copy_tbs', float('nan')):.2f} TB/s; "
      f"dense bf16 torch.mm 8192^3: {pe.get('dense_bf16_tflops', float('nan')):.0f} TFLOP/s")
peer = {r["label"]: r for r in pe.get("rows", [])}
print()
print("| shape | ktune launch choice | TFLOP/s | KV TB/s | ktune best | TFLOP/s | KV TB/s | torch gather+bmm TFLOP/s | bar |")
print("|---|---|---|---|---|---|---|---|---|")
for r in b.get("rows", []):
    c = [x for x in r["candidates"] if x["config"] == r["launch_choice"]][0]
    bb = [x for x in r["candidates"] if x["config"] == r["best_config"]][0]
    p = peer.get(r["label"])
    ps = f"{p['tflops']:.1f}" if p else "n/a"
    bar = f"{r['bar_tflops']:.0f}" if r["bar_tflops"] else "-"
    print(f"| {r['label']} | {c['config']} s{c['splits']} | {c['tflops']:.1f} | {c['kv_tbs']:.2f} | {bb['config']} s{bb['splits']} | "
          f"{bb['tflops']:.1f} | {bb['kv_tbs']:.2f} | {ps} | {bar} |")
print(f"\nbench_sparse_mla runtime stats: compiles {b.get('compiles')}, loads {b.get('loads')}")
try:
    t = open(os.path.join(out, "tests.txt")).read()
    for pat in (r"SPARSE MLA GPU MATRIX:.*", r"test cases:.*", r"assertions:.*", r"All tests passed.*"):
        for m in re.findall(pat, t):
            print("tests:", m.strip())
except Exception as e:
    print("tests: no output", e)
PY
echo "total $(($(date +%s) - t_start))s" | tee -a "$LOG"
