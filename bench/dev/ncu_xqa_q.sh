#!/usr/bin/env bash
# Nsight Compute of the FP8 q1 and q4-causal decode kernels of the xqa_ab harness, for a per-instruction
# comparison of the two (why q4 runs ~5% slower than q1 on the same bytes): the "full" set's details and the
# per-SASS source counters, as CSV under $OUT.
#   bash bench/dev/xqa_ab.sh build head=.      # CPU machine; carry .devbuild/xqa_ab/head
#   OUT=... bash bench/dev/ncu_xqa_q.sh         # H200
set -euo pipefail
: "${OUT:?set OUT to a folder for the reports}"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for row in "B64 L4096 fp8 q1" "B64 L4096 fp8 q4c"; do
  n=$(echo "$row" | tr ' ' _)
  "$NCU" --clock-control none --set full -k regex:decode_kernel -c 1 -o "/tmp/$n" -f .devbuild/xqa_ab/head 1 "$row" \
    > "$OUT/$n.log" 2>&1
  "$NCU" --import "/tmp/$n.ncu-rep" --page details --csv > "$OUT/$n.details.csv" 2>&1
  "$NCU" --import "/tmp/$n.ncu-rep" --page source --csv --print-source sass > "$OUT/$n.sass.csv" 2>&1
  echo "$row: $(wc -l < "$OUT/$n.sass.csv") SASS lines"
done
