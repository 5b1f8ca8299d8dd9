#!/usr/bin/env bash
# The host benches in one run: for each family, the JIT-specialized host kernel vs the same source built
# ahead of time with run-time shapes (g++ -O3 -march=native) vs the run-time-shape code through the JIT's clang,
# at one realistic shape each, plus the compile time per host specialization (each bench prints its table):
#   xqa_decode         B=4, 32/8 heads, D=128, L=4096, bf16            (bench_host)
#   sparse_mla_decode  4 tokens, 16 heads, top-k 2048, page 64, fp8_ds_mla and bf16 caches (bench_host_mla)
#   mxfp4_gemm         M=16, N=K=2880, bf16 (GPT-OSS down projection)  (bench_host_mxfp4)
# One thread each (the build VM has 2 cores shared with other work; one thread is the least disturbed).
#   bench/run_host_benches.sh [BUILD_DIR]      writes $OUT (default /tmp/ktune-host-benches): *.txt, *.json
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${OUT:-/tmp/ktune-host-benches}
mkdir -p "$OUT"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"
run() {
  local name=$1; shift
  echo "== $name: $*"
  "$@" --json "$OUT/$name.json" | tee "$OUT/$name.txt"
}
run xqa "$B/bin/bench_host" --threads 1
run mla_fp8 "$B/bin/bench_host_mla" --threads 1
run mla_bf16 "$B/bin/bench_host_mla" --threads 1 --bf16
run mxfp4 "$B/bin/bench_host_mxfp4" --threads 1
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
