#!/usr/bin/env bash
# Builds bench/dev/mla_small_batch.cu twice (CPU, nvcc): .devbuild/mla_small_batch against templates/ as they are,
# and .devbuild/mla_small_batch_phases against a copy with MLA_STAMP calls at the paired kernel's phase boundaries
# (entry, Q published, warpgroup 0's first tile ready, its tile loop done, the row statistics ready, the epilogue
# done; the producer's end). On the GPU run both: the first times, the second says where each CTA's time goes
# (its stamps cost a few instructions per CTA).
#   bash bench/dev/mla_phases.sh        then on the GPU: .devbuild/mla_small_batch; .devbuild/mla_small_batch_phases
set -euo pipefail
cd "$(dirname "$0")/../.."
T=.devbuild/mla_phase_templates
rm -rf $T && mkdir -p $T && cp -r templates/. $T/
python3 - $T/sparse_mla_decode/kernel_ws.cuh <<'PY'
import sys
path = sys.argv[1]
s = open(path).read()
def put(anchor, text, after=True):
    global s
    if s.count(anchor) != 1:
        sys.exit(f"mla_phases.sh: anchor not found once in kernel_ws.cuh: {anchor!r}")
    s = s.replace(anchor, anchor + text if after else text + anchor)
put("KT_DEV void decode_body_ws(const Params& p) {\n", "  MLA_STAMP(0, 0);\n")
put("  if (wg == 2) {\n    ws::regs_dec<kPair", "  MLA_STAMP(1, 0);\n", after=False)
put("      kc::mbar_wait(mb_full + 8 * b, (it / ST) & 1);\n      float d[TN / 2];\n", "      if (it == 0) MLA_STAMP(2, 0);\n")
put("    if (t4 == 0) {\n      s_m[r0] = m_run[0];", "    MLA_STAMP(3, 0);\n", after=False)
put("  kc::mbar_wait(mb_stats, 0);  // s_m / s_l from warpgroup 0\n", "  MLA_STAMP(4, 0);\n")
put("    write_partials<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);\n",
    "  MLA_STAMP(5, 0);\n")
put("    produce_ws<S, kPair>(p, smem, t_begin, ntiles, token, warp - 8, lane);\n", "    MLA_STAMP(6, 256);\n")
open(path, "w").write(s)
PY
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
flags=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Ibench/dev)
$NVCC "${flags[@]}" -Itemplates bench/dev/mla_small_batch.cu -o .devbuild/mla_small_batch 2>&1 | grep -v C7519 || true
$NVCC "${flags[@]}" -I$T bench/dev/mla_small_batch.cu -o .devbuild/mla_small_batch_phases 2>&1 | grep -v C7519 || true
ls -la .devbuild/mla_small_batch .devbuild/mla_small_batch_phases
