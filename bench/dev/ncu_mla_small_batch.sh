#!/usr/bin/env bash
# The 8-token sparse MLA row (128 heads, top-k 2048, fp8_ds_mla) kernel by kernel: how much of a call is the
# decode kernel and how much the split-KV combine, and the decode kernel's memory traffic (the fp32 partials it
# writes: 8 tokens x 128 heads x 512 x 8 splits x 4 B = 16.8 MB), under Nsight Compute with the launch's own
# config. H200, with the pack of bench/run_h200.sh (its all.db holds the bench's kernels):
#   OUT=... bash bench/dev/ncu_mla_small_batch.sh
# Writes $OUT/mla_t8.csv (ncu's raw page) and prints per kernel the median duration over the profiled launches.
set -euo pipefail
source "$(dirname "$0")/ncu_pack_env.sh"
# Skip the warm-up calls; profile 20 launches (decode + combine pairs) of the timed loop.
"$NCU" --clock-control none -k regex:'decode_kernel|combine' --launch-skip 40 --launch-count 20 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
  --csv --page raw "$P/bin/bench_sparse_mla" run --rows "T8 fp8" --own-only --reps 30 > "$OUT/mla_t8.csv"
python3 - "$OUT/mla_t8.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
head = rows[0]
name, cols = head.index("Kernel Name"), [c for c in head if c.startswith(("gpu__", "dram__", "lts__"))]
by = {}
for r in rows[2:]:
    by.setdefault(r[name].split("(")[0], []).append(r)
units = rows[1]
print("| kernel | launches | " + " | ".join(f"{c} ({units[head.index(c)]})" for c in cols) + " |")
print("|---|---|" + "---|" * len(cols))
for k, rs in by.items():
    med = [statistics.median(float(x[head.index(c)].replace(",", "")) for x in rs) for c in cols]
    print(f"| {k} | {len(rs)} | " + " | ".join(f"{m:,.0f}" for m in med) + " |")
PY
