// mxfp4_gemm through the one pipeline (templates/pipeline.hpp): this file is the family's OpSpec -- its
// argument checks, plan shape and kernel parameters -- and the one-shot calls on top of prepared ops.
// Nothing here reads device memory, allocates or synchronizes.
#include "ktune/mxfp4_gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "ktune/mxfp4_gemm_host.hpp"
#include "ktune_internal/tensor_map.hpp"
#include "mxfp4_gemm/kernel_params.hpp"
#include "pipeline.hpp"

namespace ktune {
namespace pipeline {

template <>
struct OpSpec<Mxfp4GemmFamily> : SpecBase<OpSpec<Mxfp4GemmFamily>, Mxfp4GemmFamily> {
  using Config = mxfp4::Config;
  static constexpr const char* kConfigGrammar =
      "a config key bm<tokens>.tn<tiles>.wn<warps_n>.wk<warps_k>.s<stages>.d<depth>[.wg], e.g. bm16.tn1.wn1.wk4.s3.d8";
  static constexpr int kMaxForcedSplits = 0;
  static constexpr bool kPdl = true;  // every entry point waits (common/pdl.cuh)


  static void validate_problem(const Problem& p) { p.validate(); }
  static void validate_shape(const Problem&, const Args& a) {
    if (a.m < 0) bad("m", ">= 0 rows", std::to_string(a.m));
  }
  static void validate_args(const Problem& p, const Args& a) {
    using launch_support::ptr_text;
    const Mxfp4Weight& w = a.weight;
    if (w.layout_version != mxfp4::packed_layout_version())
      bad("weight.layout_version",
          fmt::format("{} (a weight prepacked by this ktune: mxfp4::prepack_host / `ktune prepack`)",
                      mxfp4::packed_layout_version()),
          std::to_string(w.layout_version));
    if (w.n != p.n) bad("weight.n", fmt::format("problem n = {}", p.n), std::to_string(w.n));
    if (w.k != p.k) bad("weight.k", fmt::format("problem k = {}", p.k), std::to_string(w.k));
    if (w.num_experts != p.num_experts)
      bad("weight.num_experts", fmt::format("problem num_experts = {}", p.num_experts), std::to_string(w.num_experts));
    need_ptr(w.packed, "weight.packed", 16);
    need_ptr(w.scales, "weight.scales", 16);
    if (a.m < 0 || (!p.grouped() && a.m < 1))
      bad("m", p.grouped() ? ">= 0 rows" : ">= 1 rows", std::to_string(a.m));
    // Rows no config can launch (grid.y <= 65535 row tiles of at most 256 rows: shape.h) are refused here, before a
    // module is loaded or compiled; the chosen config's own bound is checked at launch (mxfp4::gemm_dims).
    const int64_t max_rows = (65535 - (p.grouped() ? p.num_experts : 0)) * int64_t{256};
    if (a.m > max_rows)
      bad("m", fmt::format("at most {} rows (65535 row tiles of at most 256 rows{})", max_rows,
                           p.grouped() ? ", less one tile per expert" : ""),
          std::to_string(a.m));
    need_rows_ptr(a.a, empty(a), "a", 16);
    need_rows_ptr(a.c, empty(a), "c", 4);
    const int lda = a.lda ? a.lda : p.k, ldc = a.ldc ? a.ldc : p.n;
    if (lda < p.k || lda % 8 != 0)
      bad("lda", fmt::format("0 or a multiple of 8 elements >= k ({}) (16-byte aligned rows)", p.k), std::to_string(a.lda));
    if (ldc < p.n) bad("ldc", fmt::format("0 or >= n ({})", p.n), std::to_string(a.ldc));
    if (int64_t(a.m) * lda > INT64_MAX / 4 || int64_t(a.m) * ldc > (int64_t(1) << 46))
      bad("m", "a size whose element offsets fit", std::to_string(a.m));
    if (a.bias) need_ptr(a.bias, "bias", 2);
    if (p.grouped()) {
      need_ptr(a.expert_offsets, "expert_offsets", 4);
    } else if (a.expert_offsets) {
      bad("expert_offsets", "null (dense problem: num_experts = 1)", ptr_text(a.expert_offsets));
    }
  }
  static bool empty(const Args& a) { return a.m == 0; }

  // The plan depends on the row bucket only (the grid on the exact m, computed per launch).
  static Shape shape(const Problem& p, const Args& a) { return {mxfp4_gemm_bucket(p, a.m), 0}; }
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem&, const Shape& s) {
    return {{"m", s.a}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const Shape& s) {
    const int64_t rows = p.grouped() ? (s.a * p.top_k + p.num_experts - 1) / p.num_experts : s.a;
    return mxfp4::default_config(p, arch, rows);
  }
  static int planned_splits(const Problem&, const Config&, const Shape&, const DeviceLimits&) { return 1; }
  static size_t workspace_bytes(const Problem&, const Config&, const Shape&, int) { return 0; }
  static void run_host(Runtime& rt, const Problem& p, const Args& a) { mxfp4_gemm_host(rt, p, a); }

  // The wgmma configs' TMA view of A (Params::a_tmap): bf16 [m, k] rows lda elements apart (validated: 16-byte
  // aligned base, lda a multiple of 8), boxes of 64 k x bm rows in the 128-byte swizzle wgmma reads; elements
  // past k or m read as zero. The last map a thread encoded is reused while (a, m, k, lda, bm) stay the same,
  // the steady state of a decode loop.
  static void encode_a_map(ktune_mxfp4::Params& prm, const Config& c, int64_t m) {
    struct Last {
      const void* a = nullptr;
      int64_t m = -1, k = -1, lda = -1;
      int bm = -1;
      alignas(64) unsigned char map[sizeof(prm.a_tmap)];
    };
    thread_local Last last;
    if (!(last.a == prm.a && last.m == m && last.k == prm.k && last.lda == prm.lda && last.bm == c.bm)) {
      internal::encode_bf16_tile_map_2d(last.map, prm.a, uint64_t(prm.k), uint64_t(m), uint64_t(prm.lda) * 2, 64,
                                        uint32_t(c.bm), "cuTensorMapEncodeTiled (mxfp4_gemm activations)");
      last.a = prm.a, last.m = m, last.k = prm.k, last.lda = prm.lda, last.bm = c.bm;
    }
    std::memcpy(prm.a_tmap, last.map, sizeof(prm.a_tmap));
  }

  static void launch(const LoadedKernel& kernel, const Problem& p, const Resolved<Config>& r, const Args& a,
                     const LaunchStream& stream, void*) {
    const LaunchDims dims = mxfp4::gemm_dims(p, r.config, a.m);  // throws before any launch when m is too large
    ktune_mxfp4::Params prm = mxfp4::kernel_params(p, a);
    if (r.config.wgmma) encode_a_map(prm, r.config, a.m);
    ktune::launch(kernel, 0, dims, stream, prm);
  }
};

}  // namespace pipeline

template class Op<Mxfp4GemmFamily>;

int64_t mxfp4_gemm_bucket(const mxfp4::Problem& p, int64_t m) {
  const int64_t tokens = p.grouped() ? (m + p.top_k - 1) / p.top_k : m;
  return bucket_pow2_ceil(std::max<int64_t>(1, tokens));
}

void mxfp4_gemm_validate(const mxfp4::Problem& p, const Mxfp4GemmArgs& a) {
  using Spec = pipeline::OpSpec<Mxfp4GemmFamily>;
  p.validate();
  Spec::validate_args(p, a);
  if (a.config) pipeline::parse_config<Spec>(a.config);
}

Mxfp4GemmPlan mxfp4_gemm_plan(Runtime& rt, const mxfp4::Problem& problem, int64_t m, const char* config) {
  if (m < 0 || m > INT32_MAX)
    launch_support::bad_arg("mxfp4_gemm", "m", ">= 0 rows (at most 2^31 - 1)", std::to_string(m));
  Mxfp4GemmArgs a;
  a.m = static_cast<int>(m);
  a.config = config;
  return pipeline::cached_op<Mxfp4GemmFamily>(rt, problem).plan(a);
}

void mxfp4_gemm(Runtime& rt, const mxfp4::Problem& problem, const Mxfp4GemmArgs& a, void* stream) {
  if (host_device_current()) return mxfp4_gemm_host(rt, problem, a);  // use_device(kHostDevice): host pointers
  pipeline::cached_op<Mxfp4GemmFamily>(rt, problem).run(a, stream);
}

}  // namespace ktune
