// mxfp4_gemm through the runtime: host validation -> config (forced / tuned / default) -> Runtime::get ->
// one typed launch. Nothing here reads device memory, allocates or synchronizes.
#include "ktune/mxfp4_gemm.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "launch_support.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/launch.hpp"
#include "ktune/tuning.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "mxfp4_gemm/params.h"

namespace ktune {
namespace {

namespace kc = ::ktune_common;
using mxfp4::Config;
using mxfp4::Problem;

constexpr const char* kFamily = "mxfp4_gemm";

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(kFamily, field, expected, got);
}
using launch_support::ptr_text;

void need_ptr(const void* p, const char* field, size_t align) { launch_support::need_device_ptr(kFamily, p, field, align); }

using launch_support::DeviceFacts;
const DeviceFacts& current_device() { return launch_support::current_device(kFamily); }

struct Memo {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> why;  // "ordinal|problem|config" -> can_implement result
};
Memo& memo() {
  static Memo m;
  return m;
}

std::string can_run(const Problem& p, const std::string& pk, const Config& c, const std::string& ck,
                    const DeviceFacts& dev) {
  const std::string key = fmt::format("{}|{}|{}", dev.ordinal, pk, ck);
  Memo& m = memo();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.why.find(key);
    if (it != m.why.end()) return it->second;
  }
  std::string why = mxfp4::can_implement(p, c, dev.arch, dev.limits);
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.why.emplace(key, why).first->second;
}

Config parse_config(const char* key) {
  return launch_support::parse_forced_config<Config>(
      kFamily, key, "a config key bm<tokens>.tn<tiles>.wn<warps_n>.wk<warps_k>.s<stages>.d<depth>[.wg], e.g. bm16.tn1.wn1.wk4.s3.d8");
}

struct Resolved {
  Config config;
  std::string config_key, source, tuning_key;
  const DeviceFacts* dev = nullptr;
};

Resolved resolve(Runtime& rt, const Problem& p, const std::string& pk, int64_t m, const char* forced, bool need_device) {
  Resolved r;
  const int64_t bucket = mxfp4_gemm_bucket(p, m);
  r.tuning_key = tuning_key(pk, {{"m", bucket}});
  if (forced) {
    r.config = parse_config(forced);
    r.config_key = r.config.key();
    r.source = "forced";
    if (!need_device) return r;
  }
  r.dev = &current_device();
  if (!forced) {
    r.config = launch_support::tuned_or_default<Config>(
        kFamily, r.tuning_key, rt.tuned_config(kFamily, r.tuning_key),
        [&](const Config& c) { return can_run(p, pk, c, c.key(), *r.dev); },
        [&] {
          const int64_t rows = p.grouped() ? (bucket * p.top_k + p.num_experts - 1) / p.num_experts : bucket;
          return mxfp4::default_config(p, r.dev->arch, rows);
        },
        &r.source);
    r.config_key = r.config.key();
  }
  const std::string why = can_run(p, pk, r.config, r.config_key, *r.dev);
  if (!why.empty())
    bad("config", fmt::format("a config that can run {} on {}", pk, r.dev->arch.str()),
        fmt::format("'{}' ({})", r.config_key, why));
  return r;
}

// The wgmma configs' TMA view of A (Params::a_tmap): bf16 [m, k] rows lda elements apart (validated: 16-byte
// aligned base, lda a multiple of 8), boxes of 64 k x bm rows in the 128-byte swizzle wgmma reads; elements past
// k or m read as zero.
void encode_a_map(ktune_mxfp4::Params& prm, const Config& c, int64_t m) {
  static_assert(sizeof(prm.a_tmap) == sizeof(CUtensorMap), "Params::a_tmap holds one CUtensorMap");
  const cuuint64_t dims[2] = {cuuint64_t(prm.k), cuuint64_t(m)};
  const cuuint64_t strides[1] = {cuuint64_t(prm.lda) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(c.bm)};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUtensorMap map;
  detail::check_cu(detail::driver().cuTensorMapEncodeTiled(
                       &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(prm.a), dims, strides, box,
                       elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                   "cuTensorMapEncodeTiled (mxfp4_gemm activations)");
  std::memcpy(prm.a_tmap, &map, sizeof(map));
}

}  // namespace

int64_t mxfp4_gemm_bucket(const Problem& p, int64_t m) {
  const int64_t tokens = p.grouped() ? (m + p.top_k - 1) / p.top_k : m;
  return bucket_pow2_ceil(std::max<int64_t>(1, tokens));
}

void mxfp4_gemm_validate(const Problem& p, const Mxfp4GemmArgs& a) {
  p.validate();
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
  need_ptr(a.a, "a", 16);
  need_ptr(a.c, "c", 4);
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
  if (a.config) parse_config(a.config);
}

Mxfp4GemmPlan mxfp4_gemm_plan(Runtime& rt, const Problem& p, int64_t m, const char* config) {
  p.validate();
  if (m < 0) bad("m", ">= 0 rows", std::to_string(m));
  const std::string pk = p.key();
  const Resolved r = resolve(rt, p, pk, m, config, false);
  return Mxfp4GemmPlan{r.config_key, r.source, r.tuning_key};
}

void mxfp4_gemm(Runtime& rt, const Problem& p, const Mxfp4GemmArgs& a, void* stream) {
  if (host_device_current()) return mxfp4_gemm_host(rt, p, a);  // use_device(kHostDevice): host pointers
  mxfp4_gemm_validate(p, a);
  const std::string pk = p.key();
  const Resolved r = resolve(rt, p, pk, a.m, a.config, true);
  if (a.m == 0) return;
  const LaunchDims dims = mxfp4::gemm_dims(p, r.config, a.m);  // throws before any launch when m is too large
  const Arch arch = r.dev->arch;
  const std::string fast_key = std::string(kFamily) + "/" + pk + "/" + r.config_key;
  const LoadedKernel& kernel = rt.get(fast_key, [&] { return mxfp4::generate(p, r.config, arch); });

  ktune_mxfp4::Params prm{};
  prm.a = a.a;
  prm.w = static_cast<const unsigned*>(a.weight.packed);
  prm.s = static_cast<const unsigned*>(a.weight.scales);
  prm.bias = a.bias;
  prm.c = a.c;
  prm.expert_offsets = p.grouped() ? a.expert_offsets : nullptr;
  prm.m = a.m;
  prm.n = p.n;
  prm.k = p.k;
  prm.lda = a.lda ? a.lda : p.k;
  prm.ldc = a.ldc ? a.ldc : p.n;
  prm.kc = (p.k + 63) / 64;
  prm.n16 = (p.n + 15) / 16;
  prm.num_experts = p.num_experts;
  prm.w_expert_words = int64_t(mxfp4::packed_weight_bytes(p.n, p.k, 1) / 4);
  prm.s_expert_words = int64_t(mxfp4::packed_scale_bytes(p.n, p.k, 1) / 4);
  if (r.config.wgmma) encode_a_map(prm, r.config, a.m);
  launch(kernel, 0, dims, stream, prm);
}

}  // namespace ktune
