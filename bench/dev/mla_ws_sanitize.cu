// One small launch of each sparse_mla_decode sm_90a kernel for compute-sanitizer (synccheck, racecheck, memcheck):
// 128 heads, top-k 512, 6 tokens over a 512-slot fp8_ds_mla cache (so most rows are gathered several times), about
// 5% of the entries -1 and token 4 with every entry -1; splits 1, 3 (uneven) and 5 (the last split has no tile).
// The warp-specialized kernel's output and LSE, alone and paired (decode_kernel_ws_pair), are compared with the
// library's default wgmma kernel on the same inputs; exit status 1 when they differ beyond bf16 rounding. Built with -lineinfo so the tools name lines.
//   nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev \
//        bench/dev/mla_ws_sanitize.cu -o .devbuild/mla_ws_sanitize
//   compute-sanitizer --tool synccheck .devbuild/mla_ws_sanitize
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sparse_mla_decode/kernel_ws.cuh"
#include "mla_dev_launch.hpp"

namespace ktune_mla {
using BaseSpec = DevBaseSpec<512>;
using WsSpec = DevWsSpec<512>;
}  // namespace ktune_mla
using namespace ktune_mla;

int main() {
  const int tokens = 6, all_skip = 4;
  const MlaDevInputs host = make_mla_dev_inputs(tokens, 512, 8, 64, true, 5, all_skip);
  Params p = upload_mla_dev_inputs(host, 8);
  p.num_tokens = tokens;
  constexpr Shape bs = Traits<BaseSpec>::sh;
  constexpr Shape ws = WsTraits<WsSpec>::sh;
  int failures = 0;
  for (int pair = 0; pair < 2; ++pair)
  for (int splits : {1, 3, 5}) {
    p.num_splits = splits;
    std::vector<unsigned short> ref_out, ws_out;
    std::vector<float> ref_lse, ws_lse;
    launch_and_read<BaseSpec>(decode_kernel<BaseSpec>, bs.threads, bs.smem_total, p, tokens, splits, ref_out, ref_lse);
    if (pair)
      launch_and_read<BaseSpec>(decode_kernel_ws_pair<WsSpec>, 384, ws.smem_total, p, tokens, splits, ws_out, ws_lse);
    else
      launch_and_read<BaseSpec>(decode_kernel_ws<WsSpec>, 384, ws.smem_total, p, tokens, splits, ws_out, ws_lse);
    const MlaDiff d = compare_mla_outputs(ref_out, ref_lse, ws_out, ws_lse);
    const bool ok = d.within_bf16();
    failures += !ok;
    std::printf("%s splits %d: rel L2 out %.2e, max |lse diff| %.2e, mismatched non-finite %zu: %s\n",
                pair ? "pair" : "one", splits, d.rel_out, d.lse_worst, d.bad, ok ? "ok" : "FAILED");
  }
  return failures ? 1 : 0;
}
