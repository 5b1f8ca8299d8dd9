// sparse_mla_decode on the host CPU: argument check (shared with the GPU call) -> index check (host memory can
// be read here, so an out-of-range slot is an error instead of a stray read) -> config, split count and
// workspace (templates/host_pipeline.hpp) -> Runtime::get_host -> decode items (and combine rows) over the host
// pool. The host kernel's entry points are void(const ktune_mla::Params&, int begin, int end).
#include "ktune/sparse_mla_decode_host.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "host_pipeline.hpp"
#include "sparse_mla_decode/kernel_params.hpp"

namespace ktune {
namespace {

using mla::Config;
using mla::Problem;

using HostEntry = void (*)(const ktune_mla::Params&, int, int);

// The host front end's view of the family (templates/host_pipeline.hpp). The shape is (num_tokens, 0); an empty
// call plans as one token.
struct HostSpec {
  using Problem = mla::Problem;
  using Config = mla::Config;
  static constexpr const char* kFamily = "sparse_mla_decode";
  static constexpr const char* kConfigGrammar = "a host config key like t32.g16.v16.u2";
  static constexpr int kMaxForcedSplits = 64;  // as the GPU call
  static int tokens(const pipeline::Shape& s) { return std::max(1, static_cast<int>(s.a)); }
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem& p, const pipeline::Shape& s) {
    return {{"b", sparse_mla_decode_batch_bucket(p, tokens(s))}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const pipeline::Shape&) {
    return mla::default_config(p, arch);
  }
  static int planned_splits(const Problem& p, const Config& c, const pipeline::Shape& s, int threads) {
    return mla::choose_num_splits_host(p, c, tokens(s), threads);
  }
  static size_t workspace_bytes(const Problem& p, const Config&, const pipeline::Shape& s, int splits) {
    return mla::workspace_bytes(p, static_cast<int>(s.a), splits);
  }
};

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  host_pipeline::bad<HostSpec>(field, expected, got);
}

host_pipeline::Resolved<Config> resolve(Runtime& rt, const Problem& p, int num_tokens, int threads,
                                        const char* forced_config, int forced_splits) {
  if (num_tokens < 0 || num_tokens > 65535) bad("num_tokens", "0..65535", std::to_string(num_tokens));
  return host_pipeline::resolve<HostSpec>(rt, p, {num_tokens, 0}, threads, forced_config, forced_splits);
}

// Every entry must be -1 or a slot of the cache. The first bad one is named (token, entry, value).
void check_indices(const Problem& p, const SparseMlaDecodeArgs& a) {
  const int64_t slots = a.num_pages * p.page_size;
  const size_t n = size_t(a.num_tokens) * size_t(p.topk);
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = a.indices[i];
    if (v != -1 && (v < 0 || v >= slots))
      bad(fmt::format("indices (token {}, entry {})", i / size_t(p.topk), i % size_t(p.topk)),
          fmt::format("-1 or a slot in [0, {}) (num_pages {} x page_size {})", slots, a.num_pages, p.page_size),
          std::to_string(v));
  }
}
}  // namespace

SparseMlaHostPlan sparse_mla_decode_host_plan(Runtime& rt, const Problem& problem, int num_tokens, int threads,
                                              const char* config, int num_splits) {
  const Problem p = host_pipeline::unchecked(problem);
  return host_pipeline::split_plan(resolve(rt, p, num_tokens, threads, config, num_splits));
}

const LoadedKernel& sparse_mla_decode_host_kernel(Runtime& rt, const Problem& problem, const std::string& config) {
  return host_pipeline::kernel<HostSpec>(rt, host_pipeline::unchecked(problem), config, 2);  // decode, combine
}

void sparse_mla_decode_host(Runtime& rt, const Problem& problem, const SparseMlaDecodeArgs& a, int threads) {
  {
    SparseMlaDecodeArgs v = a;  // the GPU check, except that a null workspace is allowed (ktune's scratch is used)
    if (!v.workspace) v.num_splits = 0;
    sparse_mla_decode_validate(problem, v);
  }
  if (a.num_tokens == 0) return;
  const Problem p = host_pipeline::unchecked(problem);
  check_indices(p, a);
  const auto r = resolve(rt, p, a.num_tokens, threads, a.config, a.num_splits);
  const LoadedKernel& kernel = sparse_mla_decode_host_kernel(rt, p, r.config_key);
  float* workspace = launch_support::host_split_workspace(HostSpec::kFamily, r.splits, r.workspace_bytes, a.workspace,
                                                          a.workspace_bytes);
  const ktune_mla::Params prm = mla::kernel_params(p, a, r.splits, workspace);  // indices were checked above

  const HostEntry decode = reinterpret_cast<HostEntry>(kernel.functions[0]);
  const HostEntry combine = reinterpret_cast<HostEntry>(kernel.functions[1]);
  detail::HostPool& pool = detail::HostPool::instance();
  const int decode_items = host_pipeline::work_items<HostSpec>(
      mla::host_decode_items(p, r.config, a.num_tokens, r.splits), "num_tokens", a.num_tokens);
  const int combine_items = r.splits > 1 ? host_pipeline::work_items<HostSpec>(mla::host_combine_items(p, a.num_tokens),
                                                                               "num_tokens", a.num_tokens)
                                         : 0;
  pool.run(r.threads, decode_items, 1, [&](int begin, int end) { decode(prm, begin, end); });
  if (r.splits > 1) pool.run(r.threads, combine_items, 8, [&](int begin, int end) { combine(prm, begin, end); });
}

}  // namespace ktune
