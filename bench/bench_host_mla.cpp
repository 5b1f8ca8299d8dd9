// Host backend bench for sparse_mla_decode: the JIT-specialized host kernel
// (templates/sparse_mla_decode/host_kernel.h with every shape value a compile-time constant, compiled for this
// CPU by libktune_host.so) against the same kernel source compiled ahead of time into this binary (g++ -O3
// -march=native) with run-time shape values — what a library without JIT would ship — and, to separate
// specialization from compiler, the same run-time-shape code compiled by the JIT (clang 19, O3, this CPU).
// All three run on the same thread pool with the same split plan over the same inputs. Also: compile time of
// each host specialization of the problem (cold, no cache).
//
//   bench_host_mla [--tokens 4] [--heads 16] [--topk 2048] [--page 64] [--bf16] [--threads 0] [--iters 20]
//                  [--config KEY] [--json OUT]
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
#include "ktune/sparse_mla_decode_host.hpp"
#include "sparse_mla/mla_reference.hpp"
#include "sparse_mla_decode/host_kernel.h"
#include "sparse_mla_decode/spec.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace host_bench;  // arg, flag, time_calls, ... (host_bench_util.hpp)
namespace kc = ::ktune_common;

namespace {

// The run-time-shape spec an AOT library would instantiate per cache format and tunables: heads, ranks, topk,
// tile and heads per item are run-time members; arrays are sized for the largest shape it supports (rank 512 +
// rope 128, 64-slot tiles, 32 heads per item). The same text is compiled here and by the generic JIT build.
#define KTUNE_BENCH_DYN_SPEC                                                  \
  namespace ktune_bench {                                                     \
  template <bool FP8, int VW, int UN>                                         \
  struct DynSpec {                                                            \
    int kNumHeads, kLat, kRope, kTopk, kTile, kHeadsPerItem;                  \
    static constexpr bool kFp8 = FP8;                                         \
    static constexpr int kVecWidth = VW, kUnroll = UN;                        \
    static constexpr int kCapDim = 640, kCapTile = 64, kCapHeads = 32;        \
  };                                                                          \
  }
#define KTUNE_STR2(...) #__VA_ARGS__
#define KTUNE_STR(x) KTUNE_STR2(x)
const char* const kDynSpecSource = KTUNE_STR(KTUNE_BENCH_DYN_SPEC);

}  // namespace

KTUNE_BENCH_DYN_SPEC

namespace {

using DynFp8 = ktune_bench::DynSpec<true, 16, 2>;  // the default host config's tunables (v16.u2)
using DynBf16 = ktune_bench::DynSpec<false, 16, 2>;

struct Inputs {
  std::vector<uint16_t> q, out;
  std::vector<unsigned char> kv;
  std::vector<int32_t> idx;
  ktune_mla::Params prm{};
};

// Every token owns a region of 4 x topk slots (pages in a shuffled order) and selects topk distinct slots
// there, as the tuning workload does; rows from a pool of 2048 random rows in the problem's format.
Inputs make_inputs(const mla::Problem& p, int tokens) {
  Inputs in;
  const int dim = p.dim(), rb = p.row_bytes(), P = p.page_size;
  const int64_t region = int64_t{4} * p.topk, pages_per_tok = (region + P - 1) / P;
  const int64_t pages = pages_per_tok * tokens;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<unsigned char> pool(size_t(2048) * rb);
  std::vector<float> v(dim);
  for (int r = 0; r < 2048; ++r) {
    for (float& x : v) x = normal(rng);
    test::mla_encode_row(p, v.data(), pool.data() + size_t(r) * rb);
  }
  in.kv.resize(size_t(pages) * P * rb);
  for (size_t r = 0; r < size_t(pages) * P; ++r)
    std::memcpy(in.kv.data() + r * rb, pool.data() + (r * 7919u % 2048) * rb, rb);
  in.q.resize(size_t(tokens) * p.num_heads * dim);
  for (auto& x : in.q) x = kc::float_to_bf16(normal(rng));
  in.out.resize(size_t(tokens) * p.num_heads * p.kv_lora_rank);
  std::vector<int64_t> page_order(static_cast<size_t>(pages));
  std::iota(page_order.begin(), page_order.end(), 0);
  std::shuffle(page_order.begin(), page_order.end(), rng);
  in.idx.resize(size_t(tokens) * p.topk);
  std::vector<int32_t> slots(static_cast<size_t>(region));
  for (int t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < region; ++s)
      slots[s] = static_cast<int32_t>(page_order[t * pages_per_tok + s / P] * P + s % P);
    for (int k = 0; k < p.topk; ++k) {
      std::swap(slots[k], slots[k + rng() % (region - k)]);
      in.idx[size_t(t) * p.topk + k] = slots[k];
    }
  }
  auto& prm = in.prm;
  prm.q = in.q.data();
  prm.kv_cache = in.kv.data();
  prm.indices = in.idx.data();
  prm.out = in.out.data();
  prm.num_tokens = tokens;
  prm.num_splits = 1;
  prm.num_slots = pages * P;
  prm.softmax_scale = 1.f / std::sqrt(float(dim));
  return in;
}

template <class Dyn>
void aot_decode(const Dyn& s, const ktune_mla::Params& p, int b, int e) {
  ktune_mla::host::Kernel<Dyn>::decode(s, p, b, e);
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!Runtime::host_available(&why)) {
    fmt::print("bench_host_mla: the LLVM host backend is absent ({})\n", why);
    return 1;
  }
  mla::Problem p;
  p.num_heads = std::stoi(arg(argc, argv, "heads", "16"));
  p.topk = std::stoi(arg(argc, argv, "topk", "2048"));
  p.page_size = std::stoi(arg(argc, argv, "page", "64"));
  p.kv_format = flag(argc, argv, "bf16") ? mla::KvFormat::Bf16 : mla::KvFormat::Fp8DsMla;
  p.validate();
  const int tokens = std::stoi(arg(argc, argv, "tokens", "4"));
  int threads = std::stoi(arg(argc, argv, "threads", "0"));
  const int iters = std::stoi(arg(argc, argv, "iters", "20"));
  const std::string json_out = arg(argc, argv, "json", "");
  if (threads <= 0) threads = detail::HostPool::hardware_threads();
  Arch host;
  host.host = true;
  const mla::Config def = mla::default_config(p, host);
  const mla::Config cfg = mla::Config::from_key(arg(argc, argv, "config", def.key()));
  if (cfg.vec_width != 16 || cfg.unroll != 2) {
    fmt::print("bench_host_mla: the AOT build is instantiated for v16.u2; pick a config with those tunables\n");
    return 1;
  }

  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("bench_host_mla.db");
  Runtime rt(o);

  // (1) compile time of every host specialization of this problem (cold: empty cache).
  std::vector<double> compile_ms;
  std::vector<std::string> compile_rows;
  for (const mla::Config& c : mla::search_space(p, host)) {
    const EnsureResult r = rt.ensure_binary(mla::generate(p, c, host), host);
    compile_ms.push_back(r.compile_ms);
    compile_rows.push_back(fmt::format("{}:{:.0f}", c.key(), r.compile_ms));
  }
  std::vector<double> sorted = compile_ms;
  std::sort(sorted.begin(), sorted.end());

  // (2) the three variants on identical inputs, same pool, same split plan.
  Inputs in = make_inputs(p, tokens);
  const int splits = mla::choose_num_splits_host(p, cfg, tokens, threads);
  std::vector<float> ws(mla::workspace_bytes(p, tokens, splits) / sizeof(float) + 1);
  in.prm.num_splits = splits;
  in.prm.workspace = splits > 1 ? ws.data() : nullptr;
  const int items = int(mla::host_decode_items(p, cfg, tokens, splits));
  auto& pool = detail::HostPool::instance();

  const LoadedKernel& spec = sparse_mla_decode_host_kernel(rt, p, cfg.key());
  using Entry = void (*)(const ktune_mla::Params&, int, int);
  const Entry jit_decode = reinterpret_cast<Entry>(spec.functions[0]);
  const Entry jit_combine = reinterpret_cast<Entry>(spec.functions[1]);

  const bool fp8 = p.kv_format == mla::KvFormat::Fp8DsMla;
  const DynFp8 dyn8{p.num_heads, p.kv_lora_rank, p.rope_dim, p.topk, cfg.tile, cfg.heads_per_cta};
  const DynBf16 dyn16{p.num_heads, p.kv_lora_rank, p.rope_dim, p.topk, cfg.tile, cfg.heads_per_cta};
  const std::string dyn_type = fp8 ? "DynSpec<true, 16, 2>" : "DynSpec<false, 16, 2>";
  GeneratedKernel generic;
  generic.family = "bench_host_mla";
  generic.problem_key = fp8 ? "generic_fp8ds" : "generic_bf16";
  generic.config_key = "v16.u2";
  generic.source = std::string("#include \"sparse_mla_decode/host_kernel.h\"\n") + kDynSpecSource +
                   "\nnamespace ktune_bench {\n"
                   "void generic_decode(const " + dyn_type + "& s, const ktune_mla::Params& p, int b, int e) {\n"
                   "  ktune_mla::host::Kernel<" + dyn_type + ">::decode(s, p, b, e);\n}\n}\n";
  generic.entry_points = {"ktune_bench::generic_decode"};
  const auto t_generic = Clock::now();
  const LoadedKernel& gen = rt.get_host(std::string("bench_host_mla/generic/") + generic.problem_key, [&] { return generic; });
  const double generic_compile_ms = ms_since(t_generic);
  const void* gen_fn = gen.functions[0];

  auto combine = [&] {
    if (splits > 1)
      pool.run(threads, int(mla::host_combine_items(p, tokens)), 8, [&](int b, int e) { jit_combine(in.prm, b, e); });
  };
  auto run_jit = [&] {
    pool.run(threads, items, 1, [&](int b, int e) { jit_decode(in.prm, b, e); });
    combine();
  };
  auto run_aot = [&] {
    pool.run(threads, items, 1, [&](int b, int e) {
      if (fp8) aot_decode(dyn8, in.prm, b, e);
      else aot_decode(dyn16, in.prm, b, e);
    });
    combine();
  };
  auto run_generic = [&] {
    pool.run(threads, items, 1, [&](int b, int e) {
      if (fp8) reinterpret_cast<void (*)(const DynFp8&, const ktune_mla::Params&, int, int)>(gen_fn)(dyn8, in.prm, b, e);
      else reinterpret_cast<void (*)(const DynBf16&, const ktune_mla::Params&, int, int)>(gen_fn)(dyn16, in.prm, b, e);
    });
    combine();
  };

  const Variants v = time_variants(run_jit, run_aot, run_generic, in.out, iters);
  const Timing &tj = v.jit, &ta = v.aot, &tg = v.generic;
  const double diff_aot = v.diff_aot, diff_gen = v.diff_generic;
  const double flops = 2.0 * tokens * p.num_heads * double(p.topk) * (p.dim() + p.kv_lora_rank);
  const double ratio_aot = ta.median_ms / tj.median_ms, ratio_gen = tg.median_ms / tj.median_ms;
  const std::string tid = Runtime::host_target_id();
  fmt::print("host: {} ({} threads); LLVM {}\n", tid.substr(0, tid.find('/', tid.find('/') + 1)), threads,
             tid.substr(tid.rfind("llvm")));
  fmt::print("shape: {} tokens, {} heads, topk {}, {}, page {} ({}), config {}, {} splits\n", tokens, p.num_heads,
             p.topk, fp8 ? "fp8_ds_mla" : "bf16", p.page_size, p.key(), cfg.key(), splits);
  fmt::print("| variant | median ms | best ms | CPU ms/call | GFLOP/s | time vs JIT-specialized | CPU vs JIT | max abs diff vs JIT |\n"
             "|---|---|---|---|---|---|---|---|\n");
  fmt::print("| JIT specialized (clang 19, constants) | {:.3f} | {:.3f} | {:.3f} | {:.1f} | 1.00 | 1.00 | 0 |\n", tj.median_ms,
             tj.min_ms, tj.cpu_ms, flops / tj.median_ms / 1e6);
  fmt::print("| AOT, run-time shapes (g++ -O3 -march=native) | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.2f}x | {:.2f}x | {:.2g} |\n",
             ta.median_ms, ta.min_ms, ta.cpu_ms, flops / ta.median_ms / 1e6, ratio_aot, ta.cpu_ms / tj.cpu_ms, diff_aot);
  fmt::print("| JIT generic, run-time shapes (clang 19) | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.2f}x | {:.2f}x | {:.2g} |\n",
             tg.median_ms, tg.min_ms, tg.cpu_ms, flops / tg.median_ms / 1e6, ratio_gen, tg.cpu_ms / tj.cpu_ms, diff_gen);
  fmt::print("compile per host specialization (cold, {} configs): median {:.0f} ms, min {:.0f}, max {:.0f}; generic: {:.0f} ms\n",
             compile_ms.size(), sorted[sorted.size() / 2], sorted.front(), sorted.back(), generic_compile_ms);
  fmt::print("  {}\n", fmt::join(compile_rows, " "));
  if (!json_out.empty()) {
    std::ofstream(json_out) << variants_json(tj, ta, tg, sorted[sorted.size() / 2], threads).set("splits", splits).dump()
                            << "\n";
  }
  return 0;
}
