// Device forms of the xqa_decode engine helpers (helpers.h): extra entry points of every xqa_decode module, so
// a warmed-up cache serves them with no compile. Launched on the caller's stream by ktune::xqa::pack_draft_mask
// and build_q_cu_seq_lens (helpers.cpp): no allocation, no host read, graph-capturable.
//
// Device data is trusted as the decode kernel trusts it, and clamped the same way so that nothing is written out
// of bounds: a request length outside [0, max_q_len] counts as its nearest bound, and rows outside [0, rows) are
// never written. The host forms reject such data instead (errors name the entry).
#pragma once

#include "xqa_decode/helpers.h"

namespace ktune_xqa {

template <class S>
struct HelperTraits {
  static constexpr int kWords = (S::kMaxQLen + 31) / 32;                      // W: words per mask row
  static constexpr int kMaskItems = S::kMaxQLen * kWords;                     // (row, word) pairs per request
  static constexpr int kMaskThreads = (kMaskItems + 31) / 32 * 32;
};

__device__ __forceinline__ int clamp_len(int n, int hi) { return n < 0 ? 0 : (n > hi ? hi : n); }

// One CTA per request (grid.x = batch), one thread per (query row, word) of the request. Rows that belong to no
// request (ragged: past q_cu_seq_lens[batch]) are left as they are: the decode never reads them.
template <class S>
__global__ void __launch_bounds__(HelperTraits<S>::kMaskThreads) draft_mask_kernel(const __grid_constant__ DraftMaskParams p) {
  using H = HelperTraits<S>;
  const int t = threadIdx.x, b = blockIdx.x;
  if (t >= H::kMaskItems || b >= p.batch) return;
  const int i = t / H::kWords, w = t % H::kWords;
  long long start;
  int n;
  if (p.q_cu_seq_lens) {
    start = p.q_cu_seq_lens[b];
    n = p.q_cu_seq_lens[b + 1] - p.q_cu_seq_lens[b];
  } else {
    start = (long long)b * p.q_len;
    n = p.q_len;
  }
  n = clamp_len(n, S::kMaxQLen);
  if (i >= n) return;
  const long long row = start + i;
  if (row < 0 || row >= p.rows) return;
  // out is 4-byte aligned (checked on the host): the uint16 pair, low half first, is one little-endian word
  reinterpret_cast<unsigned*>(p.out)[row * H::kWords + w] = draft_mask_row_word(p, row, i, n, w);
}

// q_cu_seq_lens from q_lens in one CTA for any batch: the CTA scans blockDim.x entries at a time (warp shuffles,
// then the warp totals) and carries the running total across chunks.
template <class S>
__global__ void __launch_bounds__(1024) cu_seq_lens_kernel(const __grid_constant__ CuSeqLensParams p) {
  __shared__ int warp_total[32];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, warps = blockDim.x >> 5;
  int carry = 0;
  for (int base = 0; base < p.batch; base += blockDim.x) {
    const int idx = base + t;
    const int v = idx < p.batch ? clamp_len(p.q_lens[idx], S::kMaxQLen) : 0;
    int x = v;
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane == 31) warp_total[warp] = x;
    __syncthreads();
    if (warp == 0) {
      int s = lane < warps ? warp_total[lane] : 0;
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += y;
      }
      warp_total[lane] = s;  // inclusive over warps
    }
    __syncthreads();
    if (idx < p.batch) p.q_cu_seq_lens[idx] = carry + (warp > 0 ? warp_total[warp - 1] : 0) + x - v;
    carry += warp_total[warps - 1];
    __syncthreads();  // warp_total is rewritten by the next chunk
  }
  if (t == 0) p.q_cu_seq_lens[p.batch] = carry;
}

}  // namespace ktune_xqa
