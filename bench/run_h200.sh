#!/usr/bin/env bash
# One device call on the H200: builds nothing (the build folder is carried, with a cache of every kernel the
# tests and benches use, compiled ahead on a machine without a GPU), runs
#   ktune info -> bench_xqa (prepare: cache hits, + run) -> peers_sdpa.py -> bench_runtime (prepare + run) -> GPU tests
# and writes everything under $OUT (at most 8 files): log.txt (all output), tests.txt, bench_xqa.json,
# peers.json, bench_runtime.json, summary.md. The combined table is printed last.
#   KTUNE_BUILD=build-h200 bench/run_h200.sh        # build folder (default build)
#   KTUNE_H200_BUDGET=450                           # seconds for the whole script (steps are cut to fit)
set -u
cd "$(dirname "$0")/.."
B=${KTUNE_BUILD:-build}
OUT=${OUT:-/tmp/ktune-h200}
mkdir -p "$OUT"
export KTUNE_CACHE=${KTUNE_CACHE:-$PWD/$B/h200.db}
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
SB=()
command -v stdbuf >/dev/null 2>&1 && SB=(stdbuf -oL -eL)
LOG=$OUT/log.txt
: >"$LOG"
t_start=$(date +%s)
budget=${KTUNE_H200_BUDGET:-450}

# step NAME MAX_SECONDS OUTFILE CMD...: runs CMD with a timeout that fits the remaining budget, tees output.
step() {
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
  timeout --signal=INT --kill-after=10 "$lim" "${SB[@]}" "$@" 2>&1 | tee -a "$file" >>"$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $(($(date +%s) - t0))s" | tee -a "$LOG"
}

echo "ktune H200 run $(date -u +%Y-%m-%dT%H:%M:%SZ), build $B, cache $KTUNE_CACHE" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | tee -a "$LOG"
step info 30 /dev/null "$B/bin/ktune" info
step bench_xqa_prepare 90 /dev/null "$B/bin/bench_xqa" prepare --cache "$KTUNE_CACHE" --arch sm_90a
step bench_xqa 120 /dev/null "$B/bin/bench_xqa" run --json "$OUT/bench_xqa.json" --reps 60
step peers 150 /dev/null python3 bench/peers_sdpa.py --json "$OUT/peers.json" --reps 50
step bench_runtime_prepare 60 /dev/null "$B/bin/bench_runtime" prepare --cache "$B/bench_runtime.db" --arch sm_90a
step bench_runtime 60 /dev/null "$B/bin/bench_runtime" run --cache "$B/bench_runtime.db" --json "$OUT/bench_runtime.json"
: >"$OUT/tests.txt"
step gpu_tests 400 "$OUT/tests.txt" "$B/bin/ktune_tests" "[gpu]" --durations yes

python3 - "$OUT" <<'EOF' 2>&1 | tee "$OUT/summary.md" | tee -a "$LOG"
import json, os, re, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception as e:
        return {"_error": str(e)}
bx, pe, br = load("bench_xqa.json"), load("peers.json"), load("bench_runtime.json")
print(f"## ktune xqa_decode on {bx.get('device', '?')} ({bx.get('arch', '?')}), NVRTC {bx.get('nvrtc', '?')}")
print(f"copy bandwidth (read+write): ktune cuMemcpyDtoD {bx.get('copy_tbs', float('nan')):.2f} TB/s, "
      f"torch copy_ {pe.get('copy_tbs', float('nan')):.2f} TB/s")
peer = {}
for r in pe.get("rows", []):
    if "kv_tbs" in r:
        peer[(r["label"], r["backend"])] = r
print()
print("| shape | ktune launch choice | TB/s | ktune best | TB/s | cuDNN TB/s | flash TB/s | bar | vs best peer |")
print("|---|---|---|---|---|---|---|---|---|")
for r in bx.get("rows", []):
    c = [x for x in r["candidates"] if x["config"] == r["launch_choice"]][0]
    b = [x for x in r["candidates"] if x["config"] == r["best_config"]][0]
    cu, fl = peer.get((r["label"], "cudnn")), peer.get((r["label"], "flash"))
    f = lambda p: (f"{p['kv_tbs']:.2f}" + ("*" if p.get("gqa") == "repeat_interleave" else "") +
                   (f" ({p['nomask_kv_tbs']:.2f} no mask)" if "nomask_kv_tbs" in p else "")) if p else "n/a"
    best_peer = max([max(p["kv_tbs"], p.get("nomask_kv_tbs", 0)) for p in (cu, fl) if p] or [0])
    vs = f"{b['kv_tbs'] / best_peer:.2f}x" if best_peer else "-"
    bar = f"{r['bar_tbs']:.1f}" if r["bar_tbs"] else "-"
    print(f"| {r['label']} | {c['config']} s{c['splits']} | {c['kv_tbs']:.2f} | {b['config']} s{b['splits']} | "
          f"{b['kv_tbs']:.2f} | {f(cu)} | {f(fl)} | {bar} | {vs} |")
print("(* = the peer ran with K/V expanded by repeat_interleave: it read group-times more bytes)")
st = bx.get("stats", {})
print(f"\nbench_xqa runtime stats: compiles {st.get('compiles')}, loads {st.get('loads')}, "
      f"cache_hits {st.get('cache_hits')}, memory_hits {st.get('memory_hits')}")
if "_error" not in br:
    print(f"bench_runtime: load 100 cached kernels {br.get('load_ms_median', 0):.2f} ms (compiles {br.get('compiles')}), "
          f"ktune launch {br.get('ktune_launch_us', 0):.3f} us vs bare cuLaunchKernel {br.get('bare_launch_us', 0):.3f} us")
try:
    t = open(os.path.join(out, "tests.txt")).read()
    for pat in (r"XQA GPU MATRIX:.*", r"test cases:.*", r"assertions:.*", r"All tests passed.*"):
        for m in re.findall(pat, t):
            print("tests:", m.strip())
except Exception as e:
    print("tests: no output", e)
EOF
echo "total $(($(date +%s) - t_start))s" | tee -a "$LOG"
