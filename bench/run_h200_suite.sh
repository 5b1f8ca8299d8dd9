#!/usr/bin/env bash
# One H200 call: the whole GPU test suite of one build (every family), the Python package's GPU tests, and
# compute-sanitizer over the kernels (docs/reliability.md). Builds nothing: the pack folder (default
# h200pack-all, gitignored) carries stripped bin/ktune_tests, lib/libktune.so.0, all.db (every kernel of the
# GPU tests, precompiled for sm_90a without a GPU: the [xqa_precompile], [mla_precompile] and
# [mxfp4_precompile] tests) and ktune.db (the Python tests' cache: bench/run_h200_python.sh --pack).
#   PACK=h200pack-all KTUNE_H200_BUDGET=420 bench/run_h200_suite.sh [racecheck|sanitize-all]
# Writes under $OUT: log.txt, python_tests.log, summary.md (the table, printed last).
set -u
cd "$(dirname "$0")/.."
P=${PACK:-h200pack-all}
OUT=${OUT:-/tmp/ktune-h200-suite}
mkdir -p "$OUT"
cp "$P/all.db" /tmp/all.db
export KTUNE_CACHE=/tmp/all.db
export LD_LIBRARY_PATH=$PWD/$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
LOG=$OUT/log.txt
: >"$LOG"
T=$P/bin/ktune_tests
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t_start=$(date +%s)
budget=${KTUNE_H200_BUDGET:-420}
declare -a ROWS
step() {  # step NAME MAX_SECONDS CMD...
  local name=$1 max=$2
  shift 2
  local left=$((budget - ($(date +%s) - t_start) - 10))
  local lim=$((max < left ? max : left))
  if ((lim < 5)); then ROWS+=("| $name | skipped (no time left) | |"); return; fi
  echo "=== $name (limit ${lim}s): $*" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=5 "$lim" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $(($(date +%s) - t0))s" | tee -a "$LOG"
  ROWS+=("| $name | $rc | $(($(date +%s) - t0))s |")
}
echo "ktune H200 suite $(date -u +%Y-%m-%dT%H:%M:%SZ), pack $P" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
if [[ ${1:-} == racecheck ]]; then  # the racecheck pass alone (slow: ~0.6 s per sparse_mla run)
  step racecheck_mla 140 "$CS" --tool racecheck --error-exitcode 9 "$T" "[gpu][sparse_mla]"
  step racecheck_mxfp4 120 "$CS" --tool racecheck --error-exitcode 9 "$T" "[gpu][mxfp4]"
elif [[ ${1:-} == sanitize-all ]]; then
  # racecheck and synccheck over the WHOLE GPU suite (no subset), as parallel processes on the one GPU: the
  # xqa and mxfp4 matrices are split with KTUNE_TEST_SHARD=i/n (tests/support/gpu.hpp), the other test cases
  # run once each. Every process has the same time limit; a shard cut by it shows as exit 124 in the table.
  lim=$((budget - 20))
  M7="mxfp4_gemm matches the exact reference (issue 7 matrix)"
  jobs_spec=(
    "racecheck xqa0 KTUNE_TEST_SHARD=0/2 [gpu][xqa]"
    "racecheck xqa1 KTUNE_TEST_SHARD=1/2 [gpu][xqa]"
    "racecheck mla - [gpu][sparse_mla]"
    "racecheck mx0 KTUNE_TEST_SHARD=0/4 $M7"
    "racecheck mx1 KTUNE_TEST_SHARD=1/4 $M7"
    "racecheck mx2 KTUNE_TEST_SHARD=2/4 $M7"
    "racecheck mx3 KTUNE_TEST_SHARD=3/4 $M7"
    "racecheck mxrest - [gpu][mxfp4]~$M7"
    "racecheck rt - [gpu][runtime]"
    "synccheck xqa - [gpu][xqa]"
    "synccheck mla - [gpu][sparse_mla]"
    "synccheck mx - [gpu][mxfp4]"
    "synccheck rt - [gpu][runtime]"
  )
  declare -A PIDS T0S
  for spec in "${jobs_spec[@]}"; do
    read -r tool name envv filter <<<"$spec"
    [[ $envv == - ]] && envv=KTUNE_NOTHING=1
    echo "=== $tool $name ($envv, limit ${lim}s): $filter" | tee -a "$LOG"
    env "$envv" timeout --signal=INT --kill-after=5 "$lim" "$CS" --tool "$tool" --error-exitcode 9 "$T" "$filter" \
      >"$OUT/$tool-$name.log" 2>&1 &
    PIDS["$tool-$name"]=$!
  done
  for k in "${!PIDS[@]}"; do
    wait "${PIDS[$k]}"
    rc=$?
    summary=$(grep -hE "RACECHECK SUMMARY|ERROR SUMMARY|^test cases|All tests passed|runs passed" "$OUT/$k.log" | tr '\n' ' ')
    ROWS+=("| $k | $rc | $summary |")
    cat "$OUT/$k.log" >>"$LOG"
  done
  echo "=== sanitize-all done after $(($(date +%s) - t_start))s" | tee -a "$LOG"
else
  step gpu_suite 200 "$T" "[gpu]" --durations yes
  step python_gpu 100 env PACK="$P" OUT="$OUT" bash bench/run_h200_python.sh
  step racecheck_mla_xqa 90 "$CS" --tool racecheck --error-exitcode 9 "$T" "[gpu][sparse_mla],[gpu][xqa]"
  step memcheck_mla_mxfp4 90 "$CS" --tool memcheck --error-exitcode 9 "$T" "[gpu][sparse_mla],[gpu][mxfp4]"
fi
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^test cases|^assertions|All tests passed|MATRIX|runs passed|Ran |^OK|FAILED" "$LOG" \
  | tail -40 >"$OUT/summary.md"
{
  echo
  echo "| step | exit | time |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
} >>"$OUT/summary.md"
cat "$OUT/summary.md"
