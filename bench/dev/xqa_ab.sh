#!/usr/bin/env bash
# Builds bench/dev/xqa_ab.cu against the xqa templates of several commits (one binary each, .devbuild/xqa_ab/<name>)
#   bench/dev/xqa_ab.sh build name=commit ...     (the working tree's templates: name=.; a templates dir: name=DIR)
#   bench/dev/xqa_ab.sh run ROUNDS name ...       (interleaved: every binary once per round)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=.devbuild/xqa_ab
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
mode=$1; shift
if [[ $mode == build ]]; then
  mkdir -p $B
  for nc in "$@"; do
    name=${nc%%=*}; commit=${nc#*=}
    if [[ $commit == . ]]; then inc=templates; elif [[ -d $commit ]]; then inc=$commit; else
      rm -rf $B/$name.src; mkdir -p $B/$name.src; git archive "$commit" templates | tar -x -C $B/$name.src
      inc=$B/$name.src/templates
    fi
    $NVCC -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I$inc -Ibench/dev -Xptxas -v bench/dev/xqa_ab.cu \
      -o $B/$name 2> $B/$name.ptxas &
  done
  wait
  for nc in "$@"; do name=${nc%%=*}; echo "$name: $(grep -o 'Used [0-9]* registers' $B/$name.ptxas | tr '\n' ' ')"; done
else
  rounds=$1; shift
  for r in $(seq "$rounds"); do for name in "$@"; do echo "== $name round $r"; $B/$name; done; done
fi
