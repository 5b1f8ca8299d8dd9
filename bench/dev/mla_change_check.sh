#!/usr/bin/env bash
# One device call for a sparse_mla_decode kernel change: the [gpu][sparse_mla] tests on the changed kernels, their
# A/B against a base revision through the library, then compute-sanitizer memcheck, synccheck and racecheck over
# the sparse MLA matrix in the time left (a change lands only with all three clean).
#   CPU:  bash bench/dev/mla_tree_ab.sh build BASE && PACK=h200pack bash bench/run_h200.sh --pack build
#   GPU (the `run` tool, carry h200pack and .devbuild/mla_tree):
#         OUT=... [T=545] [ROWS="..."] [ROUNDS=2] bash bench/dev/mla_change_check.sh
# T is the second of the call by which the sanitizers must be done (a call is limited to 600 s; less when the
# session's device time is short). ROWS as in mla_tree_ab.sh. Under $OUT: tests.txt, the A/B's JSON (ab-json.tgz) and
# the sanitizers' logs (sanitizer-logs.tgz), so that every log comes back from the device call.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a folder for the results}"
T=${T:-545}
P=$PWD/${PACK:-h200pack}
for z in "$P"/*.db.gz; do gunzip -kf "$z"; done
export LD_LIBRARY_PATH=$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "pack $(cat "$P/commit.txt")"
cp "$P/all.db" /tmp/mla-change-check.db
KTUNE_CACHE=/tmp/mla-change-check.db KTUNE_TEST_REQUIRE=gpu timeout 150 "$P/bin/ktune_tests" "[gpu][sparse_mla]" \
  >"$OUT/tests.txt" 2>&1
echo "tests: exit $? after ${SECONDS}s"
tail -3 "$OUT/tests.txt"
ROWS=${ROWS:-"h128 k2048 T8 fp8;h128 k2048 T64 fp8;h128 k2048 T128 fp8;h16 k2048 T128 fp8"} ROUNDS=${ROUNDS:-2} \
  timeout 180 bash bench/dev/mla_tree_ab.sh run 2>&1 | tail -10
echo "A/B done after ${SECONDS}s"
LIMIT=$((T - SECONDS)) RACE_SHARDS=4 SYNC_SHARDS=2 \
  RACE_APART="sparse_mla_decode reads q through token and head strides;sparse_mla_decode with a null lse writes the same out, bit for bit" \
  bash bench/dev/sanitize_matrices.sh sparse_mla 2>&1 | tail -40
echo "done after ${SECONDS}s"
