// Online-softmax helpers (base-2 domain: logits are pre-multiplied by log2(e)).
//
// One definition for both targets: the CUDA kernels (NVRTC) get the device fast paths (ex2.approx, rcp.approx,
// quad shuffles); the host kernels (LLVM host backend, KTUNE_HOST_JIT) and host tools get portable C++ with
// the same contracts and no library calls (fast_exp2 is a polynomial the vectorizer can widen). The row
// finalization (sinks in the denominator, normalization, LSE) is shared text.
#pragma once
#include "common/numerics.cuh"

namespace ktune_common {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

#if defined(__CUDACC__)
#define KT_SOFTMAX_FN __device__ __forceinline__
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
KT_DEV float kt_fmax(float a, float b) { return fmaxf(a, b); }
KT_DEV float kt_log2(float x) { return log2f(x); }
#else
// ---- host: portable C++17, no headers, no libm except kt_log2 (once per row) ----
#define KT_SOFTMAX_FN inline
inline float neg_inf() { return f32_from_bits(0xff800000u); }
inline float kt_fmax(float a, float b) { return a > b ? a : (b == b ? b : a); }  // fmaxf: NaN loses
// 2^x to ~2 ulp, branch-free (vectorizable): x = n + f with n = round(x), |f| <= 1/2, 2^f by a degree-6
// polynomial (Chebyshev interpolation of 2^f on [-1/2, 1/2]: truncation error < 3e-9 relative), 2^n by building
// the exponent. Inputs <= -127 give 0 (flush, like ex2.approx.ftz), >= 128 give +inf, NaN stays NaN.
inline float fast_exp2(float x) {
  const float xs = x == x ? x : 0.f;  // NaN: returned below; keep the int conversion defined
  const float xc = xs < -127.f ? -127.f : (xs > 128.f ? 128.f : xs);
  const float r = (xc + 12582912.f) - 12582912.f;  // round to nearest (1.5 * 2^23 shifts the fraction out)
  const float f = xc - r;
  float p = 1.546144469646172e-04f;
  p = p * f + 1.3400428177419153e-03f;
  p = p * f + 9.61805667852609e-03f;
  p = p * f + 5.550327226670944e-02f;
  p = p * f + 2.4022650922288827e-01f;
  p = p * f + 6.931472067028321e-01f;
  p = p * f + 1.0f;
  const int n = static_cast<int>(r);
  const float scale = f32_from_bits(static_cast<unsigned>(n + 127 > 0 ? n + 127 : 0) << 23);  // 2^n; 0 for n = -127
  const float y = p * scale;
  return x != x ? x : y;
}
inline float merge_weight(float m, float M) { return m == neg_inf() ? 0.f : fast_exp2(m - M); }
inline float softcap_log2(float y, float cap_log2e) {
  const float e = fast_exp2(y * (2.f * kLog2e));
  return cap_log2e * (1.f - 2.f / (e + 1.f));
}
inline float kt_log2(float x) { return __builtin_log2f(x); }
#endif

// The max step of an online softmax (base 2) for one row: m_new is max(m_run, the tile's max), taken by the
// caller with its target's max. Sets m_run = m_new and returns the max the tile's exponents subtract, m_use (0
// while the row has seen only masked logits: no NaN from -inf - -inf), and alpha = exp2(old m_run - m_use), the
// factor the row's running sum and output take.
struct MaxStep {
  float m_use, alpha;
};
KT_SOFTMAX_FN MaxStep online_max_step(float& m_run, float m_new) {
  MaxStep st;
  st.m_use = m_new == neg_inf() ? 0.f : m_new;
  st.alpha = fast_exp2(m_run - st.m_use);
  m_run = m_new;
  return st;
}

#if !defined(__CUDACC__)
// One online-softmax step of a host kernel over a tile of scores (base 2): sr[0, ntp) holds the tile's logits,
// ntp a multiple of kLanes (padding = -inf); m and l are the row's running max and sum. Rewrites sr to the
// tile's probabilities exp2(sr - m_new), updates m and l, and returns alpha = exp2(m_old - m_new), the factor
// the row's running output takes. Lane-wise max and sum keep every loop vectorizable.
template <int kLanes>
inline float host_softmax_tile(float* sr, int ntp, float& m, float& l) {
  float lane[kLanes];
  for (int v = 0; v < kLanes; ++v) lane[v] = neg_inf();
  for (int t = 0; t < ntp; t += kLanes)
    for (int v = 0; v < kLanes; ++v) lane[v] = sr[t + v] > lane[v] ? sr[t + v] : lane[v];
  float mx = neg_inf();
  for (int v = 0; v < kLanes; ++v) mx = lane[v] > mx ? lane[v] : mx;
  const MaxStep st = online_max_step(m, m > mx ? m : mx);
  const float m_use = st.m_use, alpha = st.alpha;
  for (int t = 0; t < ntp; ++t) sr[t] = fast_exp2(sr[t] - m_use);
  for (int v = 0; v < kLanes; ++v) lane[v] = 0.f;
  for (int t = 0; t < ntp; t += kLanes)
    for (int v = 0; v < kLanes; ++v) lane[v] += sr[t + v];
  float sum = 0.f;
  for (int v = 0; v < kLanes; ++v) sum += lane[v];
  l = l * alpha + sum;
  return alpha;
}
#endif

// Final normalization of one row from its merged (max, sum) in the log2 domain, sinks added to the
// denominator only. A row with nothing visible (and no sink) gets scale 0 (O = 0), lse = -inf.
struct RowFinal {
  float scale;  // multiplies the unnormalized O
  float lse;    // natural log
};
KT_SOFTMAX_FN RowFinal finalize_row(float M, float Lsum, bool has_sink, float sink, float out_scale) {
  RowFinal f;
  float Mx = M, fm = 1.f, Lt = Lsum;
  if (has_sink) {
    float s2 = sink * kLog2e;
    Mx = kt_fmax(M, s2);
    fm = merge_weight(M, Mx);
    Lt = Lsum * fm + merge_weight(s2, Mx);
  }
  if (Lt > 0.f) {
    f.scale = out_scale * fm / Lt;
    f.lse = (Mx + kt_log2(Lt)) * kLn2;
  } else {
    f.scale = 0.f;
    f.lse = neg_inf();
  }
  return f;
}

}  // namespace ktune_common
