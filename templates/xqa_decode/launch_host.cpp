// xqa_decode on the host CPU: argument check (shared with the GPU call) -> index check (host memory can be
// read here, so a bad block-table entry, seq_len or q_cu_seq_lens value is an error instead of a stray read)
// -> config, split count and workspace (templates/host_pipeline.hpp) -> Runtime::get_host
// -> decode items (and combine rows) over the host pool. The host kernel's entry points are
// void(const ktune_xqa::Params&, int begin, int end).
#include "ktune/xqa_decode_host.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "host_pipeline.hpp"
#include "xqa_decode/kernel_params.hpp"

namespace ktune {
namespace {

using xqa::Config;
using xqa::Problem;

using HostEntry = void (*)(const ktune_xqa::Params&, int, int);

// The host front end's view of the family (templates/host_pipeline.hpp). The shape is (batch, max_seq_len).
struct HostSpec {
  using Problem = xqa::Problem;
  using Config = xqa::Config;
  static constexpr const char* kFamily = "xqa_decode";
  static constexpr const char* kConfigGrammar = "a host config key like t64.v8.u4";
  static constexpr int kMaxForcedSplits = 1024;  // as the GPU call
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem&, const pipeline::Shape& s) {
    return {{"b", bucket_pow2_ceil(s.a)}, {"l", bucket_pow2_ceil(s.b)}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const pipeline::Shape&) {
    return xqa::default_config(p, arch);
  }
  static int planned_splits(const Problem& p, const Config& c, const pipeline::Shape& s, int threads) {
    return xqa::choose_num_splits_host(p, c, static_cast<int>(s.a), static_cast<int>(s.b), threads);
  }
  static size_t workspace_bytes(const Problem& p, const Config& c, const pipeline::Shape& s, int splits) {
    return xqa::workspace_bytes(p, c, static_cast<int>(s.a), splits);
  }
};

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  host_pipeline::bad<HostSpec>(field, expected, got);
}

host_pipeline::Resolved<Config> resolve(Runtime& rt, const Problem& p, int batch, int max_seq_len, int threads,
                                        const char* forced_config, int forced_splits) {
  if (batch < 1 || batch > 65535) bad("batch", "1..65535", std::to_string(batch));
  if (max_seq_len < 1 || max_seq_len > xqa::kMaxSeqLen)
    bad("max_seq_len", "an upper bound of seq_lens in 1..2^30", std::to_string(max_seq_len));
  return host_pipeline::resolve<HostSpec>(rt, p, {batch, max_seq_len}, threads, forced_config, forced_splits);
}

// The index arrays are host memory here, so they are checked before the kernel reads through them (a bad
// entry is an error naming the argument, the request and the value, never a stray read): q_cu_seq_lens
// non-decreasing in [0, num_tokens] with at most max_q_len tokens a request; each seq_len in [0, max_seq_len]
// and, for a request with query tokens, at least its query length; and every block-table entry the request
// reads (the first ceil(seq_len / page_size) of its row) a page in [0, num_pages).
void check_indices(const Problem& p, const XqaDecodeArgs& a) {
  if (a.q_cu_seq_lens) {
    if (a.q_cu_seq_lens[0] != 0) bad("q_cu_seq_lens[0]", "0", std::to_string(a.q_cu_seq_lens[0]));
    for (int b = 0; b < a.batch; ++b) {
      const int32_t lo = a.q_cu_seq_lens[b], hi = a.q_cu_seq_lens[b + 1];
      if (hi < lo || hi > a.num_tokens || hi - lo > p.max_q_len)
        bad(fmt::format("q_cu_seq_lens[{}] (request {})", b + 1, b),
            fmt::format("a value in [{}, {}] (non-decreasing, at most max_q_len {} tokens a request, total <= "
                        "num_tokens {})", lo, std::min<int64_t>(a.num_tokens, int64_t{lo} + p.max_q_len),
                        p.max_q_len, a.num_tokens),
            std::to_string(hi));
    }
  }
  for (int b = 0; b < a.batch; ++b) {
    const int32_t len = a.seq_lens[b];
    const int n = a.q_cu_seq_lens ? a.q_cu_seq_lens[b + 1] - a.q_cu_seq_lens[b] : a.q_len_per_req;
    if (len < 0 || len > a.max_seq_len)
      bad(fmt::format("seq_lens[{}] (request {})", b, b), fmt::format("0..max_seq_len ({})", a.max_seq_len),
          std::to_string(len));
    if (len == 0 || n == 0) continue;  // padding: the kernel reads nothing for it
    if (len < n)
      bad(fmt::format("seq_lens[{}] (request {})", b, b),
          fmt::format(">= its {} query tokens (the KV length includes this step's tokens), or 0", n),
          std::to_string(len));
    const int32_t* row = a.block_tables + int64_t{b} * a.max_pages_per_req;
    const int pages = (len + p.page_size - 1) / p.page_size;
    for (int i = 0; i < pages; ++i)
      if (row[i] < 0 || row[i] >= a.num_pages)
        bad(fmt::format("block_tables[{}][{}] (request {}, page {} of {})", b, i, b, i, pages),
            fmt::format("a page index in [0, {}) (num_pages)", a.num_pages), std::to_string(row[i]));
  }
}

}  // namespace

XqaHostPlan xqa_decode_host_plan(Runtime& rt, const Problem& problem, int batch, int max_seq_len, int threads,
                                 const char* config, int num_splits) {
  const Problem p = host_pipeline::unchecked(problem);
  return host_pipeline::split_plan(resolve(rt, p, batch, max_seq_len, threads, config, num_splits));
}

const LoadedKernel& xqa_decode_host_kernel(Runtime& rt, const Problem& problem, const std::string& config) {
  return host_pipeline::kernel<HostSpec>(rt, host_pipeline::unchecked(problem), config, 2);  // decode, combine
}

void xqa_decode_host(Runtime& rt, const Problem& p, const XqaDecodeArgs& a, int threads) {
  {
    XqaDecodeArgs v = a;  // the GPU check, except that a null workspace is allowed (ktune's scratch is used)
    if (!v.workspace) v.num_splits = 0;
    xqa_decode_validate(p, v);
  }
  check_indices(p, a);
  const auto r = resolve(rt, host_pipeline::unchecked(p), a.batch, a.max_seq_len, threads, a.config, a.num_splits);
  const LoadedKernel& kernel = xqa_decode_host_kernel(rt, p, r.config_key);
  float* workspace = launch_support::host_split_workspace(HostSpec::kFamily, r.splits, r.workspace_bytes, a.workspace,
                                                          a.workspace_bytes);
  const ktune_xqa::Params prm = xqa::kernel_params(p, a, r.splits, workspace);

  const HostEntry decode = reinterpret_cast<HostEntry>(kernel.functions[0]);
  const HostEntry combine = reinterpret_cast<HostEntry>(kernel.functions[1]);
  detail::HostPool& pool = detail::HostPool::instance();
  const int decode_items = host_pipeline::work_items<HostSpec>(xqa::host_decode_items(p, a.batch, r.splits), "batch",
                                                               a.batch);
  const int combine_items =
      r.splits > 1 ? host_pipeline::work_items<HostSpec>(xqa::host_combine_items(p, a.batch), "batch", a.batch) : 0;
  pool.run(r.threads, decode_items, 1, [&](int begin, int end) { decode(prm, begin, end); });
  if (r.splits > 1) pool.run(r.threads, combine_items, 8, [&](int begin, int end) { combine(prm, begin, end); });
}

}  // namespace ktune
