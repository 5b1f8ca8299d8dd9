#!/usr/bin/env bash
# Where the compile time of the sparse MLA decode kernels goes (CPU only). For each default sm_90a config module
# of `ktune compile --family sparse_mla_decode` (the paired .wsp and the 16-head .ws kernel), the generated source
# is compiled by NVRTC with the runtime's options (bench/dev/nvrtc_phases.cpp: NVRTC's own time trace splits
# front end, NVVM and ptxas; the fastest of 5 compiles per phase), once as shipped and
# once per variant that leaves one role's work out of a copy of templates/ (wrong results; compile time only):
#   no producer      the producer warpgroup's gather and conversion (produce_ws)
#   no Q.K^T         warpgroup 0's score wgmma (scores set to 0)
#   no P.V regs      warpgroup 0's P.V from registers
#   no P.V smem      warpgroup 1's P.V from shared memory
#   plain epilogue   the epilogue (write_rows_staged: bf16 rows, or write_partials: fp32 split partials; the row
#                    statistics) replaced by one unrolled loop of float4 stores of the accumulators, which keeps
#                    them all live
#   no consumers     (.ws, 16 heads) everything after the roles split but the producers
# usage: bash bench/dev/mla_compile_parts.sh [BUILD_DIR]   (needs BUILD_DIR/bin/ktune; default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
KTUNE_DUMP=$tmp/src "$build/bin/ktune" compile --family sparse_mla_decode --arch sm_90a --cache "$tmp/c.db" -j 2 >/dev/null

variant() {  # variant NAME 'OLD LINE' 'NEW LINE': a copy of templates/ with one statement of kernel_ws.cuh replaced
  cp -r templates "$tmp/$1"
  python3 - "$tmp/$1/sparse_mla_decode/kernel_ws.cuh" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1:]
s = open(path).read()
if old not in s:
    sys.exit(f"mla_compile_parts.sh: statement not found in kernel_ws.cuh: {old}")
open(path, "w").write(s.replace(old, new, 1))
EOF
}
variant no_producer '    produce_ws<S, kPair>(p, smem, t_begin, ntiles, token, warp - 8, lane);' ''
variant no_qk '      qk_wgmma_regs<HG, TN, TN, D>(d, sb + sh.off_q, sK, 0);' \
              '      for (int i = 0; i < TN / 2; ++i) d[i] = 0.f;'
variant no_pv_regs '      pv_wgmma_regs<TN, COLS>(o, d, sK, 0);' ''
variant no_pv_smem '      pv_wgmma<TN, COLS>(o, sP, sK, COLS);' ''
variant plain_epilogue \
  '  if (p.num_splits == 1)
    write_rows_staged<S>(p, o, s_m, s_l, smem + sh.off_q, h0, token, warp, lane, tid);
  else
    write_partials<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);' \
  '#pragma unroll
  for (int n = 0; n < COLS / 8; ++n)
    *reinterpret_cast<float4*>(p.workspace + 2 * tid + 1024 * n) = make_float4(o[0][n][0], o[0][n][1], o[0][n][2], o[0][n][3]);'
variant no_producer16 '    produce_ws<S, false>(p, smem, t_begin, ntiles, token, warp - 4 * wg, lane, wg - 1);' ''
variant no_consumers16 '  const auto consumer_sync = [] { ws::bar_sync(ws::kBarConsumer, 128); };' \
                       '  return;
  const auto consumer_sync = [] { ws::bar_sync(ws::kBarConsumer, 128); };'

g++ -O2 -std=c++17 bench/dev/nvrtc_phases.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnvrtc \
  -o "$tmp/nvrtc_phases"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); NVRTC of $(nvcc --version | tail -1)"
echo
echo "| kernel | variant | front end ms | NVVM ms | ptxas ms | NVRTC wall ms |"
echo "|---|---|---|---|---|---|"
for cfg in wsp ws; do
  src=$(ls "$tmp"/src/*."$cfg".cu)
  if [[ $cfg == wsp ]]; then
    entry="ktune_mla::decode_kernel_ws_pair<ktune_mla::Spec>" variants=(shipped no_producer no_qk no_pv_regs no_pv_smem plain_epilogue)
  else
    entry="ktune_mla::decode_kernel_ws<ktune_mla::Spec>" variants=(shipped no_producer16 no_consumers16)
  fi
  for v in "${variants[@]}"; do
    inc=templates; [[ $v == shipped ]] || inc=$tmp/$v
    # Per column the fastest of 5 compiles: the least disturbed by whatever else runs on the machine.
    best=$(for i in 1 2 3 4 5; do "$tmp/nvrtc_phases" "$src" "$inc" "$entry"; done |
           awk 'NR == 1 || $1 < a { a = $1 } NR == 1 || $2 < b { b = $2 } NR == 1 || $3 < c { c = $3 }
                NR == 1 || $4 < d { d = $4 } END { printf "%d | %d | %d | %d", a, b, c, d }')
    echo "| $(basename "$src" .cu | sed 's/.*q1_//') | $v | $best |"
  done
done
