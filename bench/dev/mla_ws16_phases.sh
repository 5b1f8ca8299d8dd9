#!/usr/bin/env bash
# Where the 16-head warp-specialized sparse MLA kernel (t64.s2.g16.ws) spends its time: builds bench/dev/mla_ws16.cu
# against a copy of a tree's templates with one phase taken out per variant, so each variant's time is what the
# rest costs. Run on the CPU machine; run the binaries on the H200 (carry OUTDIR), e.g.
#   for v in full no_math no_produce no_loads no_store; do OUTDIR/$v 32768 | tail -4; done
# Variants (the edits below; outputs of every variant but `full` are wrong by design):
#   full        the kernel as it is
#   no_math     the consumer waits for each tile and releases it at once (the producers alone)
#   no_produce  the producers neither load nor convert, only wait for a free buffer and hand it over (the consumer alone)
#   no_loads    every row read from 64 rows that stay in cache (the loads' HBM latency out)
#   no_store    the producers load and convert, but store nothing into the bf16 tile (the stores out)
# Usage: bench/dev/mla_ws16_phases.sh [OUTDIR] [REV]   (default .devbuild/ws16_phases, HEAD)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${1:-.devbuild/ws16_phases}
REV=${2:-HEAD}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git archive "$REV" templates | tar -x -C "$SRC"
cp bench/dev/mla_ws16.cu bench/dev/cuda_check.hpp bench/dev/mla_dev_inputs.hpp "$SRC/"
python3 - "$SRC/templates/sparse_mla_decode/kernel_ws.cuh" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
def guard(old, new, macro, negate=False):
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, ("#ifndef " if negate else "#ifdef ") + macro + "\n" + new + "#else\n" + old + "#endif\n")
# consumer: release each tile right after its wait
wait = "    kc::mbar_wait(mb_full + 8 * b, (it / NB) & 1);\n"
arrive = re.search(r"    if \(it \+ NB < ntiles\) ws::mbar_arrive\(mb_empty \+ 8 \* [^;]*\);", s).group(0)
guard(wait, wait + arrive + "\n    continue;\n", "DEV_NO_MATH")
# producers: no row loads, no conversion
guard("    for (int u = 0; u < ROWS; ++u) issue(share[u], ecur[u]);\n", "\n", "DEV_NO_PRODUCE")
guard("      for (int u = 0; u < ROWS; ++u) convert(share[u], kvt, b, row_of(u));\n", "\n", "DEV_NO_PRODUCE")
# producers: rows from a 64-row window that stays in cache
guard("    const char* row = kvb + (long long)(valid ? e : 0) * RB;\n",
      "    const char* row = kvb + (long long)(e & 63) * RB;\n", "DEV_NO_LOADS")
# producers: convert, keep the result live, store nothing
old = """      store_item<LAT, TN>(RawItem{sh_.lat[k], sc[c >> 3] * kc::kE4m3Fold}, kvt, r, c);
"""
new = """      uint4 lo, hi;
      dequant_item(RawItem{sh_.lat[k], sc[c >> 3] * kc::kE4m3Fold}, lo, hi);
      const unsigned x = lo.x ^ lo.y ^ lo.z ^ lo.w ^ hi.x ^ hi.y ^ hi.z ^ hi.w;
      if (x == 0x12345678u) *reinterpret_cast<unsigned*>(kvt + tile_off(TN, r, 2 * c)) = x;
"""
guard(old, new, "DEV_NO_STORE")
rope = "    for (int k = 0; k < RPT; ++k) store_item<LAT, TN>(RawItem{sh_.rope[k], 0.f}, kvt, r, LAT / 16 + lm + 4 * k);\n"
guard(rope, "    for (int k = 0; k < 0; ++k) {}\n", "DEV_NO_STORE")
open(p, "w").write(s)
PY
build() {
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I"$SRC/templates" -I"$SRC" $2 "$SRC/mla_ws16.cu" \
    -o "$OUTDIR/$1" && strip "$OUTDIR/$1"
}
build full "" &
build no_math -DDEV_NO_MATH &
build no_produce -DDEV_NO_PRODUCE &
wait
build no_loads -DDEV_NO_LOADS &
build no_store -DDEV_NO_STORE &
wait
ls "$OUTDIR"
