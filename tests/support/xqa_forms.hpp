// The tensors of a random xqa case in the forms engines hold them: q a slice of a wider (fused QKV) buffer or
// head-major, out with padded rows, K and V as a pair (separate tensors, V before K in one buffer, a stacked
// [2, num_pages, ...] tensor, or the views kv[:, 0] / kv[:, 1] of the combined cache), and the scales split
// between the float forms and device-held ones. Host byte buffers: the [host] tests point the arguments at
// them, the [gpu] tests at device copies (set_args takes the base of each).
#pragma once

#include <cstdint>
#include <vector>

#include "ktune/xqa_decode.hpp"
#include "support/random_inputs.hpp"

namespace ktune::test {

enum class XqaKvForm { combined, separate, v_before_k, stacked, views };

struct XqaForms {
  XqaKvForm kv_form = XqaKvForm::combined;
  std::vector<unsigned char> q;    // strided q; bytes outside its rows are NaN
  int64_t q_stride_token = 0, q_stride_head = 0;
  std::vector<unsigned char> out;  // strided out, every byte 0xFF (poison) until the call
  int64_t out_stride_token = 0, out_stride_head = 0;
  std::vector<unsigned char> kv;   // the buffer the pair points into (views: a copy of the combined cache)
  size_t k_offset = 0, v_offset = 0;  // bytes into kv
  int64_t kv_page_stride = 0;
  float scale_values[4] = {1, 1, 1, 1};  // the device-held q, k, v, o scales (multiplied with the float forms)
};

// head_major_q: q stored [num_q_heads, num_tokens, head_dim] (the head stride is the large one); else q is
// heads [0, num_q_heads) of a [num_tokens, num_q_heads + 2 * num_kv_heads, head_dim] buffer.
XqaForms make_xqa_forms(const XqaRandomCase& c, XqaKvForm kv_form, bool head_major_q);

// The case's arguments (host_args) moved onto the forms: q, out, the cache and the device-scale pointers at the
// given bases (host arrays or their device copies). The float scales are the case's divided by the device
// values, so their products are the case's scales.
void set_xqa_forms(XqaDecodeArgs& a, const XqaRandomCase& c, const XqaForms& f, const void* q, void* out,
                   const void* kv, const float* scales);

// Strided out bytes (as written) -> the dense [num_tokens, num_q_heads, head_dim] bytes xqa_compare reads;
// *pad_clobbered counts bytes outside every row that are no longer 0xFF.
std::vector<unsigned char> gather_xqa_out(const XqaRandomCase& c, const XqaForms& f,
                                          const std::vector<unsigned char>& out, long long* pad_clobbered);

}  // namespace ktune::test
