#!/usr/bin/env bash
# One H200 call for issue #8/#5 evidence (docs/reliability.md, docs/host_backend.md). Builds nothing: the build
# folder is carried. Writes under $OUT: log.txt, xqa_h200_oracle.bin (the host-backend oracle fixture, to be
# committed as tests/data/xqa_h200_oracle.bin), summary.md. Steps:
#   1. checked kernels: [checked] GPU tests, then the same under compute-sanitizer memcheck (a bad page index
#      must be reported with 0 out-of-bounds accesses)
#   2. the oracle dump ([.][xqa_oracle_dump])
#   3. compute-sanitizer racecheck and synccheck over a subset of the xqa GPU matrix (KTUNE_XQA_SUBSET,
#      KTUNE_XQA_MAX_LEN), plus memcheck over the other [gpu] tests
#   KTUNE_BUILD=build bench/run_h200_hardening.sh      (KTUNE_H200_FULL=1 adds synccheck and memcheck of the
#                                                     other [gpu] tests: about 3 more minutes)
set -u
cd "$(dirname "$0")/.."
B=${KTUNE_BUILD:-build}
OUT=${OUT:-/tmp/ktune-h200-hardening}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE=${KTUNE_CACHE:-$PWD/$B/h200.db}
LOG=$OUT/log.txt
: >"$LOG"
T=$B/bin/ktune_tests
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
declare -a ROWS
step() {  # step NAME LIMIT CMD...
  local name=$1 lim=$2
  shift 2
  echo "=== $name (limit ${lim}s): $*" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$lim" "$@" >>"$LOG" 2>&1
  local rc=$?
  local dt=$(($(date +%s) - t0))
  echo "=== $name: exit $rc after ${dt}s" | tee -a "$LOG"
  ROWS+=("| $name | $rc | ${dt}s |")
}
echo "ktune H200 hardening run $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
step checked 40 "$T" "[checked]" --durations yes
step checked_memcheck 60 "$CS" --tool memcheck --error-exitcode 9 "$T" "[checked]"
export KTUNE_ORACLE_OUT=$OUT/xqa_h200_oracle.bin
export KTUNE_ORACLE_HEADER="xqa_decode outputs recorded on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(date -u +%Y-%m-%d), bench/run_h200_hardening.sh"
step oracle_dump 50 "$T" "[xqa_oracle_dump]"
export KTUNE_XQA_SUBSET=${KTUNE_XQA_SUBSET:-5} KTUNE_XQA_MAX_LEN=${KTUNE_XQA_MAX_LEN:-1500}
step racecheck_matrix 120 "$CS" --tool racecheck --racecheck-report all --error-exitcode 9 "$T" "xqa_decode matches the fp64 reference over the sampled matrix"
[[ -n ${KTUNE_H200_FULL:-} ]] && step synccheck_matrix 80 "$CS" --tool synccheck --error-exitcode 9 "$T" "xqa_decode matches the fp64 reference over the sampled matrix"
unset KTUNE_XQA_SUBSET KTUNE_XQA_MAX_LEN
[[ -n ${KTUNE_H200_FULL:-} ]] && step memcheck_other_gpu 90 "$CS" --tool memcheck --error-exitcode 9 "$T" "[gpu]~xqa_decode matches the fp64 reference over the sampled matrix"
# The GPU row of docs/reliability.md: processes x threads racing Runtime::get (module table included).
[[ -x $B/bin/ktune_stress ]] && step stress_gpu_load 50 "$B/bin/ktune_stress" runtime --procs 4 --threads 32 --kernels 4 --load
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|test cases|assertions|oracle:|checked xqa_decode|subset" "$LOG" | tail -30 >"$OUT/summary.md"
{
  echo "| step | exit | time |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
} | tee -a "$OUT/summary.md"
