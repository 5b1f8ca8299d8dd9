#!/usr/bin/env bash
# One device call on the H200 for issue 7 (mxfp4_gemm). Builds nothing: the pack folder (default h200pack-mx)
# holds stripped bin/ + lib/ and mx.db, a cache of every kernel the tests and the bench use, compiled for
# sm_90a on a machine without a GPU (bench_mxfp4 prepare + ktune_tests "[mxfp4_precompile]"). Runs
#   mx_tests "[gpu][mxfp4]" -> bench_mxfp4 run -> peers_mxfp4.py (cuBLAS BF16 + copy, PyTorch) -> ktune tune (one MoE key)
# and writes everything under $OUT: log.txt, bench_mxfp4.json, peers_mxfp4.json, tests.txt, tune.txt, summary.md.
# mx_tests is ktune_tests linked from tests/main.cpp + tests/mxfp4/*.cpp only (same sources and flags).
#   PACK=h200pack-mx KTUNE_H200_BUDGET=300 bench/run_h200_mxfp4.sh
set -u
cd "$(dirname "$0")/.."
P=${PACK:-h200pack-mx}
OUT=${OUT:-/tmp/ktune-h200-mx}
mkdir -p "$OUT"
cp "$P/mx.db" /tmp/mx.db
export KTUNE_CACHE=/tmp/mx.db
export LD_LIBRARY_PATH=$PWD/$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: >"$LOG"
t_start=$(date +%s)
budget=${KTUNE_H200_BUDGET:-300}
step() {
  local name=$1 max=$2 file=$3
  shift 3
  local left=$((budget - ($(date +%s) - t_start) - 10))
  local lim=$((max < left ? max : left))
  if ((lim < 5)); then echo "=== $name: SKIPPED (no time left)" | tee -a "$LOG"; return; fi
  echo "=== $name (limit ${lim}s): $*" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=5 "$lim" "$@" 2>&1 | tee -a "$file" >>"$LOG"
  echo "=== $name: exit ${PIPESTATUS[0]} after $(($(date +%s) - t0))s" | tee -a "$LOG"
}
echo "ktune mxfp4 H200 run $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | tee -a "$LOG"
: >"$OUT/tests.txt"
step gpu_tests ${TEST_LIMIT:-110} "$OUT/tests.txt" "$P/bin/mx_tests" "[gpu][mxfp4]" --durations yes
step bench ${BENCH_LIMIT:-80} /dev/null "$P/bin/bench_mxfp4" run --json "$OUT/bench_mxfp4.json" --reps ${REPS:-40}
step peers 60 /dev/null python3 bench/peers_mxfp4.py --json "$OUT/peers_mxfp4.json" --reps 30
# The tuner on one GPT-OSS-120B MoE key (every candidate from the cache: no compile expected).
step tune ${TUNE_LIMIT:-45} "$OUT/tune.txt" "$P/bin/ktune" tune --family mxfp4_gemm --problem n2880.k2880.e128.top4.bf16-bf16 --tokens 256 --cache /tmp/mx.db
# SASS of the kernels named in $SASS (config keys, ';'-separated) from the cache, for reading load placement.
if [[ -n "${SASS:-}" ]]; then
  python3 - /tmp/mx.db "$SASS" "$OUT" <<'PY' 2>&1 | tee -a "$LOG"
import sqlite3, subprocess, sys
db, want, out = sys.argv[1], sys.argv[2].split(';'), sys.argv[3]
c = sqlite3.connect(db)
for cfg in want:
    row = c.execute("select name, blob from binaries where name like ? and arch='sm_90a' limit 1", (f"%n100.k96.bf16-bf16/{cfg}",)).fetchone()
    if not row: print("no binary for", cfg); continue
    open("/tmp/k.cubin", "wb").write(row[1])
    sass = subprocess.run(["cuobjdump", "-sass", "/tmp/k.cubin"], capture_output=True, text=True).stdout
    open(f"{out}/sass_{cfg}.txt", "w").write(sass)
    print(cfg, "LDG:", sass.count("LDG"), "HMMA:", sass.count("HMMA"), "LDL/STL:", sass.count("LDL") + sass.count("STL"), "BAR:", sass.count("BAR.SYNC"))
PY
fi
python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/summary.md" | tee -a "$LOG"
import json, os, re, sys
out = sys.argv[1]
def load(n):
    try: return json.load(open(os.path.join(out, n)))
    except Exception as e: return {"_error": str(e)}
b, p = load("bench_mxfp4.json"), load("peers_mxfp4.json")
print(f"copy: driver {b.get('copy_tbs', 0):.2f} TB/s, torch {p.get('copy_tbs', 0):.2f} TB/s; compiles in bench run: {b.get('compiles')}")
print("| shape | ktune (best) us | TB/s | TFLOP/s | config | cuBLAS bf16 us | TB/s | TFLOP/s | speedup | ktune b2b us | TB/s | config | cuBLAS b2b us | TB/s | speedup |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
peer = {r["label"]: r for r in p.get("rows", [])}
def peer_for(label):
    if "dense" in label:
        m = label.split("M=")[1]
        return peer.get(f"cuBLAS bf16 dense 8192x8192 M={m}")
    shape = "gate_up 5760x2880" if "gate_up" in label else "down 2880x2880"
    t = "8" if " 8 tok" in label else "128"
    return peer.get(f"cuBLAS bf16 bmm moe {shape} E128 {t} tok/exp")
for r in b.get("rows", []):
    q = peer_for(r["label"]) or {}
    sp = q.get("us", 0) / r["best_us"] if r.get("best_us") else 0
    sb = q.get("b2b_us", 0) / r["best_b2b_us"] if r.get("best_b2b_us") else 0
    print(f"| {r['label']} | {r['best_us']:.1f} | {r['best_tbs']:.2f} | {r['best_tflops']:.1f} | {r['best_config']} | "
          f"{q.get('us', 0):.1f} | {q.get('tbs', 0):.2f} | {q.get('tflops', 0):.1f} | {sp:.2f}x | "
          f"{r.get('best_b2b_us', 0):.1f} | {r.get('best_b2b_tbs', 0):.2f} | {r.get('best_b2b_config', '')} | "
          f"{q.get('b2b_us', 0):.1f} | {q.get('b2b_tbs', 0):.2f} | {sb:.2f}x |")
t = open(os.path.join(out, "tests.txt")).read() if os.path.exists(os.path.join(out, "tests.txt")) else ""
m = re.findall(r"(All tests passed.*|test cases:.*)", t)
print("gpu tests:", m[-1] if m else "no summary")
PY
