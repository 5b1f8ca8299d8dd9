#!/usr/bin/env bash
# Nsight Compute on the few-token mxfp4_gemm kernels (bench/dev/mxfp4_skinny.cu built with nvcc, run as
# `mxfp4_skinny ncu`: one launch each of the M = 1 default, its cheap-decode stand-in, an M = 16 tiling and the
# pure read). Clocks left alone (--clock-control none); caches flushed before each replay (ncu's default), so
# these are cold, per-call launches. Full pages under $OUT; a short summary on stdout.
#   OUT=/tmp/ncu bash bench/dev/ncu_skinny.sh h200pack-s9/dev/mxfp4_skinny
set -u
BIN=${1:-h200pack-s9/dev/mxfp4_skinny}
OUT=${OUT:-/tmp/ncu-skinny}
mkdir -p "$OUT"
timeout 300 ncu --clock-control none --set full --import-source no -k 'regex:gemm_kernel|read_all' \
  -o "$OUT/skinny" "$BIN" ncu >"$OUT/ncu_log.txt" 2>&1
echo "=== ncu: exit $?"
ncu -i "$OUT/skinny.ncu-rep" --page details --print-details all >"$OUT/details.txt" 2>&1
ncu -i "$OUT/skinny.ncu-rep" --page source --csv --print-source sass >"$OUT/source_sass.csv" 2>&1
ncu -i "$OUT/skinny.ncu-rep" --page raw --csv >"$OUT/raw.csv" 2>&1
KEYS='^  (void|read_all)|    Duration  |SM Active Cycles|    Elapsed Cycles  |Issue Slots Busy|Pipe Alu Cycles'
KEYS="$KEYS|Pipe Fmaheavy Cycles|Stall (Long Scoreboard|Math Pipe Throttle|Not Selected|Wait) "
grep -E "$KEYS" "$OUT/details.txt" | sed -e 's/(ktune_mxfp4::Params).*//' -e 's/  */ /g'
