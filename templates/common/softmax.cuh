// Online-softmax helpers (base-2 domain: logits are pre-multiplied by log2(e)).
#pragma once
#include "common/numerics.cuh"

namespace ktune_common {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

#if defined(__CUDACC__)
KT_DEV float neg_inf() { return __int_as_float(0xff800000); }
// Reductions over the 4 lanes of an mma quad (lanes 4g .. 4g+3 hold one accumulator row).
KT_DEV float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
KT_DEV float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
// Weight of a partial with running max m inside a total with max M >= m; 0 for an empty partial (m = -inf),
// never NaN.
KT_DEV float merge_weight(float m, float M) { return m == neg_inf() ? 0.f : fast_exp2(m - M); }
// Softcap in the log2 domain: returns cap*log2e * tanh(y), with tanh from ex2 (accurate to ~1e-6 absolute).
KT_DEV float softcap_log2(float y, float cap_log2e) {
  float e = fast_exp2(y * (2.f * kLog2e));
  return cap_log2e * (1.f - 2.f * fast_rcp(e + 1.f));
}
#endif

}  // namespace ktune_common
