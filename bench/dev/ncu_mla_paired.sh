#!/usr/bin/env bash
# The 128-head paired sparse MLA kernel (t64.s2.g64.wsp, 64 tokens, top-k 2048, fp8_ds_mla, one split) under
# Nsight Compute: how busy the tensor pipe is, how much shared-memory bandwidth the wgmma operands and the
# producer's stores take, and where the warps stall. With the pack of bench/run_h200.sh (its all.db holds the
# bench's kernels), on the GPU:
#   OUT=... bash bench/dev/ncu_mla_paired.sh
# Writes $OUT/ncu_paired_details.txt (ncu's section tables for two launches) and $OUT/ncu_paired_metrics.csv
# (GMMA instructions, shared-memory and instruction counters). The tensor pipe's busy share is the details'
# "Shared" pipeline figure (its tensor sub-pipe dominates it); ncu of CUDA 13 left a requested
# sm__pipe_tensor_op_gmma_cycles_active out of the CSV without an error, so it is not asked for.
set -uo pipefail
source "$(dirname "$0")/ncu_pack_env.sh"
run=("$P/bin/bench_sparse_mla" run --rows "h128 k2048 T64 fp8" --own-only --reps 10)
common=(--clock-control none -k regex:decode_kernel_ws_pair --launch-skip 8 --launch-count 2)
"$NCU" "${common[@]}" --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
  "${run[@]}" > "$OUT/ncu_paired_details.txt" 2>&1
echo "details: exit $?"
metrics=sm__inst_executed_pipe_tensor_op_gmma.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed
metrics+=,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,gpu__time_duration.sum
"$NCU" "${common[@]}" --metrics "$metrics" --csv --page raw "${run[@]}" > "$OUT/ncu_paired_metrics.csv" 2>&1
echo "metrics: exit $?"
