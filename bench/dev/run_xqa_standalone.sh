#!/usr/bin/env bash
# Builds bench/dev/xqa_standalone (sm_90a) into .devbuild/ and runs it: correctness matrix, then the bench.
#   bench/dev/run_xqa_standalone.sh [build|check|bench|all]   (default all; check/bench reuse the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=.devbuild
mode=${1:-all}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${XQA_ARCH:-90a}
if [[ $mode == build || $mode == all ]]; then
  mkdir -p $B
  inc="-Itemplates -Iruntime/include -Itests/support"
  for f in templates/xqa_decode/spec.cpp tests/support/xqa_reference.cpp tests/support/random_inputs.cpp; do
    g++ -std=c++17 -O2 $inc -c "$f" -o "$B/$(basename "${f%.cpp}").o" &
  done
  $NVCC -std=c++17 -O2 -gencode=arch=compute_${ARCH},code=sm_${ARCH} -Xptxas -v $inc -c bench/dev/xqa_standalone.cu \
    -o $B/xqa_standalone.o 2> $B/ptxas.log
  wait
  $NVCC -o $B/xqa_standalone $B/xqa_standalone.o $B/spec.o $B/xqa_reference.o $B/random_inputs.o -lpthread
  grep -E "registers|spill" $B/ptxas.log | grep -v " 0 bytes spill" | sort | uniq -c | sort -rn | head -5 || true
fi
if [[ $mode == check || $mode == all ]]; then $B/xqa_standalone check || echo "CHECK FAILED"; fi
if [[ $mode == bench || $mode == all ]]; then $B/xqa_standalone bench; fi
