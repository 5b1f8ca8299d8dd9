// xqa_decode through the one pipeline (templates/pipeline.hpp): this file is the family's OpSpec -- its
// argument checks, plan shape and kernel parameters -- and the one-shot calls on top of prepared ops.
// Nothing here reads device memory, allocates or synchronizes.
#include "ktune/xqa_decode.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "common/softmax.cuh"
#include "ktune/xqa_decode_host.hpp"
#include "pipeline.hpp"
#include "xqa_decode/kernel_params.hpp"

namespace ktune {
namespace pipeline {

template <>
struct OpSpec<XqaDecodeFamily> : SpecBase<OpSpec<XqaDecodeFamily>, XqaDecodeFamily> {
  using Config = xqa::Config;
  static constexpr const char* kConfigGrammar =
      "a config key t<tokens_per_tile>.s<stages>.w<warps>[.m<m_tiles>], e.g. t64.s3.w4";
  static constexpr int kMaxForcedSplits = 1024;
  static constexpr bool kPdl = true;  // every entry point waits (common/pdl.cuh)
  static constexpr bool kSharedModule = true;  // the combine and the helpers (spec.hpp generate_shared)
  static constexpr int64_t kMaxStride = int64_t{1} << 40;  // elements: keeps every address product in int64

  static void need_null(const void* p, const char* field, const char* why) {
    if (p) bad(field, fmt::format("null ({})", why), launch_support::ptr_text(p));
  }
  static void need_positive(float v, const char* field) {
    if (!std::isfinite(v) || !(v > 0.f)) bad(field, "a finite value > 0", fmt::format("{}", v));
  }

  static void validate_problem(const Problem& p) { p.validate(); }

  // Exactly one cache form: kv_cache, or the (k_cache, v_cache) pair with its page stride.
  static void validate_cache(const Problem& p, const Args& a) {
    using launch_support::ptr_text;
    const bool pair = a.k_cache || a.v_cache;
    if (a.kv_cache && pair)
      bad("kv_cache", "null when the (k_cache, v_cache) pair is given (exactly one of kv_cache or the pair)",
          ptr_text(a.kv_cache));
    if (!a.kv_cache && !pair)
      bad("kv_cache", "the combined cache or the (k_cache, v_cache) pair (exactly one of them)", "neither");
    if (!pair) {
      need_ptr(a.kv_cache, "kv_cache", 16);
      if (a.kv_page_stride != 0)
        bad("kv_page_stride", "0 with kv_cache (the page stride belongs to the (k_cache, v_cache) pair)",
            std::to_string(a.kv_page_stride));
      return;
    }
    need_ptr(a.k_cache, "k_cache", 16);
    need_ptr(a.v_cache, "v_cache", 16);
    if (a.k_cache == a.v_cache) bad("v_cache", "a different address from k_cache", ptr_text(a.v_cache));
    const int64_t es = ::ktune_common::dtype_size(int(p.kv_dtype));
    const int64_t page = int64_t{p.num_kv_heads} * p.page_size * p.head_dim;
    if (a.kv_page_stride != 0 &&
        (a.kv_page_stride < page || a.kv_page_stride > kMaxStride || a.kv_page_stride * es % 16 != 0))
      bad("kv_page_stride", fmt::format("0 (dense pages) or >= one page ({} elements), <= 2^40 and a multiple of "
                                        "16 bytes ({} elements)", page, 16 / es),
          std::to_string(a.kv_page_stride));
  }

  // q and out rows: (token t, head h) at t * stride_token + h * stride_head elements, head_dim contiguous.
  // Reads of q may overlap; rows of out may not (they are written concurrently), and out strides keep the
  // 4-value stores aligned.
  static void validate_strides(const Problem& p, const Args& a) {
    const int64_t D = p.head_dim, HQ = p.num_q_heads;
    const auto non_negative = [](int64_t v, const char* field) {
      if (v < 0 || v > kMaxStride) bad(field, "an element stride in 0..2^40 (0: dense)", std::to_string(v));
    };
    non_negative(a.q_stride_token, "q_stride_token");
    non_negative(a.q_stride_head, "q_stride_head");
    non_negative(a.out_stride_token, "out_stride_token");
    non_negative(a.out_stride_head, "out_stride_head");
    for (const auto& [v, field] : {std::pair{a.out_stride_token, "out_stride_token"}, {a.out_stride_head, "out_stride_head"}})
      if (v % 4 != 0)
        bad(field, "a multiple of 4 elements (out is stored 4 values at a time; with an aligned out every row "
                   "start stays aligned)", std::to_string(v));
    const int64_t st = a.out_stride_token ? a.out_stride_token : HQ * D;
    const int64_t sh = a.out_stride_head ? a.out_stride_head : D;
    // Rows do not overlap when the inner dimension's rows are head_dim apart and the outer one clears them (the
    // layouts engines use: O(1) per call); other layouts get the exact test.
    struct Dim { int64_t stride, count; const char* field; };
    Dim in{sh, HQ, "out_stride_head"}, outer{st, a.num_tokens, "out_stride_token"};
    if (in.count > 1 && outer.count > 1 && in.stride > outer.stride) std::swap(in, outer);
    const bool inner_clear = in.count <= 1 || in.stride >= D;
    const int64_t span = in.count > 1 ? (in.count - 1) * in.stride + D : D;
    if (inner_clear && (outer.count <= 1 || outer.stride >= span)) return;
    const auto [dt, dh] = overlapping_rows(st, a.num_tokens, sh, HQ, D);
    if (dt == 0 && dh == 0) return;  // interleaved, but no two rows meet
    const Dim& culprit = inner_clear ? outer : in;
    const std::string rows = dt >= 0 ? fmt::format("(token t, head h) and (token t + {}, head h + {})", dt, dh)
                                     : fmt::format("(token t + {}, head h) and (token t, head h + {})", -dt, dh);
    bad(culprit.field,
        fmt::format("a stride whose rows of head_dim ({}) elements do not overlap (with out_stride_token {} and "
                    "out_stride_head {}, the rows {} do)",
                    D, st, sh, rows),
        std::to_string(culprit.stride));
  }

  // (dt, dh) != (0, 0), |dt| < tokens, 0 <= dh < heads, such that the out rows (t, h) and (t + dt, h + dh) share an
  // element, or (0, 0) when none do: for each head offset the token offsets nearest to cancelling it. st > 0
  // (a zero stride means dense, resolved by the caller).
  static std::pair<int64_t, int64_t> overlapping_rows(int64_t st, int64_t tokens, int64_t sh, int64_t heads, int64_t D) {
    const auto meet = [&](int64_t dt, int64_t dh) {
      if (dt <= -tokens || dt >= tokens || (dt == 0 && dh == 0) || (dh == 0 && dt < 0)) return false;
      const int64_t gap = dt * st + dh * sh;
      return gap < D && gap > -D;
    };
    for (int64_t dh = 0; dh < heads; ++dh) {
      // The gap grows with dt: the token offsets in range nearest to floor(-x / st) are the ones to test.
      const int64_t x = dh * sh;
      const int64_t lo = -((x + st - 1) / st);
      for (int64_t dt : {lo, lo + 1}) {
        dt = std::min(std::max(dt, 1 - tokens), tokens - 1);
        if (meet(dt, dh)) return {dt, dh};
      }
    }
    return {0, 0};
  }

  static void validate_shape(const Problem&, const Args& a) {
    if (a.batch < 1 || a.batch > 65535) bad("batch", "1..65535", std::to_string(a.batch));
    if (a.max_seq_len < 1 || a.max_seq_len > xqa::kMaxSeqLen)
      bad("max_seq_len", "an upper bound of seq_lens in 1..2^30", std::to_string(a.max_seq_len));
  }

  static void validate_args(const Problem& p, const Args& a) {
    namespace kc = ::ktune_common;
    using xqa::MaskKind;
    using launch_support::ptr_text;
    validate_shape(p, a);
    const bool fp8_q = p.q_dtype == kc::kE4M3, fp8_out = p.out_dtype == kc::kE4M3;
    need_ptr(a.q, "q", fp8_q ? 1 : 2);
    validate_cache(p, a);
    need_ptr(a.block_tables, "block_tables", 4);
    need_ptr(a.seq_lens, "seq_lens", 4);
    need_ptr(a.out, "out", fp8_out ? 4 : 8);
    validate_strides(p, a);
    if (a.q_cu_seq_lens) {
      if (reinterpret_cast<uintptr_t>(a.q_cu_seq_lens) % 4 != 0)
        bad("q_cu_seq_lens", "a 4-byte aligned device pointer", ptr_text(a.q_cu_seq_lens));
      const int64_t most = int64_t{a.batch} * p.max_q_len;
      if (a.num_tokens < 0 || a.num_tokens > most)
        bad("num_tokens", fmt::format("0..{} (ragged: at most batch * max_q_len)", most), std::to_string(a.num_tokens));
    } else {
      if (a.q_len_per_req < 1 || a.q_len_per_req > p.max_q_len)
        bad("q_len_per_req", fmt::format("1..{} (problem max_q_len)", p.max_q_len), std::to_string(a.q_len_per_req));
      const int64_t want = int64_t{a.batch} * a.q_len_per_req;
      if (a.num_tokens != want)
        bad("num_tokens", fmt::format("exactly batch * q_len_per_req = {} (uniform form; pass q_cu_seq_lens for ragged)", want),
            std::to_string(a.num_tokens));
    }
    if (p.mask == MaskKind::Explicit) {
      if (!a.mask) bad("mask", "the explicit draft mask (problem mask is explicit)", "null");
      if (reinterpret_cast<uintptr_t>(a.mask) % 4 != 0) bad("mask", "a 4-byte aligned device pointer", ptr_text(a.mask));
    } else {
      need_null(a.mask, "mask", p.mask == MaskKind::Causal ? "problem mask is causal" : "problem has no mask");
    }
    if (p.has_sinks) need_ptr(a.sinks, "sinks", 4);
    else need_null(a.sinks, "sinks", "problem has no sinks");
    if (p.write_lse) need_ptr(a.lse, "lse", 4);
    else need_null(a.lse, "lse", "problem does not write lse");
    if (p.sliding_window) {
      // At most 2^30 (max_seq_len's bound; a wider window is no window): the kernels subtract it from a
      // sequence position in 32 bits.
      if (a.window_left < 0 || a.window_left > xqa::kMaxSeqLen)
        bad("window_left", "0..2^30 (problem has a sliding window)", std::to_string(a.window_left));
    } else if (a.window_left != -1) {
      bad("window_left", "-1 (problem has no sliding window)", std::to_string(a.window_left));
    }
    if (p.softcap) {
      need_positive(a.softcap, "softcap");
    } else if (a.softcap != 0.f) {
      bad("softcap", "0 (problem has no softcap)", fmt::format("{}", a.softcap));
    }
    need_positive(a.softmax_scale, "softmax_scale");
    need_positive(a.k_scale, "k_scale");
    need_positive(a.v_scale, "v_scale");
    if (fp8_q) need_positive(a.q_scale, "q_scale");
    if (fp8_out) need_positive(a.o_scale, "o_scale");
    // The kernel folds the scales into one factor per product (softmax_scale * k_scale [* q_scale] times log2(e)
    // and up to 2^8 for an fp8 cache; v_scale [/ o_scale] times up to 2^8; with a softcap, that first factor
    // over softcap): factors past the float range make every score inf and the output NaN. Checked in double
    // with the largest fold (kE4m3Fold before sm_89, common/numerics.cuh), for the values given here (device-held
    // scales are read by the kernel only).
    constexpr double fold = 256;
    const double bmm1 = double{a.softmax_scale} * a.k_scale * (fp8_q ? a.q_scale : 1.0) * fold * kc::kLog2e;
    const double bmm2 = double{a.v_scale} / (fp8_out ? a.o_scale : 1.0) * fold;
    const auto in_range = [](double v) { return v >= FLT_MIN && v <= FLT_MAX; };
    if (!in_range(bmm1) || (p.softcap && !in_range(bmm1 / a.softcap)))
      bad("softmax_scale", fmt::format("softmax_scale * k_scale{}{} within float range once folded",
                                       fp8_q ? " * q_scale" : "", p.softcap ? ", and over softcap" : ""),
          fmt::format("{} * {}{}{}", a.softmax_scale, a.k_scale, fp8_q ? fmt::format(" * {}", a.q_scale) : "",
                      p.softcap ? fmt::format(" (softcap {})", a.softcap) : ""));
    if (!in_range(bmm2))
      bad("v_scale", fmt::format("v_scale{} within float range once folded", fp8_out ? " / o_scale" : ""),
          fp8_out ? fmt::format("{} / {}", a.v_scale, a.o_scale) : fmt::format("{}", a.v_scale));
    // Device-held scales (their values are read by the kernel only): aligned pointers where they apply.
    if (a.k_scale_ptr) need_ptr(a.k_scale_ptr, "k_scale_ptr", 4);
    if (a.v_scale_ptr) need_ptr(a.v_scale_ptr, "v_scale_ptr", 4);
    if (fp8_q && a.q_scale_ptr) need_ptr(a.q_scale_ptr, "q_scale_ptr", 4);
    if (fp8_out && a.o_scale_ptr) need_ptr(a.o_scale_ptr, "o_scale_ptr", 4);
    if (a.max_pages_per_req < 1) bad("max_pages_per_req", ">= 1", std::to_string(a.max_pages_per_req));
    if (int64_t{a.max_pages_per_req} * p.page_size < a.max_seq_len)
      bad("max_pages_per_req", fmt::format("max_pages_per_req * page_size ({} * {}) >= max_seq_len ({})",
                                           a.max_pages_per_req, p.page_size, a.max_seq_len),
          std::to_string(a.max_pages_per_req));
    if (a.num_pages < 1) bad("num_pages", ">= 1", std::to_string(a.num_pages));
  }

  static bool empty(const Args&) { return false; }  // zero-length requests still write their (empty) rows

  // The plan depends on batch and the power-of-two bucket of max_seq_len only.
  static Shape shape(const Problem&, const Args& a) { return {a.batch, bucket_pow2_ceil(a.max_seq_len)}; }
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem&, const Shape& s) {
    return {{"b", bucket_pow2_ceil(s.a)}, {"l", s.b}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const Shape&) { return xqa::default_config(p, arch); }
  static int planned_splits(const Problem& p, const Config& c, const Shape& s, const DeviceLimits& lim) {
    return xqa::choose_num_splits(p, c, static_cast<int>(s.a), static_cast<int>(s.b), lim);
  }
  static size_t workspace_bytes(const Problem& p, const Config& c, const Shape& s, int splits) {
    return xqa::workspace_bytes(p, c, static_cast<int>(s.a), splits);
  }
  static void run_host(Runtime& rt, const Problem& p, const Args& a) { xqa_decode_host(rt, p, a); }

  static void launch(const LoadedKernel& kernel, const Problem& p, const Resolved<Config>& r, const Args& a,
                     const LaunchStream& stream, void* report) {
    ktune_xqa::Params prm = xqa::kernel_params(p, a, r.splits, static_cast<float*>(a.workspace));
    prm.report = static_cast<ktune_common::DeviceReport*>(report);
    ktune::launch(kernel, 0, xqa::decode_dims(p, r.config, a.batch, r.splits), stream, prm);
    if (r.splits > 1) {
      const LaunchStream merge = within_call(stream, *r.dev);
      ktune::launch(*r.shared, xqa::kCombineEntry, xqa::combine_dims(p, r.config, a.batch), merge, prm);
    }
  }
};

}  // namespace pipeline

template class Op<XqaDecodeFamily>;

void xqa_decode_validate(const xqa::Problem& p, const XqaDecodeArgs& a) {
  using Spec = pipeline::OpSpec<XqaDecodeFamily>;
  p.validate();
  Spec::validate_args(p, a);
  pipeline::check_forced_splits<Spec>(a);
  if (!a.config) return;
  const xqa::Config c = pipeline::parse_config<Spec>(a.config);
  if (a.num_splits > 1) {
    pipeline::Resolved<xqa::Config> r;
    r.splits = a.num_splits;
    r.workspace_bytes = xqa::workspace_bytes(p, c, a.batch, a.num_splits);
    pipeline::check_workspace<Spec>(a, r);
  }
}

XqaDecodePlan xqa_decode_plan(Runtime& rt, const xqa::Problem& problem, int batch, int max_seq_len, const char* config,
                              int num_splits) {
  XqaDecodeArgs a;
  a.batch = batch;
  a.max_seq_len = max_seq_len;
  a.config = config;
  a.num_splits = num_splits;
  return pipeline::cached_op<XqaDecodeFamily>(rt, problem).plan(a);
}

size_t xqa_decode_workspace_bytes(Runtime& rt, const xqa::Problem& p, int batch, int max_seq_len, const char* config,
                                  int num_splits) {
  return xqa_decode_plan(rt, p, batch, max_seq_len, config, num_splits).workspace_bytes;
}

void xqa_decode(Runtime& rt, const xqa::Problem& problem, const XqaDecodeArgs& a, void* stream) {
  if (host_device_current()) return xqa_decode_host(rt, problem, a);  // use_device(kHostDevice): host pointers
  pipeline::cached_op<XqaDecodeFamily>(rt, problem).run(a, stream);
}

}  // namespace ktune
