#!/usr/bin/env bash
# The H200 driver: every GPU measurement and GPU test run of ktune, as parts of one script.
#
#   bench/run_h200.sh --pack [BUILD_DIR]   on the machine without a GPU: fills $PACK (default h200pack, gitignored)
#       with stripped bin/ + lib/, all.db (every kernel the GPU tests and benches use, compiled for sm_90a),
#       warmup.db (the llama-3.1-8b preset's candidates) and py.db (the Python tests' kernels), so nothing is
#       compiled on the device; the .db files go gzipped and a run unpacks them. Needs a build with ktune_cli ktune_tests ktune_stress and the bench_* targets.
#   bench/run_h200.sh PART...              on the H200 (the `run` tool, carry $PACK): runs the parts in order.
#
# Parts:
#   tests     the whole [gpu] suite with KTUNE_TEST_REQUIRE=gpu (a skipped GPU test fails the run), then the
#             primary-context-reset test in a process of its own
#   xqa       bench_xqa + bench/peers_sdpa.py (cuDNN / flash SDPA) + bench_runtime (load and launch overhead)
#   mla       bench_sparse_mla + bench/peers_sparse_mla.py (PyTorch gather + bmm)
#   mxfp4     bench_mxfp4 + bench/peers_mxfp4.py (cuBLAS BF16 on the dequantized weight)
#   dispatch  bench_dispatch (host us per call: prepared C++/C ops, one-shot calls, bare cuLaunchKernel),
#             bench/bench_dispatch.py (the Python op object, the torch custom op, SDPA's per-call cost) and
#             bench_pdl (GPU us per call in a graph of chained decode calls, plain vs programmatic dependent launch)
#   tune      llama-3.1-8b warmup / replay / replay with KTUNE_JIT=0, bench_autotune, two mxfp4 `ktune tune` keys,
#             then the warmed cache with its rows relabelled as another ktune version's: replay (defaults), warmup;
#             and with its rows marked as measured on another NVRTC: replay (winners kept), warmup (re-tunes), warmup
#   devices   ktune warmup --devices 0 (the worker-process path on this GPU) against two plain warmups of the same
#             llama-3.1-8b range (bench/compare_warmups.py: same keys, winners equal or within noise), a replay of
#             the --devices cache with KTUNE_JIT=0, and ktune.warmup(devices=[0]) from Python (the C entry)
#   python    the Python package's GPU tests (python/tests) with KTUNE_TEST_REQUIRE=gpu, installed with pip --target
#   sanitize  checked kernels + memcheck, the host oracle dump (tests/data/xqa_h200_oracle.bin), racecheck and
#             synccheck over the whole GPU suite as parallel processes (matrices sharded with KTUNE_TEST_SHARD),
#             the multi-process runtime stress
#   shipping  docs/shipping.md's commands (warm up, export, sign, verify, the read-only image), then the
#             deepseek-v3.2 and gpt-oss-120b presets on fresh caches
#   engine    examples/engine_decode.py --steps 50 (engine-style decode loops under CUDA graphs, checked per step)
#   readme    tests/readme/readme_story.sh with the pack's library (the README's new-user story)
#
# Every part writes under $OUT (default /tmp/ktune-h200): PART_STEP.txt per step, the benches' JSON, summary.md
# (one row per step, then each bench's table); at the end everything but summary.md moves into steps.tar.gz.
# One device call is limited to 10 minutes; split the parts over calls when they do not fit (tests + mxfp4 +
# tune take ~5 minutes). Environment: PACK, OUT, KTUNE_H200_BUDGET (seconds for the whole call, default 560;
# every step's limit is cut to fit), REPS.
set -u
cd "$(dirname "$0")/.."
PACK=${PACK:-h200pack}

if [[ "${1:-}" == "--pack" ]]; then
  set -eo pipefail
  B=${2:-build}
  rm -rf "$PACK" && mkdir -p "$PACK/bin" "$PACK/lib"
  # The commit the pack's binaries are built from (a run's header prints it): the device's copy of the tree may
  # carry other git metadata, so its own `git rev-parse` does not say what ran.
  { git rev-parse --short HEAD; git diff --quiet HEAD -- runtime templates autotune cache tools tests bench || echo "+ local changes"; } |
    paste -sd' ' > "$PACK/commit.txt"
  for t in ktune ktune_tests ktune_stress bench_xqa bench_runtime bench_sparse_mla bench_mxfp4 bench_autotune bench_dispatch bench_pdl; do
    if [[ -x $B/bin/$t ]]; then strip --strip-unneeded -o "$PACK/bin/$t" "$B/bin/$t"; else echo "no $B/bin/$t"; fi
  done
  # The library goes under its SONAME, the name the pack's binaries load (PLIB below finds it by that name).
  soname=$(readelf -d "$B/lib/libktune.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
  [[ -n $soname ]] || { echo "no SONAME in $B/lib/libktune.so"; exit 1; }
  strip --strip-unneeded -o "$PACK/lib/$soname" "$(readlink -f "$B/lib/libktune.so")"
  export LD_LIBRARY_PATH=$PWD/$PACK/lib:${LD_LIBRARY_PATH:-} KTUNE_LOG=error
  export KTUNE_CACHE=$PWD/$PACK/all.db
  "$B/bin/ktune_tests" "[xqa_precompile],[mla_precompile],[mxfp4_precompile]" | tail -2
  for b in bench_xqa bench_sparse_mla bench_mxfp4; do
    [[ -x $B/bin/$b ]] && "$B/bin/$b" prepare --cache "$KTUNE_CACHE" --arch sm_90a | tail -1
  done
  [[ -x $B/bin/bench_runtime ]] && "$B/bin/bench_runtime" prepare --cache "$PACK/runtime.db" --arch sm_90a | tail -1
  "$B/bin/ktune" warmup --preset llama-3.1-8b --max-batch 64 --max-seq-len 16384 --arch sm_90a \
    --cache "$PACK/warmup.db" --json | tail -1
  export KTUNE_LIBRARY=$PWD/$PACK/lib/$soname
  "$B/bin/ktune" warmup --preset llama-3.1-8b --arch sm_90a --max-batch 4 --max-seq-len 1024 --cache "$PACK/py.db" \
    --json | tail -1
  PYDB=$PACK/py.db PYTHONPATH=python:python/tests python3 - <<'PY'
import os, ktune, gpu_problems
rt = ktune.Runtime(cache=os.environ["PYDB"], allow_jit=True)
todo = [("xqa_decode", ktune.xqa_problem(**f)) for f in gpu_problems.ALL]
todo += [("sparse_mla_decode", ktune.mla_problem(**f)) for f in gpu_problems.MLA_PROBLEMS]
todo += [("mxfp4_gemm", ktune.mxfp4_problem(**f)) for f in gpu_problems.MXFP4_PROBLEMS]
print(sum(bool(rt.compile(fam, key, "sm_90a")) for fam, key in todo), "python-test kernels compiled")
PY
  # The caches go gzipped (CUBINs shrink ~3.5x), so the pack stays well inside the device tool's 64 MiB carry;
  # a run unpacks them first.
  rm -f "$PACK"/*.compile-lock "$PACK"/*.tune-lock
  gzip -f "$PACK"/*.db
  du -sh "$PACK"
  exit 0
fi

(($# > 0)) || { sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 2; }  # the header above
OUT=${OUT:-/tmp/ktune-h200}
mkdir -p "$OUT"
P=$PWD/$PACK
for z in "$P"/*.db.gz; do
  if [[ -e $z && ! -e ${z%.gz} ]]; then gunzip -k "$z"; fi
done
K=$P/bin/ktune
PLIB=$(echo "$P"/lib/libktune.so.*)  # the pack's library, under its SONAME
T=$P/bin/ktune_tests
export LD_LIBRARY_PATH=$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
WORK=/tmp/ktune-h200-work
rm -rf "$WORK" && mkdir -p "$WORK"
# fresh_db SRC DST: a writable copy of a pack's cache. A write-ahead log left beside DST by an earlier part would
# be replayed onto the new copy, so the copy replaces DST together with its -wal and -shm files.
fresh_db() {
  rm -f "$2" "$2-wal" "$2-shm"
  [[ -f $1 ]] && cp "$1" "$2"
}
fresh_db "$P/all.db" "$WORK/all.db"  # tuning rows land in it
export KTUNE_CACHE=$WORK/all.db
t_start=$(date +%s)
budget=${KTUNE_H200_BUDGET:-560}
REPS=${REPS:-40}
declare -a ROWS

# step NAME MAX_SECONDS CMD...: runs CMD with a limit cut to the time left, output to $OUT/NAME.txt.
step() {
  local name=$1 max=$2
  shift 2
  local left=$((budget - ($(date +%s) - t_start) - 10))
  local lim=$((max < left ? max : left))
  if ((lim < 5)); then
    ROWS+=("| $name | skipped (no time left) | |")
    return
  fi
  echo "=== $name (limit ${lim}s): $*"
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$lim" "$@" >"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $(($(date +%s) - t0))s"
  ROWS+=("| $name | $rc | $(($(date +%s) - t0))s |")
  return $rc
}

part_tests() {
  KTUNE_TEST_REQUIRE=gpu step tests_gpu 300 "$T" "[gpu]" --durations yes
  grep -E "MATRIX|test cases|assertions|FAILED|REQUIRE" "$OUT/tests_gpu.txt" | tail -8
  # A primary context reset drops every allocation on the context: a process of its own.
  KTUNE_TEST_REQUIRE=gpu step tests_primary_reset 60 "$T" "[primary_reset]"
  grep -E "handle|test cases|FAILED" "$OUT/tests_primary_reset.txt" | tail -4
}

part_xqa() {
  step xqa_prepare 90 "$P/bin/bench_xqa" prepare --cache "$KTUNE_CACHE" --arch sm_90a
  step xqa_bench 120 "$P/bin/bench_xqa" run --json "$OUT/xqa_bench.json" --reps 60
  step xqa_peers 150 python3 bench/peers_sdpa.py --json "$OUT/xqa_peers.json" --reps 50
  fresh_db "$P/runtime.db" "$WORK/runtime.db"
  step runtime_bench 60 "$P/bin/bench_runtime" run --cache "$WORK/runtime.db" --json "$OUT/runtime_bench.json"
}

part_mla() {
  step mla_bench 120 "$P/bin/bench_sparse_mla" run --json "$OUT/mla_bench.json" --reps "$REPS"
  step mla_peers 80 python3 bench/peers_sparse_mla.py --json "$OUT/mla_peers.json" --reps 20
}

part_mxfp4() {
  step mxfp4_bench 240 "$P/bin/bench_mxfp4" run --json "$OUT/mxfp4_bench.json" --reps "$REPS"
  step mxfp4_peers 60 python3 bench/peers_mxfp4.py --json "$OUT/mxfp4_peers.json" --reps 30
}

part_tune() {
  fresh_db "$P/warmup.db" "$WORK/warmup.db"
  local db=$WORK/warmup.db range=(--preset llama-3.1-8b --max-batch 64 --max-seq-len 16384)
  step tune_warmup 150 "$K" warmup "${range[@]}" --cache "$db" --json
  step tune_replay 60 "$K" replay "${range[@]}" --cache "$db" --json
  KTUNE_JIT=0 step tune_replay_nojit 60 "$K" replay "${range[@]}" --cache "$db" --no-preload
  step tune_autotune_bench 200 "$P/bin/bench_autotune" --cache "$db" --json "$OUT/autotune.json"
  step tune_mxfp4_dense 90 "$K" tune --family mxfp4_gemm --problem n8192.k8192.bf16-bf16 --tokens 4096
  step tune_mxfp4_moe 45 "$K" tune --family mxfp4_gemm --problem n2880.k2880.e128.top4.bf16-bf16 --tokens 256
  # The same cache with every row relabelled as tuned by another ktune version (row digests recomputed): a replay
  # runs every op on its default with 0 compiles (the rows are not used), then a warmup tunes every key again.
  fresh_db "$db" "$WORK/stale.db"
  python3 - "$WORK/stale.db" <<'PY'
import sqlite3, sys
sys.path.insert(0, "tests/support")
import put_tuning_row
db = sys.argv[1]
rows = sqlite3.connect(db).execute("SELECT family, problem_key, device_fingerprint, winner_config FROM tuning").fetchall()
for r in rows:
    put_tuning_row.main(db, *r, "0.0.1")
print(len(rows), "tuning rows relabelled as ktune 0.0.1's")
PY
  KTUNE_JIT=0 step tune_stale_replay 60 "$K" replay "${range[@]}" --cache "$WORK/stale.db" --no-preload --json
  step tune_stale_warmup 150 "$K" warmup "${range[@]}" --cache "$WORK/stale.db" --json
  # The same cache with every row marked as measured on another NVRTC's binaries: the runtime still uses the
  # winners (a replay: every op "tuned", 0 tunings), a warmup tunes every key again, a second one tunes none.
  fresh_db "$db" "$WORK/compiler.db"
  python3 - "$WORK/compiler.db" <<'PY'
import sys
sys.path.insert(0, "tests/support")
import put_tuning_row
print(put_tuning_row.set_candidates_field(sys.argv[1], "compiler_version", "0.0.0"),
      "tuning rows marked as measured on NVRTC 0.0.0")
PY
  step tune_compiler_replay 60 "$K" replay "${range[@]}" --cache "$WORK/compiler.db" --json
  step tune_compiler_warmup 150 "$K" warmup "${range[@]}" --cache "$WORK/compiler.db" --json
  step tune_compiler_warmup2 60 "$K" warmup "${range[@]}" --cache "$WORK/compiler.db" --json
}

part_devices() {
  local range=(--preset llama-3.1-8b --max-batch 64 --max-seq-len 16384) w
  for w in plain1 plain2 dev0; do fresh_db "$P/warmup.db" "$WORK/$w.db"; done
  step devices_warmup_plain1 150 "$K" warmup "${range[@]}" --cache "$WORK/plain1.db" --json
  step devices_warmup_dev0 150 "$K" warmup "${range[@]}" --devices 0 --cache "$WORK/dev0.db" --json
  step devices_warmup_plain2 150 "$K" warmup "${range[@]}" --cache "$WORK/plain2.db" --json
  KTUNE_JIT=0 step devices_replay_dev0 60 "$K" replay "${range[@]}" --cache "$WORK/dev0.db" --no-preload
  step devices_compare 30 python3 bench/compare_warmups.py "$WORK/plain1.db" "$WORK/plain2.db" "$WORK/dev0.db" \
    --json "$OUT/devices_compare.json"
  cat "$OUT/devices_compare.txt"
  fresh_db "$P/warmup.db" "$WORK/pydev.db"
  step devices_python 120 env PYTHONPATH=python KTUNE_LIBRARY="$PLIB" KTUNE_CLI="$K" \
    KTUNE_CACHE="$WORK/pydev.db" python3 -c "
import ktune
r = ktune.warmup(preset='llama-3.1-8b', max_batch=4, max_seq_len=1024, devices=[0], progress=False)
print(r)"
}

part_python() {
  fresh_db "$P/py.db" "$WORK/py.db"
  rm -rf "$WORK/py" && python3 -m pip install --no-index --no-deps --quiet --target "$WORK/py" ./python
  # The installed package, not the checkout's: the tests run from /tmp with PYTHONPATH at the install.
  step python_gpu 200 env -C /tmp PYTHONPATH="$WORK/py" KTUNE_LIBRARY="$PLIB" KTUNE_CACHE="$WORK/py.db" \
    KTUNE_TEST_REQUIRE=gpu \
    KTUNE_EXPECT_NO_JIT=1 KTUNE_LOG=warn python3 -m unittest discover -s "$PWD/python/tests" -t "$PWD/python/tests" -v
  grep -E "^(Ran |OK|FAILED)" "$OUT/python_gpu.txt" | tail -3
}

part_sanitize() {
  step san_checked 40 "$T" "[checked]" --durations yes
  step san_checked_memcheck 60 "$CS" --tool memcheck --error-exitcode 9 "$T" "[checked]"
  KTUNE_ORACLE_OUT=$OUT/xqa_h200_oracle.bin \
    KTUNE_ORACLE_HEADER="xqa_decode outputs recorded on $(nvidia-smi --query-gpu=name,driver_version \
      --format=csv,noheader | head -1), $(date -u +%Y-%m-%d), bench/run_h200.sh sanitize" \
    step san_oracle_dump 50 "$T" "[xqa_oracle_dump]"
  # racecheck and synccheck over the whole GPU suite, side by side on the one GPU; the xqa and mxfp4 matrices
  # and sparse_mla matrices are split with KTUNE_TEST_SHARD=i/n (tests/support/gpu.hpp). A shard cut by the limit shows exit 124.
  local lim=$((budget - ($(date +%s) - t_start) - 60)) m7="mxfp4_gemm matches the exact reference over its GPU matrix"
  local specs=(
    "racecheck xqa0 KTUNE_TEST_SHARD=0/2 [gpu][xqa]" "racecheck xqa1 KTUNE_TEST_SHARD=1/2 [gpu][xqa]"
    "racecheck mla0 KTUNE_TEST_SHARD=0/3 [gpu][sparse_mla]" "racecheck mla1 KTUNE_TEST_SHARD=1/3 [gpu][sparse_mla]"
    "racecheck mla2 KTUNE_TEST_SHARD=2/3 [gpu][sparse_mla]"
    "racecheck mx0 KTUNE_TEST_SHARD=0/4 $m7" "racecheck mx1 KTUNE_TEST_SHARD=1/4 $m7"
    "racecheck mx2 KTUNE_TEST_SHARD=2/4 $m7" "racecheck mx3 KTUNE_TEST_SHARD=3/4 $m7"
    "racecheck mxrest - [gpu][mxfp4]~$m7" "racecheck rt - [gpu][runtime]"
    "synccheck xqa - [gpu][xqa]" "synccheck mla - [gpu][sparse_mla]" "synccheck mx - [gpu][mxfp4]"
    "synccheck rt - [gpu][runtime]")
  declare -A pids
  local spec tool name envv filter k
  for spec in "${specs[@]}"; do
    read -r tool name envv filter <<<"$spec"
    [[ $envv == - ]] && envv=KTUNE_NOTHING=1
    env "$envv" timeout --signal=INT --kill-after=5 "$lim" "$CS" --tool "$tool" --error-exitcode 9 "$T" "$filter" \
      >"$OUT/san_$tool-$name.txt" 2>&1 &
    pids[$tool-$name]=$!
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}"
    ROWS+=("| san_$k | $? | $(grep -hE "RACECHECK SUMMARY|ERROR SUMMARY|^test cases" "$OUT/san_$k.txt" | tr '\n' ' ') |")
  done
  step san_stress_gpu_load 50 "$P/bin/ktune_stress" runtime --procs 4 --threads 32 --kernels 4 --load
}

part_shipping() {
  local s=$WORK/ship
  mkdir -p "$s"
  export KTUNE_LOG=warn KTUNE_CACHE=$s/ktune-build.db
  step ship_warmup 120 "$K" warmup --preset llama-3.1-8b
  step ship_replay 60 "$K" replay --preset llama-3.1-8b
  step ship_report 30 "$K" report --cache "$s/ktune-build.db" -o "$s/tuning-report.html"
  step ship_keygen 10 "$K" cache keygen --out "$s/ship.key"
  step ship_export 30 "$K" cache export --cache "$s/ktune-build.db" --out "$s/ktune-llama.db"
  step ship_sign 10 "$K" cache sign --cache "$s/ktune-llama.db" --key "$s/ship.key"
  step ship_verify 10 "$K" cache verify --cache "$s/ktune-llama.db" --pubkey "$s/ship.key.pub"
  chmod 0444 "$s/ktune-llama.db"
  KTUNE_CACHE="$s/ktune-llama.db?ro" KTUNE_JIT=0 KTUNE_TRUSTED_KEYS=$s/ship.key.pub \
    step ship_image_replay 60 "$K" replay --preset llama-3.1-8b
  "$K" cache keygen --out "$s/other.key" >/dev/null 2>&1
  # Expected to fail (exit 1): the only trusted key is another one, so the signed layer is refused.
  KTUNE_CACHE="$s/ktune-llama.db?ro" KTUNE_JIT=0 KTUNE_TRUSTED_KEYS=$s/other.key.pub \
    step ship_image_untrusted 60 "$K" replay --preset llama-3.1-8b
  local preset
  for preset in deepseek-v3.2 gpt-oss-120b; do
    KTUNE_CACHE=$s/$preset.db step "ship_warmup_$preset" 200 "$K" warmup --preset "$preset" --budget 150s
    KTUNE_CACHE=$s/$preset.db step "ship_replay_$preset" 60 "$K" replay --preset "$preset"
  done
  export KTUNE_CACHE=$WORK/all.db
}

part_dispatch() {
  step dispatch_cpp 120 "$P/bin/bench_dispatch" --json "$OUT/dispatch_cpp.json"
  grep -E "^\|" "$OUT/dispatch_cpp.txt"
  step dispatch_py 120 env PYTHONPATH=python KTUNE_LIBRARY="$PLIB" python3 bench/bench_dispatch.py \
    --json "$OUT/dispatch_py.json"
  grep -E "^\||identical" "$OUT/dispatch_py.txt"
  step dispatch_pdl 120 "$P/bin/bench_pdl" --json "$OUT/dispatch_pdl.json"
  grep -E "^\|" "$OUT/dispatch_pdl.txt"
}

part_engine() {
  fresh_db "$P/py.db" "$WORK/engine.db"  # its own copy: the example compiles its kernels into it
  step engine_decode 240 env PYTHONPATH=python KTUNE_LIBRARY="$PLIB" KTUNE_CACHE="$WORK/engine.db" \
    python3 examples/engine_decode.py --steps 50 --json "$OUT/engine_decode.json"
  grep -E "^\||engine_decode" "$OUT/engine_decode.txt"
}

part_readme() {
  mkdir -p build/lib && cp "$PLIB" build/lib/ && ln -sf "$(basename "$PLIB")" build/lib/libktune.so
  step readme_story 300 bash tests/readme/readme_story.sh
}

# The header names the card: the device tool may lend an H100 where an H200 was asked for, and the two are timed
# apart.
HEADER="ktune GPU run $(date -u +%Y-%m-%dT%H:%M:%SZ), binaries of commit $(cat "$P/commit.txt" 2>/dev/null || echo '? (pack without commit.txt)'), tree $(git rev-parse --short HEAD 2>/dev/null || echo ?), pack $PACK, parts: $*
device: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader)"
echo "$HEADER"
for part in "$@"; do
  if ! declare -F "part_$part" >/dev/null; then
    echo "unknown part '$part' (expected tests xqa mla mxfp4 dispatch tune devices python sanitize shipping engine readme)"
    exit 2
  fi
  "part_$part"
done

{
  echo "$HEADER"
  echo
  echo "| step | exit | time / summary |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
  echo
  python3 bench/h200_summary.py "$OUT"
} | tee "$OUT/summary.md"
# The device tool brings back at most eight files a call, so every step's log and JSON go into one archive
# beside summary.md.
(cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name summary.md ! -name steps.tar.gz -printf '%P\n' |
  tar -czf steps.tar.gz -T - --remove-files)
echo "total $(($(date +%s) - t_start))s (step logs and JSON: $OUT/steps.tar.gz)"
