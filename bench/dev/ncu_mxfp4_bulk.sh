#!/usr/bin/env bash
# Nsight Compute on the device: the library's few-row mxfp4_gemm kernel and the bulk-ring kernel of
# bench/dev/mxfp4_bulk.cu, the first call of each (the harness's check) at one shape per run.
# usage (repo root, .devbuild/mxfp4_bulk built as that file's header says): bash bench/dev/ncu_mxfp4_bulk.sh
export PATH=/usr/local/cuda/bin:$PATH
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ncu-mxfp4-bulk}
mkdir -p "$OUT"
for shape in "moe E128 x1" "dense M1 N"; do
  tag=$(echo "$shape" | tr ' ' '_')
  timeout 200 ncu --clock-control none --set full -k regex:"gemm" -c 2 .devbuild/mxfp4_bulk --only "$shape" \
    > "$OUT/ncu_$tag.txt" 2>&1
  echo "ncu $shape: rc $?"
done
for f in "$OUT"/ncu_*.txt; do
  echo "== $f"
  grep -E "^  [a-zA-Z_:<>0-9]+.*\(|Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Executed Instructions  |Warp Cycles Per Issued|Executed Ipc Active" "$f"
done
