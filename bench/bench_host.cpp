// Host backend bench: the JIT-specialized host xqa_decode kernel (every shape value a compile-time
// constant, compiled for this CPU by libktune_host.so) against the same kernel source compiled ahead of time
// by the project's C++ compiler into this binary (-O3 -march=native) with run-time shape values — what a
// library without JIT would ship — and, to separate specialization from compiler, against the same run-time-
// shape code compiled by the JIT (clang 19 at O3 for this CPU). All three run on the same thread pool with the
// same split plan over the same inputs. Also: compile time of each host specialization (cold, no cache).
//
//   bench_host [--batch 4] [--heads 32] [--kv-heads 8] [--head-dim 128] [--seq-len 4096] [--threads 0]
//              [--iters 30] [--json OUT]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "host_bench_util.hpp"
#include "ktune_internal/host_pool.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "support/temp_dir.hpp"
#include "xqa_decode/host_kernel.h"
#include "xqa_decode/spec.hpp"

using namespace ktune;
using namespace host_bench;  // arg, flag, time_calls, ... (host_bench_util.hpp)
namespace kc = ::ktune_common;

namespace {

// The run-time-shape spec: the bf16, HND, q_len-1, no-mask variant an AOT library would instantiate, with every
// shape value (head_dim, heads, group, page size, max q_len, tile) a run-time member, arrays sized for the
// largest shape it supports. The source text is identical for the AOT build (here) and the generic JIT build.
const char* const kDynSpecSource = R"(
namespace ktune_bench {
template <int VW, int UN>
struct DynSpec {
  int kHeadDim, kNumKvHeads, kGroupSize, kPageSize, kMaxQLen, kTokensPerTile;
  static constexpr int kQType = 0, kKVType = 0, kOutType = 0;
  static constexpr bool kLayoutHND = true;
  static constexpr int kMask = 0;
  static constexpr bool kSinks = false, kSlidingWindow = false, kSoftcap = false, kWriteLse = false;
  static constexpr int kVecWidth = VW, kUnroll = UN;
  static constexpr int kCapHeadDim = 256, kCapRows = 64, kCapTile = 128;
};
}  // namespace ktune_bench
)";

}  // namespace

// The same text, compiled here ahead of time.
namespace ktune_bench {
template <int VW, int UN>
struct DynSpec {
  int kHeadDim, kNumKvHeads, kGroupSize, kPageSize, kMaxQLen, kTokensPerTile;
  static constexpr int kQType = 0, kKVType = 0, kOutType = 0;
  static constexpr bool kLayoutHND = true;
  static constexpr int kMask = 0;
  static constexpr bool kSinks = false, kSlidingWindow = false, kSoftcap = false, kWriteLse = false;
  static constexpr int kVecWidth = VW, kUnroll = UN;
  static constexpr int kCapHeadDim = 256, kCapRows = 64, kCapTile = 128;
};
using Dyn = DynSpec<16, 4>;  // the default host config's tunables (t64.v16.u4)
}  // namespace ktune_bench

namespace {

using DynEntry = void (*)(const ktune_bench::Dyn&, const ktune_xqa::Params&, int, int);

void aot_decode(const ktune_bench::Dyn& s, const ktune_xqa::Params& p, int b, int e) {
  ktune_xqa::host::Kernel<ktune_bench::Dyn>::decode(s, p, b, e);
}

struct Inputs {
  std::vector<uint16_t> q, kv, out;
  std::vector<int> bt, lens;
  ktune_xqa::Params prm{};
};

Inputs make_inputs(const xqa::Problem& p, int batch, int seq_len) {
  Inputs in;
  const int D = p.head_dim, HKV = p.num_kv_heads, HQ = p.num_q_heads, P = p.page_size;
  const int pages_per_req = (seq_len + P - 1) / P;
  const size_t pages = size_t(batch) * pages_per_req;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> pool(1 << 20);
  for (auto& x : pool) x = kc::float_to_bf16(normal(rng));
  in.kv.resize(pages * 2 * HKV * P * D);
  const size_t chunk = pool.size() - 1024;
  for (size_t i = 0; i < in.kv.size(); i += chunk)
    std::memcpy(in.kv.data() + i, pool.data() + (i / chunk * 13) % 1024, std::min(chunk, in.kv.size() - i) * 2);
  in.q.resize(size_t(batch) * HQ * D);
  for (auto& x : in.q) x = kc::float_to_bf16(normal(rng));
  in.out.resize(in.q.size());
  in.bt.resize(pages);
  std::iota(in.bt.begin(), in.bt.end(), 0);
  std::shuffle(in.bt.begin(), in.bt.end(), rng);
  in.lens.assign(batch, seq_len);
  auto& prm = in.prm;
  prm.q = in.q.data();
  prm.kv_cache = in.kv.data();
  prm.block_tables = in.bt.data();
  prm.seq_lens = in.lens.data();
  prm.out = in.out.data();
  prm.batch = batch;
  prm.num_tokens = batch;
  prm.q_len_per_req = 1;
  prm.max_pages_per_req = pages_per_req;
  prm.num_pages = static_cast<long long>(pages);
  prm.bmm1_scale = 1.f / std::sqrt(float(D));
  prm.bmm2_scale = 1.f;
  prm.window_left = -1;
  prm.num_splits = 1;
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!Runtime::host_available(&why)) {
    fmt::print("bench_host: the LLVM host backend is absent ({})\n", why);
    return 1;
  }
  const int batch = std::stoi(arg(argc, argv, "batch", "4"));
  const int heads = std::stoi(arg(argc, argv, "heads", "32"));
  const int kv_heads = std::stoi(arg(argc, argv, "kv-heads", "8"));
  const int head_dim = std::stoi(arg(argc, argv, "head-dim", "128"));
  const int seq_len = std::stoi(arg(argc, argv, "seq-len", "4096"));
  int threads = std::stoi(arg(argc, argv, "threads", "0"));
  const int iters = std::stoi(arg(argc, argv, "iters", "30"));
  const std::string json_out = arg(argc, argv, "json", "");
  if (threads <= 0) threads = detail::HostPool::hardware_threads();

  xqa::Problem p;
  p.head_dim = head_dim;
  p.num_q_heads = heads;
  p.num_kv_heads = kv_heads;
  p.page_size = 32;
  p.max_q_len = 1;
  p.mask = xqa::MaskKind::None;
  p.validate();
  Arch host;
  host.host = true;
  const xqa::Config cfg = xqa::default_config(p, host);

  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("bench_host.db");
  Runtime rt(o);

  // (1) compile time of every host specialization of this problem (cold: empty cache).
  std::vector<double> compile_ms;
  std::vector<std::string> compile_rows;
  for (const xqa::Config& c : xqa::search_space(p, host)) {
    const EnsureResult r = rt.ensure_binary(xqa::generate(p, c, host), host);
    compile_ms.push_back(r.compile_ms);
    compile_rows.push_back(fmt::format("{}:{:.0f}", c.key(), r.compile_ms));
  }
  std::vector<double> sorted = compile_ms;
  std::sort(sorted.begin(), sorted.end());

  // (2) the three variants on identical inputs, same pool, same split plan.
  Inputs in = make_inputs(p, batch, seq_len);
  const int splits = xqa::choose_num_splits_host(p, cfg, batch, seq_len, threads);
  std::vector<float> ws(xqa::workspace_bytes(p, cfg, batch, splits) / sizeof(float) + 1);
  in.prm.num_splits = splits;
  in.prm.workspace = splits > 1 ? ws.data() : nullptr;
  const int items = int(xqa::host_decode_items(p, batch, splits));
  auto& pool = detail::HostPool::instance();

  const LoadedKernel& spec = xqa_decode_host_kernel(rt, p, cfg.key());
  using Entry = void (*)(const ktune_xqa::Params&, int, int);
  const Entry jit_decode = reinterpret_cast<Entry>(spec.functions[0]);
  const Entry jit_combine = reinterpret_cast<Entry>(spec.functions[1]);

  ktune_bench::Dyn dyn{p.head_dim, p.num_kv_heads, p.group_size(), p.page_size, p.max_q_len, cfg.tokens_per_tile};
  GeneratedKernel generic;
  generic.family = "bench_host";
  generic.problem_key = "generic_bf16_q1";
  generic.config_key = cfg.key();
  generic.source = std::string("#include \"xqa_decode/host_kernel.h\"\n") + kDynSpecSource +
                   "namespace ktune_bench {\n"
                   "void generic_decode(const DynSpec<16, 4>& s, const ktune_xqa::Params& p, int b, int e) {\n"
                   "  ktune_xqa::host::Kernel<DynSpec<16, 4>>::decode(s, p, b, e);\n}\n}\n";
  generic.entry_points = {"ktune_bench::generic_decode"};
  const auto t_generic = Clock::now();
  const LoadedKernel& gen = rt.get_host("bench_host/generic", [&] { return generic; });
  const double generic_compile_ms = ms_since(t_generic);
  const DynEntry gen_decode = reinterpret_cast<DynEntry>(gen.functions[0]);

  auto combine = [&] {
    if (splits > 1)
      pool.run(threads, int(xqa::host_combine_items(p, batch)), 8, [&](int b, int e) { jit_combine(in.prm, b, e); });
  };
  auto run_jit = [&] {
    pool.run(threads, items, 1, [&](int b, int e) { jit_decode(in.prm, b, e); });
    combine();
  };
  auto run_aot = [&] {
    pool.run(threads, items, 1, [&](int b, int e) { aot_decode(dyn, in.prm, b, e); });
    combine();
  };
  auto run_generic = [&] {
    pool.run(threads, items, 1, [&](int b, int e) { gen_decode(dyn, in.prm, b, e); });
    combine();
  };

  const Variants v = time_variants(run_jit, run_aot, run_generic, in.out, iters);
  const Timing &tj = v.jit, &ta = v.aot, &tg = v.generic;
  const double diff_aot = v.diff_aot, diff_gen = v.diff_generic;
  const double kv_bytes = double(batch) * seq_len * 2 * kv_heads * head_dim * 2;
  const double ratio_aot = ta.median_ms / tj.median_ms, ratio_gen = tg.median_ms / tj.median_ms;

  fmt::print("host: {} ({} threads); LLVM {}\n", Runtime::host_target_id().substr(0, Runtime::host_target_id().find('/', Runtime::host_target_id().find('/') + 1)),
             threads, Runtime::host_target_id().substr(Runtime::host_target_id().rfind("llvm")));
  fmt::print("shape: B={} heads {}/{} D={} L={} bf16 q_len 1 page 32 HND, config {}, {} splits\n", batch, heads, kv_heads,
             head_dim, seq_len, cfg.key(), splits);
  fmt::print("| variant | median ms | best ms | CPU ms/call | KV GB/s | time vs JIT-specialized | CPU vs JIT | max abs diff vs JIT |\n"
             "|---|---|---|---|---|---|---|---|\n");
  fmt::print("| JIT specialized (clang 19, constants) | {:.3f} | {:.3f} | {:.3f} | {:.1f} | 1.00 | 1.00 | 0 |\n", tj.median_ms,
             tj.min_ms, tj.cpu_ms, kv_bytes / tj.median_ms / 1e6);
  fmt::print("| AOT, run-time shapes (g++ -O3 -march=native) | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.2f}x | {:.2f}x | {:.2g} |\n",
             ta.median_ms, ta.min_ms, ta.cpu_ms, kv_bytes / ta.median_ms / 1e6, ratio_aot, ta.cpu_ms / tj.cpu_ms, diff_aot);
  fmt::print("| JIT generic, run-time shapes (clang 19) | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.2f}x | {:.2f}x | {:.2g} |\n",
             tg.median_ms, tg.min_ms, tg.cpu_ms, kv_bytes / tg.median_ms / 1e6, ratio_gen, tg.cpu_ms / tj.cpu_ms, diff_gen);
  fmt::print("compile per host specialization (cold, {} configs): median {:.0f} ms, min {:.0f}, max {:.0f}; generic: {:.0f} ms\n",
             compile_ms.size(), sorted[sorted.size() / 2], sorted.front(), sorted.back(), generic_compile_ms);
  fmt::print("  {}\n", fmt::join(compile_rows, " "));
  if (!json_out.empty()) {
    std::ofstream(json_out) << variants_json(tj, ta, tg, sorted[sorted.size() / 2], threads).set("splits", splits).dump()
                            << "\n";
  }
  return 0;
}
