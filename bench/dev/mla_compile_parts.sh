#!/usr/bin/env bash
# Where the compile time of the sparse MLA decode kernels goes (CPU only). For each default sm_90a config module
# of `ktune compile --family sparse_mla_decode` (the paired .wsp and the 16-head .ws kernel), the generated source
# is compiled to PTX by nvcc and the PTX by ptxas alone (best of 5), once as shipped and
# once per variant that leaves one role's work out of a copy of templates/ (wrong results; compile time only):
#   no producer      the producer warpgroup's gather and conversion (produce_ws)
#   no Q.K^T         warpgroup 0's score wgmma (scores set to 0)
#   no P.V regs      warpgroup 0's P.V from registers
#   no P.V smem      warpgroup 1's P.V from shared memory
#   plain epilogue   write_output (bf16 rows or fp32 split partials, the row statistics) replaced by one
#                    unrolled loop of float4 stores of the accumulators, which keeps them all live
#   no consumers     (.ws, 16 heads) everything after the roles split but the producers
# usage: bash bench/dev/mla_compile_parts.sh [BUILD_DIR]   (needs BUILD_DIR/bin/ktune; default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
KTUNE_DUMP=$tmp/src "$build/bin/ktune" compile --family sparse_mla_decode --arch sm_90a --cache "$tmp/c.db" -j 2 >/dev/null

kws=templates/sparse_mla_decode/kernel_ws.cuh
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
  '  write_output<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);' \
  '#pragma unroll
  for (int n = 0; n < COLS / 8; ++n)
    *reinterpret_cast<float4*>(p.workspace + 2 * tid + 1024 * n) = make_float4(o[0][n][0], o[0][n][1], o[0][n][2], o[0][n][3]);'
variant no_producer16 '    produce_ws<S, false>(p, smem, t_begin, ntiles, token, warp - 4 * wg, lane, wg - 1);' ''
variant no_consumers16 '  const auto consumer_sync = [] { ws::bar_sync(ws::kBarConsumer, 128); };' \
                       '  return;
  const auto consumer_sync = [] { ws::bar_sync(ws::kBarConsumer, 128); };'

best_ms() {  # best_ms N CMD...: the fastest of N runs of CMD, in ms
  local n=$1 best=999999 s e; shift
  for ((i = 0; i < n; ++i)); do
    s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "mla_compile_parts.sh: failed: $*" >&2; exit 1; }; e=$(date +%s%N)
    (( (e - s) / 1000000 < best )) && best=$(( (e - s) / 1000000 ))
  done
  echo $best
}

echo "load average $(cut -d' ' -f1-3 /proc/loadavg); $(nvcc --version | tail -1)"
echo
echo "| kernel | variant | PTX lines | ptxas ms | registers |"
echo "|---|---|---|---|---|"
for cfg in wsp ws; do
  src=$(ls "$tmp"/src/*."$cfg".cu)
  if [[ $cfg == wsp ]]; then
    entry="ktune_mla::decode_kernel_ws_pair<ktune_mla::Spec>" variants=(shipped no_producer no_qk no_pv_regs no_pv_smem plain_epilogue)
  else
    entry="ktune_mla::decode_kernel_ws<ktune_mla::Spec>" variants=(shipped no_producer16 no_consumers16)
  fi
  { cat "$src"; echo "template __global__ void $entry(const __grid_constant__ ktune_mla::Params);"; } > "$tmp/$cfg.cu"
  for v in "${variants[@]}"; do
    inc=templates; [[ $v == shipped ]] || inc=$tmp/$v
    ptx=$tmp/$cfg.$v.ptx
    nvcc -arch=sm_90a -std=c++17 -ptx -w -DKTUNE_NVRTC=1 -I"$inc" "$tmp/$cfg.cu" -o "$ptx"
    back=$(best_ms 5 ptxas -arch=sm_90a "$ptx" -o "$tmp/a.cubin")
    regs=$(ptxas -arch=sm_90a -v "$ptx" -o "$tmp/a.cubin" 2>&1 | grep -o "Used [0-9]* registers" | head -1 | grep -o "[0-9]*")
    echo "| $(basename "$src" .cu | sed 's/.*q1_//') | $v | $(wc -l < "$ptx") | $back | $regs |"
  done
done
