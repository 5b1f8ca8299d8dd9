#!/usr/bin/env bash
# Builds bench/dev/mxfp4_ab.cu: the working tree's templates/mxfp4_gemm/kernel.cuh against the same file at REV
# (default HEAD), on the CPU machine with nvcc (sm_90a). Writes .devbuild/mxfp4_ab and .devbuild/mxfp4_ab.cubin
# (the same translation unit as a cubin, for `cuobjdump -sass` on the device machine).
#   bash bench/dev/mxfp4_ab.sh [REV]
# Run on the device: .devbuild/mxfp4_ab [CASE_SUBSTRING]  (prints per-case checks, then the table; exit 1 on a
# mismatch).
set -euo pipefail
cd "$(dirname "$0")/../.."
rev="${1:-HEAD}"
mkdir -p .devbuild
# The old file in its own namespace; its cta_rows call is qualified so argument-dependent lookup (Params lives in
# ktune_mxfp4) does not also find the new file's.
git show "$rev:templates/mxfp4_gemm/kernel.cuh" |
  sed -e 's/^namespace ktune_mxfp4 {/namespace ktune_mxfp4_old {\nusing ::ktune_mxfp4::Params; using ::ktune_mxfp4::Shape;\nusing ::ktune_mxfp4::make_shape; using ::ktune_mxfp4::shape_error;/' \
      -e 's|}  // namespace ktune_mxfp4$|}  // namespace ktune_mxfp4_old|' \
      -e 's/if (!cta_rows</if (!ktune_mxfp4_old::cta_rows</' > .devbuild/mxfp4_kernel_old.cuh
flags=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev -I.
       "-DKTUNE_AB_OLD=\".devbuild/mxfp4_kernel_old.cuh\"" -diag-suppress 128,1886)
nvcc "${flags[@]}" -Xptxas -v bench/dev/mxfp4_ab.cu -o .devbuild/mxfp4_ab 2>&1 | grep -E "error|warning|gemm_kernel|registers|spill" | \
  sed -e 's/ptxas info    : //'
nvcc "${flags[@]}" -cubin bench/dev/mxfp4_ab.cu -o .devbuild/mxfp4_ab.cubin
echo "built .devbuild/mxfp4_ab (old: $rev)"
