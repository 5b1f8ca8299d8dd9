// sparse_mla_decode through the one pipeline (templates/pipeline.hpp): this file is the family's OpSpec -- its
// argument checks, plan shape and kernel parameters -- and the one-shot calls on top of prepared ops.
// Nothing here reads device memory, allocates or synchronizes.
#include "ktune/sparse_mla_decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "ktune/sparse_mla_decode_host.hpp"
#include "pipeline.hpp"
#include "sparse_mla_decode/kernel_params.hpp"

namespace ktune {
namespace pipeline {

template <>
struct OpSpec<SparseMlaDecodeFamily> : SpecBase<OpSpec<SparseMlaDecodeFamily>, SparseMlaDecodeFamily> {
  using Config = mla::Config;
  static constexpr const char* kConfigGrammar =
      "a config key t<tokens_per_tile>.s<stages>.g<heads_per_cta>[.w<warps>][.wg], e.g. t64.s2.g64, or t64.s2.g64.ws / .wsp";
  static constexpr int kMaxForcedSplits = 64;
  static constexpr bool kPdl = true;  // every entry point waits (common/pdl.cuh)
  static constexpr bool kSharedModule = true;  // the split merge (spec.hpp generate_shared)
  static constexpr int kMaxTokens = 65535;


  static void validate_problem(const Problem& p) { p.validate(); }
  static void validate_shape(const Problem&, const Args& a) {
    if (a.num_tokens < 0 || a.num_tokens > kMaxTokens)
      bad("num_tokens", fmt::format("0..{}", kMaxTokens), std::to_string(a.num_tokens));
  }
  static void validate_args(const Problem& p, const Args& a) {
    using launch_support::ptr_text;
    validate_shape(p, a);
    need_rows_ptr(a.q, empty(a), "q", 16);
    for (const auto& [v, field] : {std::pair{a.q_stride_token, "q_stride_token"}, {a.q_stride_head, "q_stride_head"}})
      if (v < 0 || v > (int64_t{1} << 40) || v % 8 != 0)
        bad(field, "0 (dense) or a positive multiple of 8 elements up to 2^40 (q rows are loaded 16 bytes at a time)",
            std::to_string(v));
    need_ptr(a.kv_cache, "kv_cache", 16);
    need_rows_ptr(a.indices, empty(a), "indices", 4);
    need_rows_ptr(a.out, empty(a), "out", 4);
    if (a.sinks && reinterpret_cast<uintptr_t>(a.sinks) % 4 != 0)
      bad("sinks", "null or a 4-byte aligned device pointer", ptr_text(a.sinks));
    if (a.lse && reinterpret_cast<uintptr_t>(a.lse) % 4 != 0)
      bad("lse", "null or a 4-byte aligned device pointer", ptr_text(a.lse));
    if (a.num_pages < 1) bad("num_pages", ">= 1", std::to_string(a.num_pages));
    if (a.num_pages > (int64_t{1} << 40) / p.page_size)
      bad("num_pages", fmt::format("at most 2^40 / page_size slots in total"), std::to_string(a.num_pages));
    if (!std::isfinite(a.softmax_scale) || !(a.softmax_scale > 0.f))
      bad("softmax_scale", "a finite value > 0", fmt::format("{}", a.softmax_scale));
  }
  static bool empty(const Args& a) { return a.num_tokens == 0; }

  // The plan depends on num_tokens; the tuning key on its request bucket.
  static Shape shape(const Problem&, const Args& a) { return {a.num_tokens, 0}; }
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem& p, const Shape& s) {
    return {{"b", sparse_mla_decode_batch_bucket(p, static_cast<int>(s.a))}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const Shape&) { return mla::default_config(p, arch); }
  static int planned_splits(const Problem& p, const Config& c, const Shape& s, const DeviceLimits& lim) {
    return mla::choose_num_splits(p, c, std::max(1, static_cast<int>(s.a)), lim);
  }
  static size_t workspace_bytes(const Problem& p, const Config&, const Shape& s, int splits) {
    return mla::workspace_bytes(p, static_cast<int>(s.a), splits);
  }
  static void run_host(Runtime& rt, const Problem& p, const Args& a) { sparse_mla_decode_host(rt, p, a); }

  static void launch(const LoadedKernel& kernel, const Problem& p, const Resolved<Config>& r, const Args& a,
                     const LaunchStream& stream, void* report) {
    ktune_mla::Params prm = mla::kernel_params(p, a, r.splits, static_cast<float*>(a.workspace));
    prm.report = static_cast<ktune_common::DeviceReport*>(report);
    ktune::launch(kernel, 0, mla::decode_dims(p, r.config, a.num_tokens, r.splits), stream, prm);
    if (r.splits > 1) {
      const LaunchStream merge = within_call(stream, *r.dev);
      ktune::launch(*r.shared, mla::kCombineEntry, mla::combine_dims(p, a.num_tokens), merge, prm);
    }
  }
};

}  // namespace pipeline

template class Op<SparseMlaDecodeFamily>;

int64_t sparse_mla_decode_batch_bucket(const mla::Problem& p, int num_tokens) {
  const int q = std::max(1, p.max_q_len);
  return bucket_pow2_ceil(std::max(1, (num_tokens + q - 1) / q));
}

void sparse_mla_decode_validate(const mla::Problem& p, const SparseMlaDecodeArgs& a) {
  using Spec = pipeline::OpSpec<SparseMlaDecodeFamily>;
  p.validate();
  Spec::validate_args(p, a);
  pipeline::check_forced_splits<Spec>(a);
  if (!a.config) return;
  pipeline::parse_config<Spec>(a.config);
  if (a.num_splits > 1) {
    pipeline::Resolved<mla::Config> r;
    r.splits = a.num_splits;
    r.workspace_bytes = mla::workspace_bytes(p, a.num_tokens, a.num_splits);
    pipeline::check_workspace<Spec>(a, r);
  }
}

SparseMlaDecodePlan sparse_mla_decode_plan(Runtime& rt, const mla::Problem& problem, int num_tokens, const char* config,
                                           int num_splits) {
  SparseMlaDecodeArgs a;
  a.num_tokens = num_tokens;
  a.config = config;
  a.num_splits = num_splits;
  return pipeline::cached_op<SparseMlaDecodeFamily>(rt, problem).plan(a);
}

size_t sparse_mla_decode_workspace_bytes(Runtime& rt, const mla::Problem& p, int num_tokens, const char* config,
                                         int num_splits) {
  return sparse_mla_decode_plan(rt, p, num_tokens, config, num_splits).workspace_bytes;
}

void sparse_mla_decode(Runtime& rt, const mla::Problem& problem, const SparseMlaDecodeArgs& a, void* stream) {
  if (host_device_current()) return sparse_mla_decode_host(rt, problem, a);  // use_device(kHostDevice)
  pipeline::cached_op<SparseMlaDecodeFamily>(rt, problem).run(a, stream);
}

}  // namespace ktune
