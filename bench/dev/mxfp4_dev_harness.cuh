// What the MXFP4 dev harnesses share: a counter hash for random device data (fresh seeds cost nothing), the
// per-call timing (L2 flushed, 256 MB written, before every call; CUDA events around the call alone; median of
// `reps` calls after 3 warm-up calls) and the comparison of two bf16 outputs.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common/numerics.cuh"
#include "cuda_check.hpp"

namespace dev_timing {

__device__ __forceinline__ unsigned hash32(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return unsigned(x);
}

constexpr size_t kFlushBytes = size_t(256) << 20;

// The flush buffer, allocated on first use and kept for the process.
inline void* flush_buffer() {
  static void* buf = nullptr;
  if (!buf) CK(cudaMalloc(&buf, kFlushBytes));
  return buf;
}

template <class F>
double median_us(F&& launch, int reps = 25) {
  void* flush = flush_buffer();
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) {
    CK(cudaMemsetAsync(flush, i & 0xFF, kFlushBytes));
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    CK(cudaEventElapsedTime(&t[i], e0, e1));
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[reps / 2] * 1e3;
}

// got against ref (bf16 bits, same length): NaN counts, and over the elements where both are numbers the largest
// |got - ref| / max(|ref|, rms(ref)) (at `worst`), the norm of the difference over the norm of ref, and how many
// outputs differ in any bit.
struct Bf16Diff {
  size_t nan_ref = 0, nan_got = 0, differ = 0, worst = 0;
  double max_rel = 0, norm_rel = 0;
};

inline Bf16Diff diff_bf16(const std::vector<unsigned short>& ref, const std::vector<unsigned short>& got) {
  namespace kc = ::ktune_common;
  Bf16Diff d;
  double ss = 0, num = 0;
  for (unsigned short r : ref) {
    const float v = kc::bf16_to_float(r);
    if (std::isnan(v)) ++d.nan_ref;
    else ss += double(v) * v;
  }
  const double rms = std::sqrt(ss / double(ref.size())) + 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = kc::bf16_to_float(ref[i]), v = kc::bf16_to_float(got[i]);
    if (ref[i] != got[i]) ++d.differ;
    if (std::isnan(v)) {
      ++d.nan_got;
      continue;
    }
    if (std::isnan(r)) continue;
    const double rel = std::fabs(v - r) / std::max(std::fabs(r), rms);
    num += (v - r) * (v - r);
    if (rel > d.max_rel) {
      d.max_rel = rel;
      d.worst = i;
    }
  }
  d.norm_rel = std::sqrt(num / (ss + 1e-300));
  return d;
}

}  // namespace dev_timing
