#include "xqa_forms.hpp"

#include <cstring>

#include "common/dtype.h"

namespace ktune::test {

namespace kc = ::ktune_common;

namespace {

void fill_nan(int dtype, unsigned char* dst, size_t bytes) {
  const size_t es = kc::dtype_size(dtype);
  for (size_t i = 0; i + es <= bytes; i += es) {
    if (dtype == kc::kE4M3) dst[i] = 0x7F;
    else {
      const unsigned short v = dtype == kc::kBF16 ? 0x7FC0 : 0x7E00;
      std::memcpy(dst + i, &v, 2);
    }
  }
}

}  // namespace

XqaForms make_xqa_forms(const XqaRandomCase& c, XqaKvForm kv_form, bool head_major_q) {
  const auto& p = c.problem;
  const int64_t D = p.head_dim, HQ = p.num_q_heads, HKV = p.num_kv_heads, T = c.num_tokens;
  XqaForms f;
  f.kv_form = kv_form;

  // q
  const int qt = int(p.q_dtype);
  const size_t qes = kc::dtype_size(qt);
  if (head_major_q) {
    f.q_stride_token = D;
    f.q_stride_head = T * D;
    f.q.resize(size_t(HQ * T * D + 16) * qes);
  } else {
    f.q_stride_token = (HQ + 2 * HKV) * D;
    f.q_stride_head = D;
    f.q.resize(size_t(T * (HQ + 2 * HKV) * D + 16) * qes);
  }
  fill_nan(qt, f.q.data(), f.q.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < HQ; ++h)
      std::memcpy(f.q.data() + (t * f.q_stride_token + h * f.q_stride_head) * qes, c.q.data() + ((t * HQ + h) * D) * qes,
                  D * qes);

  // out: every row padded by 8 elements, tokens by one more padded row
  const size_t oes = kc::dtype_size(int(p.out_dtype));
  f.out_stride_head = D + 8;
  f.out_stride_token = (HQ + 1) * f.out_stride_head;
  f.out.assign(size_t(std::max<int64_t>(T, 1) * f.out_stride_token) * oes, 0xFF);

  // K and V
  const int kvt = int(p.kv_dtype);
  const int64_t es = kc::dtype_size(kvt);
  const int64_t page = HKV * p.page_size * D, pages = c.num_pages;
  auto page_of = [&](int64_t i, int kv) { return c.kv.data() + (i * 2 + kv) * page * es; };
  switch (kv_form) {
    case XqaKvForm::combined:
      f.kv = c.kv;
      break;
    case XqaKvForm::separate: {  // K then V, a padded page stride, 256 NaN bytes between them
      f.kv_page_stride = page + 64;
      const size_t k_bytes = size_t(pages * f.kv_page_stride * es);
      f.kv.resize(2 * k_bytes + 256);
      fill_nan(kvt, f.kv.data(), f.kv.size());
      f.k_offset = 0;
      f.v_offset = k_bytes + 256;
      break;
    }
    case XqaKvForm::v_before_k: {  // V first: the V-minus-K distance is negative
      const size_t bytes = size_t(pages * page * es);
      f.kv.resize(2 * bytes + 512);
      fill_nan(kvt, f.kv.data(), f.kv.size());
      f.v_offset = 0;
      f.k_offset = bytes + 512;
      break;
    }
    case XqaKvForm::stacked: {  // [2, num_pages, page...]: kv[0], kv[1]
      const size_t bytes = size_t(pages * page * es);
      f.kv.resize(2 * bytes);
      f.k_offset = 0;
      f.v_offset = bytes;
      break;
    }
    case XqaKvForm::views:  // kv[:, 0], kv[:, 1] of the combined cache
      f.kv = c.kv;
      f.k_offset = 0;
      f.v_offset = size_t(page * es);
      f.kv_page_stride = 2 * page;
      break;
  }
  if (kv_form == XqaKvForm::separate || kv_form == XqaKvForm::v_before_k || kv_form == XqaKvForm::stacked) {
    const int64_t stride = f.kv_page_stride ? f.kv_page_stride : page;
    for (int64_t i = 0; i < pages; ++i) {
      std::memcpy(f.kv.data() + f.k_offset + i * stride * es, page_of(i, 0), page * es);
      std::memcpy(f.kv.data() + f.v_offset + i * stride * es, page_of(i, 1), page * es);
    }
  }

  // Device-held scales: powers of two, so the products are exact.
  f.scale_values[0] = 0.5f;
  f.scale_values[1] = 2.f;
  f.scale_values[2] = 0.25f;
  f.scale_values[3] = 0.5f;
  return f;
}

void set_xqa_forms(XqaDecodeArgs& a, const XqaRandomCase& c, const XqaForms& f, const void* q, void* out,
                   const void* kv, const float* scales) {
  (void)c;
  a.q = q;
  a.q_stride_token = f.q_stride_token;
  a.q_stride_head = f.q_stride_head;
  a.out = out;
  a.out_stride_token = f.out_stride_token;
  a.out_stride_head = f.out_stride_head;
  const unsigned char* base = static_cast<const unsigned char*>(kv);
  if (f.kv_form == XqaKvForm::combined) {
    a.kv_cache = kv;
  } else {
    a.kv_cache = nullptr;
    a.k_cache = base + f.k_offset;
    a.v_cache = base + f.v_offset;
    a.kv_page_stride = f.kv_page_stride;
  }
  a.q_scale_ptr = scales + 0;
  a.k_scale_ptr = scales + 1;
  a.v_scale_ptr = scales + 2;
  a.o_scale_ptr = scales + 3;
  // The float forms times the device values give the case's scales (q_scale, o_scale: host_args' 0.25; with a
  // 16-bit Q / output the device q / o scales must be ignored, like the float ones).
  a.q_scale /= f.scale_values[0];
  a.k_scale /= f.scale_values[1];
  a.v_scale /= f.scale_values[2];
  a.o_scale /= f.scale_values[3];
}

std::vector<unsigned char> gather_xqa_out(const XqaRandomCase& c, const XqaForms& f,
                                          const std::vector<unsigned char>& out, long long* pad_clobbered) {
  const auto& p = c.problem;
  const int64_t D = p.head_dim, HQ = p.num_q_heads, T = c.num_tokens;
  const size_t es = kc::dtype_size(int(p.out_dtype));
  std::vector<unsigned char> dense(size_t(std::max<int64_t>(T, 1) * HQ * D) * es, 0xFF);
  std::vector<unsigned char> is_row(out.size(), 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < HQ; ++h) {
      const size_t off = size_t(t * f.out_stride_token + h * f.out_stride_head) * es;
      std::memcpy(dense.data() + size_t((t * HQ + h) * D) * es, out.data() + off, D * es);
      std::memset(is_row.data() + off, 1, D * es);
    }
  long long bad = 0;
  for (size_t i = 0; i < out.size(); ++i) bad += !is_row[i] && out[i] != 0xFF;
  *pad_clobbered = bad;
  return dense;
}

}  // namespace ktune::test
