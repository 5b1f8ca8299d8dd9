#!/usr/bin/env bash
# Runs the bulk-copy ring MXFP4 harness (bench/dev/mxfp4_bulk.cu) on the device machine, from the repo root, with
# the binary already built at .devbuild/mxfp4_bulk (build line in the .cu header):
#   1. the full run: every shape checked against the library kernel, then the timing table  -> $OUT/bench.txt
#   2. --small: ragged dense and grouped cases, checks only                                   -> $OUT/small.txt
#   3. unless SANITIZE=0: compute-sanitizer memcheck, racecheck, synccheck on --small         -> $OUT/sanitize-*.txt
# Time limits (a hang shows as exit code 124): bench ${BENCH_TIMEOUT:-240} s, --small 60 s, each sanitizer 90 s,
# together under the device machine's 600 s per command.
# Prints a short summary last: the timing table, each step's exit code and the sanitizers' error summaries.
#   OUT=/some/dir bash bench/dev/run_mxfp4_bulk.sh      (OUT defaults to ./mxfp4_bulk_out)
set -u
cd "$(dirname "$0")/../.."
export PATH="/usr/local/cuda/bin:$PATH"
BIN=${BIN:-.devbuild/mxfp4_bulk}
OUT=${OUT:-./mxfp4_bulk_out}
mkdir -p "$OUT"
if [[ ! -x $BIN ]]; then
  echo "no binary at $BIN (build it first: see the header of bench/dev/mxfp4_bulk.cu)"
  exit 2
fi
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv || true; } \
  > "$OUT/gpu.txt" 2>&1

timeout ${BENCH_TIMEOUT:-240} "$BIN" > "$OUT/bench.txt" 2>&1
rc_bench=$?
timeout 60 "$BIN" --small > "$OUT/small.txt" 2>&1
rc_small=$?

declare -A rc_san=()
if [[ ${SANITIZE:-1} != 0 ]]; then
  for tool in memcheck racecheck synccheck; do
    timeout 90 compute-sanitizer --tool "$tool" --error-exitcode 99 "$BIN" --small > "$OUT/sanitize-$tool.txt" 2>&1
    rc_san[$tool]=$?
  done
fi

echo "==== gpu";
cat "$OUT/gpu.txt"
echo "==== checks (bench run)"
grep -E "^check|checks:" "$OUT/bench.txt" || true
echo "==== small"
grep -E "^check|^small|bulk::gemm" "$OUT/small.txt" || true
if [[ ${SANITIZE:-1} != 0 ]]; then
  echo "==== sanitizers (--small)"
  for tool in memcheck racecheck synccheck; do
    echo "$tool rc=${rc_san[$tool]}: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize-$tool.txt" | tr '\n' ' ')"
  done
fi
echo "==== exit codes: bench $rc_bench, small $rc_small (124: timed out, e.g. a ring that never completed)"
if [[ $rc_bench != 0 ]]; then echo "==== bench.txt tail"; tail -n 8 "$OUT/bench.txt"; fi
echo "==== table"
sed -n '/^shape /,$p' "$OUT/bench.txt"
[[ $rc_bench == 0 && $rc_small == 0 ]]
