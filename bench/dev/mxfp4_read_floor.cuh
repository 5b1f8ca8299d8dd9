// The read floor of the MXFP4 dev harnesses: every byte of the packed weight and the scales read once, 16 B per
// lane, 8 loads in flight per lane, grid-stride. Nothing is stored unless the fold hits one magic value, so the
// kernel moves only the bytes it reads while its loads stay live.
#pragma once
#include "common/global_load.cuh"

namespace mxfp4_dev {
namespace kc = ::ktune_common;

__global__ void __launch_bounds__(512) read_all(const uint4* __restrict__ w, long long n16, const uint4* __restrict__ s,
                                               long long s16, unsigned* out) {
  unsigned fold = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      v[u] = make_uint4(0, 0, 0, 0);
      kc::ld_stream_v4(v[u], w + i + u * stride, true);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) fold ^= w[i].x ^ w[i].y ^ w[i].z ^ w[i].w;
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < s16; j += stride)
    fold ^= s[j].x ^ s[j].y ^ s[j].z ^ s[j].w;
  if (fold == 0x9E3779B9u) out[0] = fold;  // one word at most: the loads stay live
}

}  // namespace mxfp4_dev
