// xqa_decode through the real runtime (ktune::xqa_decode) against the fp64 CPU reference.
//
// [gpu][xqa]: a fixed, seeded sample of the specialization matrix (head_dim x GQA ratio x page size x
//   layout x KV dtype x q_len {1,2,3,4,7,16} x mask x sinks x window x softcap x lse x config) plus targeted edge
//   cases (among them draft trees: q_len 32/48/64, causal and two-word explicit masks, up to 1024 rows a kv head;
//   the wgmma configs; output dtypes other than Q's). The kernels are a fixed list (so `[xqa_precompile]` can put
//   them into a cache ahead of time, with the checked kernels of the [checked] tests); the
//   data are fresh every run: seq_lens (1..64K, not page-aligned), uniform/ragged form, zero-length padding
//   requests, shuffled block tables, NaN-filled unused pages, poisoned outputs/workspace, planned and forced
//   split counts. The run seed is printed; KTUNE_TEST_SEED=<seed> replays it.
// [xqa] (CPU only): argument validation names the field and runs before any driver call.
// [.][xqa_precompile]: compiles every kernel of the GPU tests into $KTUNE_CACHE for $KTUNE_XQA_ARCH (default
//   sm_90a); needs no GPU.
//
// Tolerances: ||out - ref|| / ||ref|| < 1e-2 for 16-bit outputs; 8e-2 for e4m3 outputs (3 mantissa bits:
// rounding alone gives a relative RMS error of ~2.5-3%, so 8e-2 leaves room for the kernel's own fp16 P and
// accumulation rounding without hiding a wrong row, which is off by O(1)). Every row: < 5x that, with a floor on
// the row norm for e4m3 (see xqa_compare). LSE (when written): |lse - ref| < 2e-2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/tuning.hpp"
#include "ktune/ktune.h"
#include "ktune/xqa_decode.hpp"
#include "support/cache_file.hpp"
#include "support/gpu.hpp"
#include "support/precompile.hpp"
#include "support/random_inputs.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"
#include "support/xqa_forms.hpp"
#include "support/xqa_oracle.hpp"
#include "support/xqa_reference.hpp"

using namespace ktune;
using namespace ktune::xqa;
namespace kc = ::ktune_common;

namespace {

constexpr float kQScale = 0.25f, kOScale = 0.25f;  // what make_xqa_case folds in for FP8 Q / FP8 output

// ---------------------------------------------------------------------------------------------------------
// The kernel list: a fixed-seed sample of the matrix plus edge cases. `config` empty = the launch resolves it
// (tuned or default); otherwise it is forced.
struct Combo {
  std::string name;
  Problem p;
  std::string config;
  // data knobs; < 0 = drawn per run
  int batch = -1, max_seq_len = -1, min_seq_len = -1, ragged = -1, forced_splits = -1, window_left = -1;
  double zero_fraction = -1, short_fraction = -1;
};

constexpr auto make_problem = test::make_xqa_problem;

const Arch kSm90a{9, 0, 'a'};

std::vector<Combo> sampled_combos() {
  std::vector<Combo> out;
  test::SplitMix rng(20261129);  // fixed: the kernel list never changes between runs
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng.next() % v.size()); };
  const DType BF = kc::kBF16, FP = kc::kFP16, E4 = kc::kE4M3;
  while (out.size() < 96) {
    Combo c;
    const int d = pick({64, 128, 256});
    const int group = pick({1, 2, 3, 4, 5, 6, 8, 12, 16});
    const int hkv = pick({1, 2, 4, 8});
    const int page = pick({16, 32, 64, 128});
    const Layout lay = rng.uniform() < 0.5 ? Layout::Hnd : Layout::Nhd;
    const DType kv = DType(pick({0, 1, 2}));
    DType q = kv, o;
    if (kv == E4) q = rng.uniform() < 0.15 ? E4 : (rng.uniform() < 0.6 ? BF : FP);
    if (rng.uniform() < 0.15) o = E4;
    else o = q == E4 ? (rng.uniform() < 0.5 ? BF : FP) : q;
    const int ql = pick({1, 2, 3, 4, 7, 16});
    MaskKind m;
    if (ql == 1) m = rng.uniform() < 0.6 ? MaskKind::None : (rng.uniform() < 0.7 ? MaskKind::Causal : MaskKind::Explicit);
    else m = rng.uniform() < 0.5 ? MaskKind::Causal : MaskKind::Explicit;
    c.p = make_problem(d, hkv * group, hkv, page, lay, q, kv, o, ql, m, rng.uniform() < 0.3, rng.uniform() < 0.3,
                       rng.uniform() < 0.15, rng.uniform() < 0.4);
    if (rng.uniform() < 0.4) {
      const std::vector<Config> space = search_space(c.p, kSm90a);
      c.config = space[rng.next() % space.size()].key();
    }
    c.name = "m" + std::to_string(out.size());
    out.push_back(c);
  }
  return out;
}

std::vector<Combo> edge_combos() {
  const DType BF = kc::kBF16, FP = kc::kFP16, E4 = kc::kE4M3;
  const Layout H = Layout::Hnd, N = Layout::Nhd;
  const MaskKind NO = MaskKind::None, CA = MaskKind::Causal, EX = MaskKind::Explicit;
  std::vector<Combo> v;
  auto add = [&](const char* name, Problem p, std::string cfg, std::function<void(Combo&)> knobs) {
    Combo c;
    c.name = name;
    c.p = p;
    c.config = std::move(cfg);
    knobs(c);
    v.push_back(c);
  };
  // long contexts (split-KV): 30K..64K tokens, planned and many forced splits
  add("long_bf16_q1", make_problem(128, 32, 8, 32, H, BF, BF, BF, 1, NO, false, false, false, true), "",
      [](Combo& c) { c.batch = 2; c.min_seq_len = 30000; c.max_seq_len = 65536; c.short_fraction = 0; c.forced_splits = 77; c.zero_fraction = 0; });
  add("long_fp8q_q2_nhd", make_problem(128, 8, 2, 64, N, E4, E4, BF, 2, CA, true, false, false, true), "",
      [](Combo& c) { c.batch = 2; c.min_seq_len = 40000; c.max_seq_len = 65536; c.short_fraction = 0; c.forced_splits = 5; c.zero_fraction = 0; });
  add("long_window_sink", make_problem(64, 16, 4, 16, H, FP, FP, FP, 4, CA, true, true, false, true), "",
      [](Combo& c) { c.batch = 3; c.min_seq_len = 20000; c.max_seq_len = 50000; c.window_left = 3000; c.forced_splits = 13; });
  // MQA, group 16, q_len 16 explicit tree mask, ragged with padding
  add("mqa_q16_mask", make_problem(64, 16, 1, 16, N, FP, FP, FP, 16, EX, true, false, false, true), "",
      [](Combo& c) { c.batch = 6; c.max_seq_len = 2000; c.ragged = 1; c.zero_fraction = 0.3; });
  // 256 query rows per kv head (group 16 x q_len 16), head_dim 256, every flag, e4m3 output
  add("rows256_allflags", make_problem(256, 32, 2, 128, H, BF, BF, E4, 16, EX, true, true, true, true), "",
      [](Combo& c) { c.batch = 3; c.max_seq_len = 1500; c.window_left = 700; });
  // all requests zero-length (ragged CUDA-graph padding): nothing may be written
  add("all_padding", make_problem(128, 16, 4, 32, H, BF, BF, BF, 4, CA, false, false, false, true), "",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 1.0; c.max_seq_len = 500; c.forced_splits = 3; });
  // uniform form with seq_len 0 padding requests, fp8 KV
  add("uniform_padding_fp8", make_problem(128, 32, 8, 32, H, BF, E4, BF, 4, CA, false, false, false, true), "",
      [](Combo& c) { c.batch = 6; c.ragged = 0; c.zero_fraction = 0.5; c.max_seq_len = 3000; });
  // only draft tokens (seq_len in [q_len, q_len + 40]), window 0 (each query sees itself only)
  add("drafts_only_window0", make_problem(128, 12, 2, 16, N, BF, BF, BF, 7, EX, false, true, false, true), "",
      [](Combo& c) { c.batch = 5; c.short_fraction = 1.0; c.window_left = 0; c.max_seq_len = 60; });
  // tile > page (4 pages per tile) and tile < page
  add("tile_gt_page", make_problem(128, 8, 8, 16, H, BF, BF, BF, 4, CA, false, false, false, false), "t64.s3.w4",
      [](Combo& c) { c.batch = 4; c.max_seq_len = 5000; });
  add("tile_lt_page", make_problem(64, 24, 4, 128, N, FP, E4, FP, 3, CA, true, false, true, false), "t32.s4.w2",
      [](Combo& c) { c.batch = 4; c.max_seq_len = 5000; });
  // draft trees (q_len 32..64): causal and explicit masks (two mask words a row above 32), uniform and ragged
  // with padding, bf16 and fp8 KV, default and forced configs, planned and forced splits
  add("tree_q32_causal_bf16", make_problem(128, 32, 8, 32, H, BF, BF, BF, 32, CA, false, false, false, true), "",
      [](Combo& c) { c.batch = 4; c.ragged = 0; c.max_seq_len = 3000; });
  add("tree_q32_mask_fp8_ragged", make_problem(128, 32, 8, 16, N, BF, E4, BF, 32, EX, true, false, false, true), "",
      [](Combo& c) { c.batch = 5; c.ragged = 1; c.zero_fraction = 0.3; c.max_seq_len = 2500; });
  add("tree_q48_mask_fp8_ragged", make_problem(128, 16, 2, 16, N, BF, E4, BF, 48, EX, true, false, false, true), "",
      [](Combo& c) { c.batch = 5; c.ragged = 1; c.zero_fraction = 0.3; c.max_seq_len = 2500; });
  add("tree_q48_causal_bf16_uniform", make_problem(64, 24, 4, 64, H, BF, BF, BF, 48, CA, false, true, false, false), "",
      [](Combo& c) { c.batch = 4; c.ragged = 0; c.zero_fraction = 0.25; c.max_seq_len = 2000; c.window_left = 300; });
  add("tree_q64_mask_bf16_ragged", make_problem(128, 32, 8, 32, H, BF, BF, BF, 64, EX, false, false, false, true), "",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 0.25; c.max_seq_len = 4000; });
  add("tree_q64_mask_bf16_uniform", make_problem(128, 32, 8, 32, N, BF, BF, BF, 64, EX, true, false, false, true), "",
      [](Combo& c) { c.batch = 3; c.ragged = 0; c.max_seq_len = 3000; });
  add("tree_q64_causal_fp8_uniform", make_problem(128, 32, 8, 32, H, BF, E4, BF, 64, CA, false, false, false, true), "",
      [](Combo& c) { c.batch = 4; c.ragged = 0; c.zero_fraction = 0.3; c.max_seq_len = 4000; });
  add("tree_q64_causal_fp8_ragged", make_problem(64, 16, 4, 16, N, FP, E4, FP, 64, CA, false, false, true, false), "",
      [](Combo& c) { c.batch = 5; c.ragged = 1; c.zero_fraction = 0.2; c.max_seq_len = 2000; });
  // 1024 rows a kv head (q64 x group 16): row groups over CTAs; head_dim 256 bf16, fp8 KV with e4m3 output
  add("tree_q64_rows1024_mask_d256", make_problem(256, 32, 2, 64, N, BF, BF, BF, 64, EX, true, true, false, true), "",
      [](Combo& c) { c.batch = 2; c.ragged = 1; c.zero_fraction = 0.0; c.max_seq_len = 1500; c.window_left = 500; });
  add("tree_q64_rows1024_causal_fp8", make_problem(128, 16, 1, 32, H, BF, E4, E4, 64, CA, true, false, false, true), "",
      [](Combo& c) { c.batch = 3; c.ragged = 0; c.max_seq_len = 2500; });
  // long context, split-KV with the combine over 64 query tokens
  add("tree_q64_mask_fp8_long_split", make_problem(128, 8, 1, 64, H, BF, E4, BF, 64, EX, false, false, false, true), "",
      [](Combo& c) { c.batch = 2; c.min_seq_len = 16000; c.max_seq_len = 24000; c.short_fraction = 0; c.zero_fraction = 0; c.forced_splits = 9; });
  // forced configs of the q64 search space: one CTA per 16-row tile, and 8 m tiles on 8 warps
  add("tree_q64_mask_cfg_m1", make_problem(128, 32, 8, 32, H, BF, BF, BF, 64, EX, false, false, false, true), "t64.s3.w4.m1",
      [](Combo& c) { c.batch = 3; c.ragged = 1; c.zero_fraction = 0.2; c.max_seq_len = 2000; });
  add("tree_q64_mask_fp8_cfg_m8", make_problem(128, 64, 8, 32, H, BF, E4, BF, 64, EX, false, false, false, true), "t32.s4.w8.m8",
      [](Combo& c) { c.batch = 3; c.ragged = 0; c.max_seq_len = 2000; });
  // the wgmma path (sm_90a, .wg: 64 or 128 query rows a CTA, 16-bit KV), forced: q16 x group 4 causal (uniform and
  // ragged with padding, tiles of 32 and 64 tokens, split-KV with sinks and LSE, draft tokens only), q8 x group 8
  // fp16 head_dim 64 with an explicit mask and every flag; 128 rows a kv head on two warpgroups (causal; fp16 head_dim
  // 64 with a mask, sinks and window), 256 rows over two 128-row groups with split-KV, and 128 rows over two .m4 row
  // groups with an e4m3 output
  add("wg_q16_causal_bf16", make_problem(128, 32, 8, 32, H, BF, BF, BF, 16, CA, false, false, false, true), "t32.s2.w4.wg",
      [](Combo& c) { c.batch = 6; c.ragged = 0; c.max_seq_len = 3000; });
  add("wg_q16_mask_ragged_t64", make_problem(128, 32, 8, 16, N, BF, BF, BF, 16, EX, false, false, false, true), "t64.s3.w4.wg",
      [](Combo& c) { c.batch = 5; c.ragged = 1; c.zero_fraction = 0.3; c.max_seq_len = 2500; });
  add("wg_q16_long_split_sink", make_problem(128, 32, 8, 64, H, BF, BF, BF, 16, CA, true, false, false, true), "t64.s2.w4.wg",
      [](Combo& c) { c.batch = 2; c.min_seq_len = 16000; c.max_seq_len = 24000; c.short_fraction = 0; c.zero_fraction = 0; c.forced_splits = 7; });
  add("wg_q16_drafts_only", make_problem(128, 32, 8, 16, H, BF, BF, BF, 16, CA, false, false, false, true), "t32.s4.w4.wg",
      [](Combo& c) { c.batch = 4; c.short_fraction = 1.0; c.max_seq_len = 40; });
  add("wg_q8g8_fp16_d64_allflags", make_problem(64, 64, 8, 128, N, FP, FP, FP, 8, EX, true, true, true, true), "t32.s3.w4.wg",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 0.25; c.max_seq_len = 2500; c.window_left = 400; });
  add("wg_rows128_w8_causal", make_problem(128, 64, 8, 32, H, BF, BF, BF, 16, CA, false, false, false, true), "t32.s2.w8.wg",
      [](Combo& c) { c.batch = 4; c.ragged = 0; c.zero_fraction = 0.25; c.max_seq_len = 3000; });
  add("wg_rows128_w8_fp16_d64_mask", make_problem(64, 64, 8, 16, N, FP, FP, FP, 16, EX, true, true, false, true), "t64.s3.w8.wg",
      [](Combo& c) { c.batch = 3; c.ragged = 1; c.zero_fraction = 0.2; c.max_seq_len = 2500; c.window_left = 600; });
  add("wg_rows256_m8_w8_split", make_problem(128, 64, 8, 64, H, BF, BF, BF, 32, CA, true, false, false, true), "t32.s2.w8.m8.wg",
      [](Combo& c) { c.batch = 2; c.min_seq_len = 9000; c.max_seq_len = 14000; c.short_fraction = 0; c.zero_fraction = 0; c.forced_splits = 5; });
  add("wg_rows128_m4_e4m3_out", make_problem(128, 64, 8, 64, H, BF, BF, E4, 16, CA, false, false, false, true), "t64.s2.w4.m4.wg",
      [](Combo& c) { c.batch = 3; c.ragged = 0; c.max_seq_len = 2000; });
  // bf16 on the wgmma path at head_dim 64 (one 64-column swizzle block a row): 64 rows on one warpgroup, 128 rows
  // on two with a mask and every flag, and 256 rows over four .m4 row groups with split-KV
  add("wg_d64_bf16_q16g4", make_problem(64, 32, 8, 32, H, BF, BF, BF, 16, CA, false, false, false, true), "t32.s2.w4.wg",
      [](Combo& c) { c.batch = 5; c.ragged = 0; c.zero_fraction = 0.2; c.max_seq_len = 3000; });
  add("wg_d64_bf16_rows128_mask", make_problem(64, 64, 8, 64, N, BF, BF, BF, 16, EX, true, true, true, true), "t64.s3.w8.wg",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 0.25; c.max_seq_len = 2500; c.window_left = 500; });
  add("wg_d64_bf16_rows256_m4_split", make_problem(64, 64, 8, 32, H, BF, BF, BF, 32, CA, true, false, false, true), "t32.s3.w4.m4.wg",
      [](Combo& c) { c.batch = 2; c.min_seq_len = 4000; c.max_seq_len = 6000; c.short_fraction = 0; c.zero_fraction = 0; c.forced_splits = 6; });
  // 1024 rows a kv head (q64 x group 16), bf16 KV at head_dim 128 over eight 128-row .m8 groups: mma.sync (the
  // sm_90a default, forced so that it stays covered) and two warpgroups on wgmma with split-KV
  add("tree_q64_rows1024_bf16_m8", make_problem(128, 32, 2, 32, H, BF, BF, BF, 64, EX, false, false, false, true), "t32.s3.w4.m8",
      [](Combo& c) { c.batch = 2; c.ragged = 1; c.zero_fraction = 0.0; c.max_seq_len = 1500; });
  add("tree_q64_rows1024_bf16_m8_wg", make_problem(128, 16, 1, 16, N, BF, BF, BF, 64, CA, true, false, false, true), "t32.s2.w8.m8.wg",
      [](Combo& c) { c.batch = 3; c.ragged = 0; c.max_seq_len = 2000; c.forced_splits = 4; });
  // an output dtype other than Q's (the problem takes any of bf16, fp16, e4m3 for any Q; the sample draws out = Q or
  // e4m3 for 16-bit Q): bf16 <-> fp16 on mma.sync with 16-bit and FP8 KV and on the wgmma path (64 and 128 rows),
  // and e4m3 from fp16 Q on the wgmma path
  add("mixed_bf16_to_fp16", make_problem(128, 32, 8, 32, H, BF, BF, FP, 4, CA, false, false, false, true), "",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 0.2; c.max_seq_len = 3000; });
  add("mixed_fp16_to_bf16", make_problem(64, 24, 4, 16, N, FP, FP, BF, 2, EX, true, false, false, true), "",
      [](Combo& c) { c.batch = 5; c.ragged = 0; c.max_seq_len = 2500; });
  add("mixed_bf16q_fp8kv_to_fp16", make_problem(128, 16, 2, 64, N, BF, E4, FP, 1, NO, false, true, false, true), "",
      [](Combo& c) { c.batch = 4; c.max_seq_len = 4000; c.window_left = 900; });
  add("mixed_fp16q_fp8kv_to_bf16", make_problem(256, 16, 4, 32, H, FP, E4, BF, 3, CA, true, false, true, false), "",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 0.25; c.max_seq_len = 2000; });
  add("wg_mixed_bf16_to_fp16", make_problem(128, 32, 8, 16, N, BF, BF, FP, 16, EX, true, false, false, true), "t32.s2.w4.wg",
      [](Combo& c) { c.batch = 4; c.ragged = 1; c.zero_fraction = 0.2; c.max_seq_len = 2500; });
  add("wg_mixed_fp16_to_bf16_rows128", make_problem(128, 64, 8, 32, H, FP, FP, BF, 16, CA, false, true, false, true), "t32.s2.w8.wg",
      [](Combo& c) { c.batch = 3; c.ragged = 0; c.max_seq_len = 2500; c.window_left = 700; });
  add("wg_mixed_fp16_to_e4m3_d64", make_problem(64, 32, 8, 32, H, FP, FP, E4, 16, CA, false, false, false, true), "t32.s3.w4.wg",
      [](Combo& c) { c.batch = 4; c.ragged = 0; c.zero_fraction = 0.25; c.max_seq_len = 2500; });
  // the bench problems (default configs)
  add("bench_bf16_q1", make_problem(128, 32, 8, 32, H, BF, BF, BF, 1, NO, false, false, false, false), "",
      [](Combo& c) { c.batch = 8; c.max_seq_len = 8192; });
  add("bench_bf16_q4", make_problem(128, 32, 8, 32, H, BF, BF, BF, 4, CA, false, false, false, false), "",
      [](Combo& c) { c.batch = 8; c.max_seq_len = 8192; });
  add("bench_bf16_q16", make_problem(128, 32, 8, 32, H, BF, BF, BF, 16, CA, false, false, false, false), "",
      [](Combo& c) { c.batch = 8; c.max_seq_len = 8192; });
  add("bench_fp8_q1", make_problem(128, 32, 8, 32, H, BF, E4, BF, 1, NO, false, false, false, false), "",
      [](Combo& c) { c.batch = 8; c.max_seq_len = 8192; });
  add("bench_fp8_q4", make_problem(128, 32, 8, 32, H, BF, E4, BF, 4, CA, false, false, false, false), "",
      [](Combo& c) { c.batch = 8; c.max_seq_len = 8192; });
  add("bench_64x8_q1", make_problem(128, 64, 8, 32, H, BF, BF, BF, 1, NO, false, false, false, false), "",
      [](Combo& c) { c.batch = 1; c.min_seq_len = 20000; c.max_seq_len = 40000; c.short_fraction = 0; c.zero_fraction = 0; });
  return v;
}

std::vector<Combo> all_combos() {
  std::vector<Combo> v = edge_combos();
  for (Combo& c : sampled_combos()) v.push_back(std::move(c));
  return v;
}

// The kernels of the [checked] tests, marked checked (RuntimeOptions::checked upgrades an unchecked problem to the
// same key), so that `[xqa_precompile]` puts them into the cache too. The page-index and seq_len faults run on
// every entry but the last: the bf16 q1 default, FP8 KV (q4 causal, e4m3 pages converted in the ring) and the
// wgmma path (q16 x group 4: 64 rows a CTA, tiles of 32 tokens over pages of 64); the last is the
// q_cu_seq_lens test's (bf16 q4 causal, default config).
std::vector<Combo> checked_combos() {
  const DType BF = kc::kBF16, E4 = kc::kE4M3;
  const Layout H = Layout::Hnd, N = Layout::Nhd;
  std::vector<Combo> v;
  auto add = [&](const char* name, Problem p, const char* cfg) {
    Combo c;
    c.name = name;
    c.p = p;
    c.p.checked = true;
    c.config = cfg;
    v.push_back(c);
  };
  add("checked_bf16_q1", make_problem(128, 32, 8, 32, H, BF, BF, BF, 1, MaskKind::None, false, false, false, false), "");
  add("checked_fp8kv_q4", make_problem(128, 32, 8, 16, N, BF, E4, BF, 4, MaskKind::Causal, false, false, false, false), "");
  add("checked_wg_q16g4", make_problem(128, 32, 8, 64, H, BF, BF, BF, 16, MaskKind::Causal, false, false, false, false),
      "t32.s2.w4.wg");
  add("checked_q_cu", make_problem(128, 32, 8, 32, H, BF, BF, BF, 4, MaskKind::Causal, false, false, false, false), "");
  return v;
}

// The problems of the single-problem [gpu] tests below whose kernels the matrix does not hold.
Problem graph_replay_problem() {
  return make_problem(128, 16, 4, 16, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 4, MaskKind::Causal, true, false,
                      false, true);
}

Problem prepared_op_problem() {
  return make_problem(128, 32, 8, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 4, MaskKind::Causal, true, false,
                      false, true);
}

// The prepared-op tests' inputs: 3 requests of up to 2500 tokens of prepared_op_problem().
test::XqaRandomCase prepared_op_case(const char* seed_name) {
  test::XqaRandomOptions o;
  o.batch = 3;
  o.max_seq_len = 2500;
  o.seed = test::run_seed(seed_name);
  return test::make_xqa_case(prepared_op_problem(), o);
}

// The q1 problem the tuned-op test remembers a tuned config for (either of the two it picks from).
Problem tuned_op_problem() {
  return make_problem(128, 32, 8, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None, false, false,
                      false, false);
}
const char* const kTunedOpConfigs[] = {"t32.s3.w2", "t64.s3.w4"};

std::vector<Problem> forms_problems() {
  const DType BF = kc::kBF16, FP = kc::kFP16, E4 = kc::kE4M3;
  return {
      make_problem(128, 32, 8, 32, Layout::Hnd, BF, BF, BF, 4, MaskKind::Causal, false, false, false, true),
      make_problem(64, 8, 2, 16, Layout::Nhd, E4, E4, E4, 1, MaskKind::None, false, false, false, true),
      make_problem(128, 16, 2, 64, Layout::Nhd, FP, E4, FP, 2, MaskKind::Explicit, true, false, false, true),
      make_problem(256, 8, 8, 16, Layout::Hnd, BF, E4, BF, 1, MaskKind::None, false, false, false, false),
      // the sm_90a wgmma default of q16 x group 4 (t32.s2.w4.wg), and 256 query rows of one kv head (q16 x group
      // 16, fp16, d64: t32.s3.w8)
      make_problem(128, 32, 8, 32, Layout::Hnd, BF, BF, BF, 16, MaskKind::Causal, false, false, false, true),
      make_problem(64, 16, 1, 16, Layout::Nhd, FP, FP, FP, 16, MaskKind::Causal, false, false, false, false),
  };
}

// The kernels of the other GPU tests, so that `[xqa_precompile]` puts them into the cache too: the graph replay,
// the prepared op, the tuned op, the argument forms (default configs) and the oracle dump's cases.
std::vector<Combo> other_test_combos() {
  std::vector<Combo> v;
  auto add = [&](const std::string& name, const Problem& p, const char* cfg) {
    Combo c;
    c.name = name;
    c.p = p;
    c.config = cfg;
    v.push_back(c);
  };
  add("graph_replay", graph_replay_problem(), "");
  add("prepared_op", prepared_op_problem(), "");
  for (const char* cfg : kTunedOpConfigs) add("tuned_op", tuned_op_problem(), cfg);
  for (const Problem& p : forms_problems()) add("forms", p, "");
  for (const test::OracleCase& oc : test::oracle_cases()) add("oracle_" + oc.name, oc.problem, "");
  return v;
}

// The process's runtime for these tests: options from the environment (KTUNE_CACHE, KTUNE_JIT, ...).
Runtime& test_runtime() {
  static Runtime rt(RuntimeOptions::from_env());
  return rt;
}

// Makes sure every kernel of `combos` is in a cache layer, with each problem's shared module (the combine and the
// helpers), compiling on all cores where needed.
void precompile(Runtime& rt, const std::vector<Combo>& combos, const Arch& arch, int* compiled, int* failed) {
  std::vector<test::PrecompileJob> jobs;
  std::set<std::string> shared;
  for (const Combo& c : combos) {
    const Problem p = c.p;
    const std::string cfg = c.config;
    jobs.push_back({p.key() + " / " + (cfg.empty() ? "default" : cfg), [p, cfg, arch] {
                      return generate(p, cfg.empty() ? default_config(p, arch) : Config::from_key(cfg), arch);
                    }});
    if (shared.insert(p.key()).second)
      jobs.push_back({p.key() + " / " + kSharedConfig, [p, arch] { return generate_shared(p, arch); }});
  }
  test::precompile_jobs(rt, jobs, arch, compiled, failed);
}

double tolerance(const Problem& p) { return p.out_dtype == kc::kE4M3 ? 8e-2 : 1e-2; }

// Device copies of one random case plus the launch arguments over them.
struct DevCase {
  test::XqaRandomCase c;
  std::unique_ptr<test::DeviceBuffer> q, kv, bt, sl, cu, mask, sinks, out, lse, ws;
  size_t out_bytes = 0, lse_bytes = 0;

  explicit DevCase(test::XqaRandomCase&& cc) : c(std::move(cc)) {
    const Problem& p = c.problem;
    auto up = [](const auto& v) {
      auto b = std::make_unique<test::DeviceBuffer>(std::max<size_t>(16, v.size() * sizeof(v[0])));
      if (!v.empty()) b->upload(v.data(), v.size() * sizeof(v[0]));
      return b;
    };
    q = up(c.q);
    kv = up(c.kv);
    bt = up(c.block_tables);
    sl = up(c.seq_lens);
    cu = up(c.q_cu);
    mask = up(c.mask);
    sinks = up(c.sinks);
    const size_t rows = size_t(std::max(1, c.num_tokens)) * p.num_q_heads;
    out_bytes = rows * p.head_dim * kc::dtype_size(int(p.out_dtype));
    lse_bytes = rows * sizeof(float);
    out = std::make_unique<test::DeviceBuffer>(out_bytes);
    lse = std::make_unique<test::DeviceBuffer>(lse_bytes);
  }

  XqaDecodeArgs args(int max_seq_len) const {
    const Problem& p = c.problem;
    XqaDecodeArgs a;
    a.q = q->as<void>();
    a.kv_cache = kv->as<void>();
    a.block_tables = bt->as<int32_t>();
    a.seq_lens = sl->as<int32_t>();
    a.q_cu_seq_lens = c.opt.ragged ? cu->as<int32_t>() : nullptr;
    a.mask = p.mask == MaskKind::Explicit ? mask->as<uint16_t>() : nullptr;
    a.sinks = p.has_sinks ? sinks->as<float>() : nullptr;
    a.out = out->as<void>();
    a.lse = p.write_lse ? lse->as<float>() : nullptr;
    a.batch = c.batch;
    a.num_tokens = c.num_tokens;
    a.q_len_per_req = c.q_len_per_req;
    a.max_pages_per_req = c.max_pages_per_req;
    a.num_pages = c.num_pages;
    a.max_seq_len = max_seq_len;
    a.softmax_scale = c.opt.logit_sharpness / std::sqrt(float(p.head_dim));
    a.k_scale = c.k_scale;
    a.v_scale = c.v_scale;
    a.q_scale = kQScale;  // must only apply to an FP8 Q
    a.o_scale = kOScale;  // must only apply to an FP8 output
    a.softcap = c.softcap;
    a.window_left = c.window_left;
    if (ws) {
      a.workspace = ws->as<void>();
      a.workspace_bytes = ws->bytes();
    }
    return a;
  }

  // Poisons the outputs, runs p over this case (with its workspace, if any; config null = resolved) and waits:
  // throws on any CUDA error.
  void poisoned_launch(Runtime& rt, const Problem& p, int max_seq_len, const char* config = nullptr) {
    XqaDecodeArgs a = args(max_seq_len);
    a.config = config;
    poison();
    xqa_decode(rt, p, a, nullptr);
    test::sync();
  }

  void ensure_workspace(size_t bytes) {
    if (bytes == 0 || (ws && ws->bytes() >= bytes)) return;
    ws = std::make_unique<test::DeviceBuffer>(bytes);
  }

  void poison() {
    out->poison(0xFF);
    lse->poison(0xFF);
    if (ws) ws->poison(0xFF);  // NaN: a read of an unwritten partial shows
  }

  test::XqaCompare compare(const test::XqaRefResult& ref) const {
    const auto o = out->download<unsigned char>(out_bytes);
    const auto l = lse->download<float>(lse_bytes / sizeof(float));
    test::XqaCompare r = test::xqa_compare(c.problem, ref, o.data(), c.problem.write_lse ? l.data() : nullptr, 0xFF);
    if (c.num_tokens == 0)  // nothing may be written at all
      for (unsigned char b : o) r.clobbered += b != 0xFF;
    return r;
  }
};

struct Outcome {
  bool ok = false;
  std::string line;
  double rel = 0;
};

Outcome check(const Problem& p, const test::XqaCompare& r) {
  const double tol = tolerance(p);
  Outcome o;
  o.rel = r.rel_l2;
  o.ok = r.rel_l2 < tol && r.max_row_rel < 5 * tol && r.nonfinite == 0 && r.clobbered == 0 &&
         (!p.write_lse || r.lse_max_abs < 2e-2);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "rel %.2e row %.2e lse %.1e nonfinite %lld clobbered %lld", r.rel_l2, r.max_row_rel,
                r.lse_max_abs, r.nonfinite, r.clobbered);
  o.line = buf;
  return o;
}

// Poisons dc's outputs, runs launch, waits, checks the output against ref and returns its bytes.
std::vector<unsigned char> launch_checked(DevCase& dc, const Problem& p, const test::XqaRefResult& ref,
                                          const std::string& what, const std::function<void()>& launch) {
  dc.poison();
  launch();
  test::sync();
  const Outcome r = check(p, dc.compare(ref));
  INFO(what << ": " << r.line);
  CHECK(r.ok);
  return dc.out->download<unsigned char>(dc.out_bytes);
}

// Shrinks (batch, max_seq_len) so that input generation and the fp64 reference stay well under a second.
void fit_budget(const Problem& p, int* batch, int* max_len, int min_len) {
  const unsigned cores = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  for (int guard = 0; guard < 64; ++guard) {
    const double avg = 0.5 * (*max_len + std::min(min_len, *max_len));
    const double items = std::min<double>(cores, double(*batch) * p.num_kv_heads);
    const double ref_s = double(*batch) * avg * p.num_kv_heads * p.head_dim * p.max_q_len * p.group_size() * 4 /
                         (items * 1.0e9);
    const double gen_s = double(*batch) * avg * p.num_kv_heads * p.head_dim * 2 /
                         (std::min<double>(cores, *batch) * 4.0e7);
    if (ref_s + gen_s < 0.6) return;
    if (*batch > 2) --*batch;
    else if (*max_len > 2048) *max_len /= 2;
    else return;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
TEST_CASE("xqa_decode kernels of the GPU tests compile into the cache", "[.][xqa_precompile]") {
  const char* a = std::getenv("KTUNE_XQA_ARCH");
  const Arch arch = Arch::parse(a ? a : "sm_90a");
  Runtime& rt = test_runtime();
  int compiled = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Combo> combos = all_combos();
  for (Combo& c : checked_combos()) combos.push_back(std::move(c));
  for (Combo& c : other_test_combos()) combos.push_back(std::move(c));
  precompile(rt, combos, arch, &compiled, &failed);
  std::printf("xqa precompile: %zu combos (their config modules and shared modules) for %s, %d compiled, %d failed, "
              "%.1f s\n", combos.size(), arch.str().c_str(), compiled, failed,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  CHECK(failed == 0);
}

TEST_CASE("xqa_decode matches the fp64 reference over the sampled matrix", "[gpu][xqa]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const uint64_t seed = test::run_seed("xqa gpu matrix");
  INFO("seed " << seed << " (KTUNE_TEST_SEED replays it)");
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Combo> combos = all_combos();
  const Arch arch = rt.current_arch();
  {
    int compiled = 0, failed = 0;
    precompile(rt, combos, arch, &compiled, &failed);
    std::printf("xqa gpu matrix: %zu kernels ready (%d compiled here, %d failed) in %.1f s\n", combos.size(), compiled,
                failed, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
    CHECK(failed == 0);  // the combos whose kernel failed fail below with the compiler's message
  }

  test::SplitMix rng(seed);
  int runs = 0, passed = 0;
  double worst16 = 0, worst8 = 0;
  std::string worst16_at, worst8_at;
  std::vector<std::string> failures;
  // For slow tools (compute-sanitizer racecheck): KTUNE_XQA_SUBSET=k runs every k-th combo and
  // KTUNE_XQA_MAX_LEN caps drawn seq_lens. Unset, the whole sample runs.
  const char* subset_env = std::getenv("KTUNE_XQA_SUBSET");
  const char* max_len_env = std::getenv("KTUNE_XQA_MAX_LEN");
  const size_t subset = subset_env ? std::max(1ul, std::strtoul(subset_env, nullptr, 10)) : 1;
  const int len_cap = max_len_env ? std::max(48, std::atoi(max_len_env)) : 1 << 30;
  for (size_t ci = 0; ci < combos.size(); ++ci) {
    const Combo& cb = combos[ci];
    const Problem& p = cb.p;
    const std::string cfg_key = cb.config.empty() ? default_config(p, arch).key() : cb.config;
    if (ci % subset != 0 || !test::in_test_shard(ci) || !test::in_test_match(cb.name, cfg_key))
      continue;  // (a subset run draws its own data; its seed replays it)
    test::XqaRandomOptions o;
    o.seed = rng.next();
    o.ragged = cb.ragged >= 0 ? cb.ragged == 1 : rng.uniform() < 0.5;
    o.zero_fraction = cb.zero_fraction >= 0 ? cb.zero_fraction : (rng.uniform() < 0.5 ? 0.25 : 0.0);
    o.short_fraction = cb.short_fraction >= 0 ? cb.short_fraction : 0.3;
    int max_len = cb.max_seq_len;
    if (max_len < 0) {
      static const int lens[] = {48, 300, 1500, 4096, 9000, 20000, 65536};
      const double u = rng.uniform();
      max_len = lens[u < 0.08 ? 0 : u < 0.25 ? 1 : u < 0.5 ? 2 : u < 0.7 ? 3 : u < 0.85 ? 4 : u < 0.95 ? 5 : 6];
    }
    max_len = std::min(max_len, len_cap);
    int batch = cb.batch > 0 ? cb.batch : rng.range(2, 8);
    o.min_seq_len = cb.min_seq_len > 0 ? cb.min_seq_len : 1;
    if (cb.batch < 0 || cb.max_seq_len < 0) fit_budget(p, &batch, &max_len, o.min_seq_len);
    o.batch = batch;
    o.max_seq_len = max_len;
    o.min_seq_len = std::min(o.min_seq_len, max_len);
    if (!o.ragged && p.max_q_len > 1 && cb.ragged < 0 && rng.uniform() < 0.25) o.q_len = rng.range(1, p.max_q_len - 1);
    o.window_left = cb.window_left >= 0 ? cb.window_left
                                         : (rng.uniform() < 0.3 ? rng.range(0, 64) : rng.range(100, 5000));

    DevCase dc(test::make_xqa_case(p, o));
    const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());

    // max_seq_len: the largest drawn, or a looser upper bound (as a CUDA-graph capture would pass).
    const int cap = dc.c.max_pages_per_req * p.page_size;
    int bound = std::max(1, dc.c.max_seq_len);
    if (rng.uniform() < 0.4) bound = int(std::min<int64_t>(cap, bucket_pow2_ceil(bound)));
    bound = std::max(1, std::min(bound, cap));

    const char* cfg = cb.config.empty() ? nullptr : cb.config.c_str();
    const int forced = cb.forced_splits > 0 ? cb.forced_splits : rng.range(2, 40);
    for (int split_mode = 0; split_mode < 2; ++split_mode) {
      const int splits = split_mode == 0 ? 0 : forced;
      std::string where;
      Outcome res;
      XqaDecodePlan plan;
      try {
        plan = xqa_decode_plan(rt, p, batch, bound, cfg, splits);
        dc.ensure_workspace(plan.workspace_bytes);
        dc.poison();
        XqaDecodeArgs a = dc.args(bound);
        a.config = cfg;
        a.num_splits = splits;
        xqa_decode(rt, p, a, nullptr);
        test::sync();
        res = check(p, dc.compare(ref));
      } catch (const std::exception& e) {
        res.ok = false;
        res.line = std::string("threw: ") + e.what();
      }
      ++runs;
      char head[512];
      std::snprintf(head, sizeof(head), "%-20s %-58s %-10s %-7s B%d tok%d L<=%d bound %d splits %d (%s)", cb.name.c_str(),
                    p.key().c_str(), plan.config.c_str(), o.ragged ? "ragged" : "uniform", batch, dc.c.num_tokens,
                    dc.c.max_seq_len, bound, plan.num_splits, splits ? "forced" : "planned");
      std::printf("%s %s %s\n", head, res.line.c_str(), res.ok ? "PASS" : "FAIL");
      std::fflush(stdout);
      if (res.ok) {
        ++passed;
        double& worst = p.out_dtype == kc::kE4M3 ? worst8 : worst16;
        if (res.rel > worst) {
          worst = res.rel;
          (p.out_dtype == kc::kE4M3 ? worst8_at : worst16_at) = std::string(head);
        }
      } else {
        failures.push_back(std::string(head) + " " + res.line);
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("XQA GPU MATRIX: %d/%d runs passed (%zu kernels), worst rel error 16-bit out %.2e, e4m3 out %.2e, "
              "%.1f s, seed %llu\n  worst 16-bit: %s\n  worst e4m3: %s\n",
              passed, runs, combos.size(), worst16, worst8, secs, (unsigned long long)seed, worst16_at.c_str(),
              worst8_at.c_str());
  for (const std::string& f : failures) UNSCOPED_INFO("FAILED: " << f);
  CHECK(failures.empty());
  CHECK(runs > 0);  // a KTUNE_TEST_MATCH or shard that selects nothing is not a pass
}

TEST_CASE("a second xqa_decode launch of the same key compiles and loads nothing", "[gpu][xqa]") {
  KTUNE_REQUIRE_GPU();
  Runtime rt(RuntimeOptions::from_env());
  const Problem p = make_problem(128, 32, 8, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None,
                                 false, false, false, false);
  test::XqaRandomOptions o;
  o.batch = 4;
  o.max_seq_len = 3000;
  o.seed = test::run_seed("xqa second launch");
  DevCase dc(test::make_xqa_case(p, o));
  const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
  const int bound = std::max(1, dc.c.max_seq_len);
  dc.ensure_workspace(xqa_decode_workspace_bytes(rt, p, o.batch, bound));
  auto run_once = [&] {
    dc.poisoned_launch(rt, p, bound);
    const Outcome r = check(p, dc.compare(ref));
    INFO(r.line);
    CHECK(r.ok);
  };
  run_once();
  const RuntimeStats s1 = rt.stats();
  // The first call loads the config's module and, with it, the problem's shared module (the split-KV combine
  // and the engine helpers), so no later call loads anything.
  const auto shared = shared_module_configs(family("xqa_decode"), p.key(), rt.current_arch());
  CHECK(shared.size() == 1);
  CHECK(s1.loads == static_cast<int64_t>(1 + shared.size()));
  run_once();
  const RuntimeStats s2 = rt.stats();
  CHECK(s2.compiles == s1.compiles);
  CHECK(s2.loads == s1.loads);
  CHECK(s2.cache_hits == s1.cache_hits);
  CHECK(s2.misses == s1.misses);
  CHECK(s2.memory_hits == s1.memory_hits);  // the op's plan holds the module: no module-table lookup at all
  std::printf("second launch: compiles %lld -> %lld, loads %lld -> %lld, memory hits %lld -> %lld\n",
              (long long)s1.compiles, (long long)s2.compiles, (long long)s1.loads, (long long)s2.loads,
              (long long)s1.memory_hits, (long long)s2.memory_hits);
}

// An engine that skipped warmup: its first call finds nothing in the cache, so the op compiles the config's module
// and, on a thread of its own, the problem's shared module (the split-KV combine), loads both and launches. The
// output must be right on that first call, and a runtime that may not compile finds both binaries in the file
// and writes the same bits.
TEST_CASE("an xqa op's cold first call compiles its config and shared modules and launches correctly",
          "[gpu][xqa][op]") {
  KTUNE_REQUIRE_GPU();
  test::TempDir dir;
  Runtime rt(test::on_cache_file(dir.file("cold.db")));  // no layer from the environment holds these binaries
  const Problem p = prepared_op_problem();
  DevCase dc(prepared_op_case("xqa cold first call"));
  const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
  XqaDecodeArgs a = dc.args(dc.c.max_pages_per_req * p.page_size);
  a.num_splits = 5;  // the combine runs, from the shared module
  XqaDecodeOp op = xqa::prepare(rt, p);
  const XqaDecodePlan plan = op.plan(a);
  REQUIRE(plan.workspace_bytes > 0);
  dc.ensure_workspace(plan.workspace_bytes);
  a.workspace = dc.ws->as<void>();
  a.workspace_bytes = dc.ws->bytes();
  REQUIRE(rt.stats().compiles == 0);
  const auto first = launch_checked(dc, p, ref, "first call", [&] { op.run(a, nullptr); });
  const RuntimeStats s1 = rt.stats();
  CHECK(s1.compiles == 2);  // the config's module and the shared one
  CHECK(s1.loads == 2);
  CHECK(s1.store_failures == 0);  // both binaries are in the file for the next process
  const auto again = launch_checked(dc, p, ref, "second call", [&] { op.run(a, nullptr); });
  CHECK(again == first);
  CHECK(rt.stats().compiles == s1.compiles);
  CHECK(rt.stats().loads == s1.loads);

  Runtime from_file(test::on_cache_file(dir.file("cold.db"), false));  // a miss would be an error
  const auto found = launch_checked(dc, p, ref, "no JIT", [&] { xqa_decode(from_file, p, a, nullptr); });
  CHECK(found == first);
  CHECK(from_file.stats().compiles == 0);
  CHECK(from_file.stats().cache_hits == 2);
}

TEST_CASE("xqa_decode replays from a captured CUDA graph with new seq_lens", "[gpu][xqa]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const auto& cu = detail::driver();
  const Problem p = graph_replay_problem();
  test::XqaRandomOptions o;
  o.batch = 4;
  o.min_seq_len = 500;
  o.max_seq_len = 6000;
  o.short_fraction = 0;
  o.seed = test::run_seed("xqa graph replay");
  DevCase dc(test::make_xqa_case(p, o));
  const int bound = dc.c.max_pages_per_req * p.page_size;  // an upper bound, as an engine captures with
  for (int splits : {0, 6}) {
    dc.ensure_workspace(xqa_decode_workspace_bytes(rt, p, o.batch, bound, nullptr, splits));
    XqaDecodeArgs a = dc.args(bound);
    a.num_splits = splits;
    CUstream stream = nullptr;
    CU_CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    xqa_decode(rt, p, a, stream);  // warm-up: loads the module before capture
    CU_CHECK(cu.cuStreamSynchronize(stream));
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    CU_CHECK(cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const RuntimeStats before = rt.stats();
    try {
      xqa_decode(rt, p, a, stream);
    } catch (...) {
      cu.cuStreamEndCapture(stream, &graph);
      throw;
    }
    CU_CHECK(cu.cuStreamEndCapture(stream, &graph));
    CHECK(rt.stats().compiles == before.compiles);
    CHECK(rt.stats().loads == before.loads);
    CU_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
    // Replay twice: the captured seq_lens, then shorter ones written into the same device array.
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        test::SplitMix r(o.seed + 99);
        for (int& L : dc.c.seq_lens) L = std::max(1, L - r.range(0, L - 1));
        dc.sl->upload(dc.c.seq_lens);
      }
      const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
      dc.poison();
      CU_CHECK(cu.cuGraphLaunch(exec, stream));
      CU_CHECK(cu.cuStreamSynchronize(stream));
      const Outcome res = check(p, dc.compare(ref));
      INFO("splits " << splits << " replay " << round << ": " << res.line);
      CHECK(res.ok);
      std::printf("graph replay (splits %d, round %d): %s\n", splits, round, res.line.c_str());
    }
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
    cu.cuStreamDestroy(stream);
    if (splits == 0) {  // restore the original lengths for the split round
      DevCase fresh(test::make_xqa_case(p, o));
      dc.c.seq_lens = fresh.c.seq_lens;
      dc.sl->upload(dc.c.seq_lens);
    }
  }
}

// The tensors engines hold (support/xqa_forms.hpp): strided q (a fused-QKV slice, head-major), padded out rows,
// the K/V pair in every form, device-held scales; unsplit (direct store) and split (combine store). Then a
// captured graph replayed after the device-held v_scale changed.
TEST_CASE("xqa_decode takes strided q/out, the K/V pair and device-held scales", "[gpu][xqa][forms]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const auto& cu = detail::driver();
  const uint64_t seed = test::run_seed("xqa forms");
  const std::vector<Problem> problems = forms_problems();
  const test::XqaKvForm forms[] = {test::XqaKvForm::combined, test::XqaKvForm::separate, test::XqaKvForm::v_before_k,
                                   test::XqaKvForm::stacked, test::XqaKvForm::views};
  uint64_t i = 0;
  for (const Problem& p : problems)
    for (test::XqaKvForm form : forms)
      for (int splits : {1, 5}) {
        ++i;
        test::XqaRandomOptions o;
        o.batch = 3;
        o.max_seq_len = 3000;
        o.seed = seed + 7919 * i;
        o.ragged = i % 3 == 0;
        o.zero_fraction = 0.2;
        DevCase dc(test::make_xqa_case(p, o));
        const test::XqaForms f = test::make_xqa_forms(dc.c, form, i % 2 == 0);
        test::DeviceBuffer q(f.q.size()), out(f.out.size()), kv(f.kv.size()), scales(sizeof f.scale_values);
        q.upload(f.q);
        out.upload(f.out);
        kv.upload(f.kv);
        scales.upload(f.scale_values, sizeof f.scale_values);
        const int bound = dc.c.max_pages_per_req * p.page_size;
        dc.ensure_workspace(xqa_decode_workspace_bytes(rt, p, o.batch, bound, nullptr, splits));
        XqaDecodeArgs a = dc.args(bound);
        test::set_xqa_forms(a, dc.c, f, q.as<void>(), out.as<void>(), kv.as<void>(), scales.as<float>());
        a.num_splits = splits;
        dc.poison();
        xqa_decode(rt, p, a, nullptr);
        CU_CHECK(cu.cuCtxSynchronize());
        long long pad_clobbered = 0;
        const auto dense = test::gather_xqa_out(dc.c, f, out.download<unsigned char>(f.out.size()), &pad_clobbered);
        const auto lse = dc.lse->download<float>(dc.lse_bytes / sizeof(float));
        const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
        const Outcome res =
            check(p, test::xqa_compare(p, ref, dense.data(), p.write_lse ? lse.data() : nullptr, 0xFF));
        INFO(p.key() << ", kv form " << int(form) << ", splits " << splits << ", seed " << o.seed << ": " << res.line);
        CHECK(res.ok);
        CHECK(pad_clobbered == 0);
      }

  // A graph captured once replays with the device-held v_scale of the moment.
  const Problem& p = problems[0];
  test::XqaRandomOptions o;
  o.batch = 2;
  o.max_seq_len = 800;
  o.seed = seed + 1;
  DevCase dc(test::make_xqa_case(p, o));
  float v_dev = 1.f;
  test::DeviceBuffer v_scale(sizeof v_dev);
  v_scale.upload(&v_dev, sizeof v_dev);
  XqaDecodeArgs a = dc.args(dc.c.max_pages_per_req * p.page_size);
  a.num_splits = 1;
  a.v_scale_ptr = v_scale.as<float>();
  CUstream stream = nullptr;
  CU_CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  xqa_decode(rt, p, a, stream);
  CU_CHECK(cu.cuStreamSynchronize(stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CU_CHECK(cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  xqa_decode(rt, p, a, stream);
  CU_CHECK(cu.cuStreamEndCapture(stream, &graph));
  CU_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
  dc.poison();
  CU_CHECK(cu.cuGraphLaunch(exec, stream));
  CU_CHECK(cu.cuStreamSynchronize(stream));
  const auto first = dc.out->download<unsigned char>(dc.out_bytes);
  v_dev = 2.f;
  v_scale.upload(&v_dev, sizeof v_dev);
  dc.poison();
  CU_CHECK(cu.cuGraphLaunch(exec, stream));
  CU_CHECK(cu.cuStreamSynchronize(stream));
  const auto second = dc.out->download<unsigned char>(dc.out_bytes);
  const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
  long long doubled = 0, written = 0;
  for (size_t t = 0; t < ref.written.size(); ++t) {
    if (!ref.written[t]) continue;
    for (long long e = 0; e < (long long)p.num_q_heads * p.head_dim; ++e) {
      const long long idx = (long long)t * p.num_q_heads * p.head_dim + e;
      const float x = kc::to_float(kc::kBF16, first.data(), idx), y = kc::to_float(kc::kBF16, second.data(), idx);
      ++written;
      doubled += std::isfinite(x) && y == 2 * x;
    }
  }
  CHECK(written > 0);
  CHECK(doubled == written);
  cu.cuGraphExecDestroy(exec);
  cu.cuGraphDestroy(graph);
  cu.cuStreamDestroy(stream);
}

TEST_CASE("a prepared xqa op matches the one-shot call bit for bit, through C++ and ktune_op_run", "[gpu][xqa][op]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const Problem p = prepared_op_problem();
  DevCase dc(prepared_op_case("xqa prepared op"));
  const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
  const int bound = dc.c.max_pages_per_req * p.page_size;
  XqaDecodeOp op = xqa::prepare(rt, p);
  for (int splits : {0, 5}) {
    XqaDecodeArgs a = dc.args(bound);
    a.num_splits = splits;
    const XqaDecodePlan plan = op.plan(a);
    dc.ensure_workspace(plan.workspace_bytes);
    if (dc.ws) {
      a.workspace = dc.ws->as<void>();
      a.workspace_bytes = dc.ws->bytes();
    }
    auto run_and_read = [&](const std::function<void()>& launch) {
      return launch_checked(dc, p, ref, "splits " + std::to_string(splits), launch);
    };
    const auto one_shot = run_and_read([&] { xqa_decode(rt, p, a, nullptr); });
    const RuntimeStats before = rt.stats();
    const auto prepared = run_and_read([&] { op.run(a, nullptr); });
    CHECK(prepared == one_shot);
    CHECK(rt.stats().compiles == before.compiles);

    // The same op through the C API: the C struct carries the same fields.
    ktune_xqa_args c;
    ktune_xqa_args_default(&c);
    c.q = a.q, c.kv_cache = a.kv_cache, c.block_tables = a.block_tables, c.seq_lens = a.seq_lens;
    c.sinks = a.sinks, c.out = a.out, c.lse = a.lse, c.workspace = a.workspace, c.workspace_bytes = a.workspace_bytes;
    c.batch = a.batch, c.num_tokens = a.num_tokens, c.q_len_per_req = a.q_len_per_req;
    c.max_pages_per_req = a.max_pages_per_req, c.num_pages = a.num_pages, c.max_seq_len = a.max_seq_len;
    c.softmax_scale = a.softmax_scale, c.k_scale = a.k_scale, c.v_scale = a.v_scale, c.num_splits = a.num_splits;
    ktune_runtime_options ro;
    ktune_runtime_options_default(&ro);
    ktune_runtime* crt = nullptr;
    REQUIRE(ktune_runtime_create(&ro, &crt) == KTUNE_OK);
    ktune_op* cop = nullptr;
    REQUIRE(ktune_op_prepare(crt, "xqa_decode", p.key().c_str(), &cop) == KTUNE_OK);
    const auto through_c = run_and_read([&] { REQUIRE(ktune_op_run(cop, &c, nullptr) == KTUNE_OK); });
    CHECK(through_c == one_shot);
    const char* plan_json = nullptr;
    REQUIRE(ktune_op_plan(cop, &c, &plan_json) == KTUNE_OK);
    CHECK_THAT(plan_json, Catch::Contains("\"num_splits\":" + std::to_string(plan.num_splits)));
    ktune_op_free(cop);
    ktune_runtime_destroy(crt);
  }
}

TEST_CASE("a prepared xqa op replays from a CUDA graph and follows a newly tuned config", "[gpu][xqa][op]") {
  KTUNE_REQUIRE_GPU();
  Runtime rt(RuntimeOptions::from_env());
  const auto& cu = detail::driver();
  const Problem p = tuned_op_problem();
  test::XqaRandomOptions o;
  o.batch = 2;
  o.max_seq_len = 1500;
  o.seed = test::run_seed("xqa prepared op graph");
  DevCase dc(test::make_xqa_case(p, o));
  const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
  const int bound = dc.c.max_pages_per_req * p.page_size;
  XqaDecodeOp op = xqa::prepare(rt, p);
  XqaDecodeArgs a = dc.args(bound);
  a.num_splits = 1;
  const XqaDecodePlan first = op.plan(a);

  // A tuned winner the runtime learns after the op planned: the next call resolves again and runs it.
  const std::string tuned = first.config == kTunedOpConfigs[0] ? kTunedOpConfigs[1] : kTunedOpConfigs[0];
  rt.remember_tuned_config("xqa_decode", tuning_key(p.key(), {{"b", bucket_pow2_ceil(a.batch)},
                                                              {"l", bucket_pow2_ceil(a.max_seq_len)}}), tuned);
  const XqaDecodePlan second = op.plan(a);
  CHECK(second.config == tuned);
  CHECK(second.source == "tuned");

  CUstream stream = nullptr;
  CU_CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  op.run(a, stream);  // warm-up: loads the module before capture
  CU_CHECK(cu.cuStreamSynchronize(stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CU_CHECK(cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  try {
    op.run(a, stream);
  } catch (...) {
    cu.cuStreamEndCapture(stream, &graph);
    throw;
  }
  CU_CHECK(cu.cuStreamEndCapture(stream, &graph));
  CU_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
  dc.poison();
  CU_CHECK(cu.cuGraphLaunch(exec, stream));
  CU_CHECK(cu.cuStreamSynchronize(stream));
  const Outcome res = check(p, dc.compare(ref));
  INFO(res.line);
  CHECK(res.ok);
  cu.cuGraphExecDestroy(exec);
  cu.cuGraphDestroy(graph);
  cu.cuStreamDestroy(stream);
}

TEST_CASE("xqa ops launched programmatically dependent, chained eagerly and in a graph, match plain launches",
          "[gpu][xqa][op][pdl]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const auto& cu = detail::driver();
  // bf16 q and out of one shape: call i + 1 reads call i's output as its q, so a call that read its inputs
  // before the call before it finished (a missing or misplaced griddepcontrol.wait) would differ.
  const Problem p = make_problem(128, 32, 8, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None,
                                 false, false, false, false);
  test::XqaRandomOptions o;
  o.batch = 6;
  o.min_seq_len = 1500;
  o.max_seq_len = 3000;
  o.seed = test::run_seed("xqa pdl chain");
  DevCase dc(test::make_xqa_case(p, o));
  const int bound = dc.c.max_pages_per_req * p.page_size;
  constexpr int kChain = 8;
  std::vector<std::unique_ptr<test::DeviceBuffer>> outs;
  for (int i = 0; i < kChain; ++i) outs.push_back(std::make_unique<test::DeviceBuffer>(dc.out_bytes));
  XqaDecodeOp plain = xqa::prepare(rt, p), pdl = xqa::prepare(rt, p);
  pdl.set_pdl(true);
  CUstream stream = nullptr;
  CU_CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (int splits : {1, 4}) {
    XqaDecodeArgs a = dc.args(bound);
    a.num_splits = splits;
    dc.ensure_workspace(plain.plan(a).workspace_bytes);
    if (dc.ws) {
      a.workspace = dc.ws->as<void>();
      a.workspace_bytes = dc.ws->bytes();
    }
    auto chain = [&](const XqaDecodeOp& op) {
      for (int i = 0; i < kChain; ++i) {
        a.q = i == 0 ? dc.q->as<void>() : outs[i - 1]->as<void>();
        a.out = outs[i]->as<void>();
        op.run(a, stream);
      }
    };
    auto read_all = [&] {
      CU_CHECK(cu.cuStreamSynchronize(stream));
      std::vector<std::vector<unsigned char>> v;
      for (auto& b : outs) v.push_back(b->download<unsigned char>(dc.out_bytes));
      for (auto& b : outs) b->poison(0xFF);
      return v;
    };
    for (auto& b : outs) b->poison(0xFF);
    chain(plain);
    const auto want = read_all();
    chain(pdl);
    CHECK(read_all() == want);

    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    CU_CHECK(cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    try {
      chain(pdl);
    } catch (...) {
      cu.cuStreamEndCapture(stream, &graph);
      throw;
    }
    CU_CHECK(cu.cuStreamEndCapture(stream, &graph));
    CU_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
    for (int rep = 0; rep < 3; ++rep) {
      CU_CHECK(cu.cuGraphLaunch(exec, stream));
      INFO("splits " << splits << ", graph replay " << rep);
      CHECK(read_all() == want);
    }
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
  }
  cu.cuStreamDestroy(stream);
}

TEST_CASE("xqa_decode plans split-KV for few long requests and refuses a missing workspace", "[gpu][xqa]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const Problem p = make_problem(128, 64, 8, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None,
                                 false, false, false, false);
  const XqaDecodePlan plan = xqa_decode_plan(rt, p, 1, 131072);
  std::printf("plan B1 L128K 64/8 heads: config %s (%s), %d splits, workspace %zu B\n", plan.config.c_str(),
              plan.source.c_str(), plan.num_splits, plan.workspace_bytes);
  CHECK(plan.num_splits > 1);
  CHECK(plan.workspace_bytes > 0);
  XqaDecodeArgs a;
  a.q = a.kv_cache = a.out = reinterpret_cast<void*>(uintptr_t(0x100000));
  a.block_tables = a.seq_lens = reinterpret_cast<const int32_t*>(uintptr_t(0x100000));
  a.batch = 1;
  a.num_tokens = 1;
  a.max_pages_per_req = 4096;
  a.num_pages = 4096;
  a.max_seq_len = 131072;
  a.softmax_scale = 0.088f;
  try {
    xqa_decode(rt, p, a, nullptr);
    FAIL("expected a workspace error");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("workspace: ") != std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------------------
// CPU only: every bad field is reported by name before any driver call (there is no driver in CI).
namespace {

Problem validation_problem() {
  return make_problem(128, 32, 8, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 4, MaskKind::Causal, false, false,
                      false, false);
}

XqaDecodeArgs valid_args() {
  auto fake = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  XqaDecodeArgs a;
  a.q = fake(0x10000);
  a.kv_cache = fake(0x20000);
  a.block_tables = static_cast<const int32_t*>(fake(0x30000));
  a.seq_lens = static_cast<const int32_t*>(fake(0x40000));
  a.out = fake(0x50000);
  a.batch = 8;
  a.num_tokens = 32;
  a.q_len_per_req = 4;
  a.max_pages_per_req = 128;
  a.num_pages = 1024;
  a.max_seq_len = 4096;
  a.softmax_scale = 0.088f;
  return a;
}

std::string error_of(const std::function<void()>& f, Status* status) {
  try {
    f();
  } catch (const Error& e) {
    *status = e.status();
    return e.what();
  }
  *status = Status::ok;
  return "";
}

}  // namespace

TEST_CASE("xqa_decode out strides: every layout whose rows do not overlap is taken, every other refused", "[xqa]") {
  // Against a brute force over every pair of (token, head) rows, random strides (multiples of 4, some interleaving
  // tokens between heads, which the O(1) test for the usual layouts does not cover).
  const Problem p = validation_problem();  // 32 query heads, head_dim 128
  std::mt19937_64 rng(test::run_seed("xqa out strides"));
  int taken = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    XqaDecodeArgs a = valid_args();
    const int tokens = 1 + int(rng() % 6);
    a.batch = tokens;
    a.num_tokens = tokens;
    a.q_len_per_req = 1;
    a.out_stride_token = 4 * int64_t(rng() % 1200);
    a.out_stride_head = 4 * int64_t(rng() % 1200);
    const int64_t st = a.out_stride_token ? a.out_stride_token : 32 * 128, sh = a.out_stride_head ? a.out_stride_head : 128;
    bool overlap = false;
    for (int64_t t1 = 0; t1 < tokens && !overlap; ++t1)
      for (int64_t h1 = 0; h1 < 32 && !overlap; ++h1)
        for (int64_t t2 = 0; t2 < tokens && !overlap; ++t2)
          for (int64_t h2 = 0; h2 < 32 && !overlap; ++h2) {
            if (t1 == t2 && h1 == h2) continue;
            const int64_t o1 = t1 * st + h1 * sh, o2 = t2 * st + h2 * sh;
            overlap = o1 < o2 + 128 && o2 < o1 + 128;
          }
    Status status = Status::ok;
    const std::string msg = error_of([&] { xqa_decode_validate(p, a); }, &status);
    INFO("tokens " << tokens << " out_stride_token " << a.out_stride_token << " out_stride_head " << a.out_stride_head
                   << ": " << msg);
    CHECK(msg.empty() == !overlap);
    if (overlap) CHECK_THAT(msg, Catch::Contains("do not overlap"));
    ++(overlap ? refused : taken);
  }
  CHECK(taken > 20);
  CHECK(refused > 20);
  // The reviewer's layout: rows 0, 128, 256 (token) x 0, 192 (head) apart never meet.
  XqaDecodeArgs a = valid_args();
  a.batch = a.num_tokens = 3;
  a.q_len_per_req = 1;
  a.out_stride_token = 128;
  a.out_stride_head = 192;
  Problem two_heads = make_problem(64, 2, 1, 32, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None,
                                   false, false, false, false);
  CHECK_NOTHROW(xqa_decode_validate(two_heads, a));
}

TEST_CASE("xqa_decode argument errors name the field and need no GPU", "[xqa]") {
  test::TempDir dir;
  RuntimeOptions ro;
  ro.cache_path = dir.file("v.db");
  Runtime rt(ro);
  auto fake = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  const Problem base = validation_problem();
  REQUIRE_NOTHROW(xqa_decode_validate(base, valid_args()));

  struct Case {
    const char* field;
    std::function<void(Problem&, XqaDecodeArgs&)> mutate;
  };
  const std::vector<Case> cases = {
      {"head_dim", [](Problem& p, XqaDecodeArgs&) { p.head_dim = 96; }},
      {"q", [](Problem&, XqaDecodeArgs& a) { a.q = nullptr; }},
      {"kv_cache", [](Problem&, XqaDecodeArgs& a) { a.kv_cache = nullptr; }},
      {"kv_cache", [&](Problem&, XqaDecodeArgs& a) { a.kv_cache = fake(0x20008); }},
      {"block_tables", [](Problem&, XqaDecodeArgs& a) { a.block_tables = nullptr; }},
      {"seq_lens", [](Problem&, XqaDecodeArgs& a) { a.seq_lens = nullptr; }},
      {"out", [](Problem&, XqaDecodeArgs& a) { a.out = nullptr; }},
      {"out", [&](Problem&, XqaDecodeArgs& a) { a.out = fake(0x50002); }},
      {"batch", [](Problem&, XqaDecodeArgs& a) { a.batch = 0; }},
      {"batch", [](Problem&, XqaDecodeArgs& a) { a.batch = 70000; }},
      {"num_tokens", [](Problem&, XqaDecodeArgs& a) { a.num_tokens = 31; }},
      {"q_len_per_req", [](Problem&, XqaDecodeArgs& a) { a.q_len_per_req = 0; }},
      {"q_len_per_req", [](Problem&, XqaDecodeArgs& a) { a.q_len_per_req = 5; a.num_tokens = 40; }},
      {"max_q_len", [](Problem& p, XqaDecodeArgs&) { p.max_q_len = 65; }},
      {"q_len_per_req", [](Problem& p, XqaDecodeArgs& a) {
         p.max_q_len = 64;
         a.q_len_per_req = 65;
         a.num_tokens = 8 * 65;
       }},
      {"num_tokens", [&](Problem&, XqaDecodeArgs& a) {
         a.q_cu_seq_lens = static_cast<const int32_t*>(fake(0x60000));
         a.num_tokens = 33;
       }},
      {"mask", [&](Problem&, XqaDecodeArgs& a) { a.mask = static_cast<const uint16_t*>(fake(0x70000)); }},
      {"mask", [](Problem& p, XqaDecodeArgs&) { p.mask = MaskKind::Explicit; }},
      {"sinks", [](Problem& p, XqaDecodeArgs&) { p.has_sinks = true; }},
      {"sinks", [&](Problem&, XqaDecodeArgs& a) { a.sinks = static_cast<const float*>(fake(0x80000)); }},
      {"lse", [](Problem& p, XqaDecodeArgs&) { p.write_lse = true; }},
      {"lse", [&](Problem&, XqaDecodeArgs& a) { a.lse = static_cast<float*>(fake(0x90000)); }},
      {"window_left", [](Problem& p, XqaDecodeArgs&) { p.sliding_window = true; }},
      {"window_left", [](Problem&, XqaDecodeArgs& a) { a.window_left = 128; }},
      {"softcap", [](Problem& p, XqaDecodeArgs&) { p.softcap = true; }},
      {"softcap", [](Problem&, XqaDecodeArgs& a) { a.softcap = 30.f; }},
      {"softcap", [](Problem& p, XqaDecodeArgs& a) { p.softcap = true; a.softcap = std::nanf(""); }},
      {"softmax_scale", [](Problem&, XqaDecodeArgs& a) { a.softmax_scale = 0.f; }},
      {"softmax_scale", [](Problem&, XqaDecodeArgs& a) { a.softmax_scale = std::nanf(""); }},
      {"k_scale", [](Problem&, XqaDecodeArgs& a) { a.k_scale = -1.f; }},
      {"v_scale", [](Problem&, XqaDecodeArgs& a) { a.v_scale = INFINITY; }},
      {"q_scale", [](Problem& p, XqaDecodeArgs& a) { p.q_dtype = p.kv_dtype = kc::kE4M3; a.q_scale = 0.f; }},
      {"o_scale", [](Problem& p, XqaDecodeArgs& a) { p.out_dtype = kc::kE4M3; a.o_scale = 0.f; }},
      // Each scale finite, their folded products past the float range (every score inf, the output NaN).
      {"softmax_scale", [](Problem&, XqaDecodeArgs& a) { a.softmax_scale = 1e20f; a.k_scale = 1e20f; }},
      {"softmax_scale", [](Problem& p, XqaDecodeArgs& a) { p.softcap = true; a.softcap = 1e-30f; a.softmax_scale = 1e10f; }},
      {"v_scale", [](Problem& p, XqaDecodeArgs& a) { p.out_dtype = kc::kE4M3; a.v_scale = 1e20f; a.o_scale = 1e-20f; }},
      {"max_seq_len", [](Problem&, XqaDecodeArgs& a) { a.max_seq_len = 0; }},
      {"max_seq_len", [](Problem&, XqaDecodeArgs& a) { a.max_seq_len = (1 << 30) + 1; a.max_pages_per_req = 1 << 26; }},
      {"max_pages_per_req", [](Problem&, XqaDecodeArgs& a) { a.max_pages_per_req = 0; }},
      {"max_pages_per_req", [](Problem&, XqaDecodeArgs& a) { a.max_seq_len = 128 * 32 + 1; }},
      {"num_pages", [](Problem&, XqaDecodeArgs& a) { a.num_pages = 0; }},
      // Exactly one cache form; the pair's pointers and page stride.
      {"kv_cache", [&](Problem&, XqaDecodeArgs& a) { a.k_cache = fake(0x21000); a.v_cache = fake(0x22000); }},
      {"kv_cache", [&](Problem&, XqaDecodeArgs& a) { a.kv_cache = nullptr; }},
      {"v_cache", [&](Problem&, XqaDecodeArgs& a) { a.kv_cache = nullptr; a.k_cache = fake(0x21000); }},
      {"k_cache", [&](Problem&, XqaDecodeArgs& a) { a.kv_cache = nullptr; a.v_cache = fake(0x22000); }},
      {"k_cache", [&](Problem&, XqaDecodeArgs& a) {
         a.kv_cache = nullptr; a.k_cache = fake(0x21008); a.v_cache = fake(0x22000);
       }},
      {"v_cache", [&](Problem&, XqaDecodeArgs& a) {
         a.kv_cache = nullptr; a.k_cache = fake(0x21000); a.v_cache = fake(0x21000);
       }},
      {"kv_page_stride", [](Problem&, XqaDecodeArgs& a) { a.kv_page_stride = 2 * 8 * 32 * 128; }},
      {"kv_page_stride", [&](Problem&, XqaDecodeArgs& a) {
         a.kv_cache = nullptr; a.k_cache = fake(0x21000); a.v_cache = fake(0x22000);
         a.kv_page_stride = 8 * 32 * 128 - 8;  // less than one page
       }},
      {"kv_page_stride", [&](Problem&, XqaDecodeArgs& a) {
         a.kv_cache = nullptr; a.k_cache = fake(0x21000); a.v_cache = fake(0x22000);
         a.kv_page_stride = 8 * 32 * 128 + 4;  // 8 bytes past a page: not a multiple of 16 bytes
       }},
      // Strides: non-negative; out's keep 4-value stores aligned and rows apart.
      {"q_stride_token", [](Problem&, XqaDecodeArgs& a) { a.q_stride_token = -128; }},
      {"q_stride_head", [](Problem&, XqaDecodeArgs& a) { a.q_stride_head = -1; }},
      {"q_stride_token", [](Problem&, XqaDecodeArgs& a) { a.q_stride_token = int64_t{1} << 41; }},
      {"kv_page_stride", [&](Problem&, XqaDecodeArgs& a) {
         a.kv_cache = nullptr; a.k_cache = fake(0x21000); a.v_cache = fake(0x22000);
         a.kv_page_stride = int64_t{1} << 62;  // would overflow the byte offsets
       }},
      {"out_stride_head", [](Problem&, XqaDecodeArgs& a) { a.out_stride_head = 130; }},
      {"out_stride_token", [](Problem&, XqaDecodeArgs& a) { a.out_stride_token = 32 * 128 + 2; }},
      {"out_stride_head", [](Problem&, XqaDecodeArgs& a) { a.out_stride_head = 64; }},
      {"out_stride_token", [](Problem&, XqaDecodeArgs& a) { a.out_stride_head = 136; }},
      {"out_stride_head", [](Problem&, XqaDecodeArgs& a) { a.out_stride_token = 128; a.out_stride_head = 128 * 16; }},
      // Device-held scales: 4-byte aligned where they apply.
      {"k_scale_ptr", [&](Problem&, XqaDecodeArgs& a) { a.k_scale_ptr = static_cast<const float*>(fake(0xB0002)); }},
      {"v_scale_ptr", [&](Problem&, XqaDecodeArgs& a) { a.v_scale_ptr = static_cast<const float*>(fake(0xB0001)); }},
      {"q_scale_ptr", [&](Problem& p, XqaDecodeArgs& a) {
         p.q_dtype = p.kv_dtype = kc::kE4M3;
         a.q_scale_ptr = static_cast<const float*>(fake(0xB0002));
       }},
      {"o_scale_ptr", [&](Problem& p, XqaDecodeArgs& a) {
         p.out_dtype = kc::kE4M3;
         a.o_scale_ptr = static_cast<const float*>(fake(0xB0002));
       }},
      {"num_splits", [](Problem&, XqaDecodeArgs& a) { a.num_splits = -1; }},
      {"num_splits", [](Problem&, XqaDecodeArgs& a) { a.num_splits = 5000; }},
      {"config", [](Problem&, XqaDecodeArgs& a) { a.config = "t64.bogus"; }},
      {"workspace", [](Problem&, XqaDecodeArgs& a) { a.config = "t32.s3.w2"; a.num_splits = 4; }},
      {"workspace", [&](Problem&, XqaDecodeArgs& a) {
         a.config = "t32.s3.w2";
         a.num_splits = 4;
         a.workspace = fake(0xA0004);
         a.workspace_bytes = size_t(1) << 30;
       }},
      {"workspace_bytes", [&](Problem&, XqaDecodeArgs& a) {
         a.config = "t32.s3.w2";
         a.num_splits = 4;
         a.workspace = fake(0xA0000);
         a.workspace_bytes = 1024;
       }},
  };
  for (const Case& c : cases) {
    Problem p = base;
    XqaDecodeArgs a = valid_args();
    c.mutate(p, a);
    Status st = Status::ok;
    const std::string msg = error_of([&] { xqa_decode(rt, p, a, nullptr); }, &st);
    INFO("field " << c.field << ": " << msg);
    CHECK(st == Status::invalid_argument);
    CHECK(msg.find("xqa_decode") != std::string::npos);
    CHECK(msg.find(std::string(c.field) + ":") != std::string::npos);
  }

  // Planning with a forced config and split count needs no device either.
  const XqaDecodePlan plan = xqa_decode_plan(rt, base, 8, 4096, "t32.s3.w2", 4);
  CHECK(plan.num_splits == 4);
  CHECK(plan.source == "forced");
  CHECK(plan.workspace_bytes == workspace_bytes(base, Config::from_key("t32.s3.w2"), 8, 4));
  CHECK(xqa_decode_workspace_bytes(rt, base, 8, 4096, "t32.s3.w2", 1) == 0);
}

// Checked kernels (docs/reliability.md): a block-table entry outside the cache and a seq_len longer than a
// block-table row are recorded in the runtime's fault record and skipped; the launch completes without a
// CUDA error, and a clean launch afterwards finds no fault. Both ways of asking for checks are covered: a
// problem marked checked, and RuntimeOptions::checked (KTUNE_CHECKED=1) upgrading an unchecked problem; each on
// the mma.sync path with 16-bit and FP8 KV and on the wgmma path (checked_combos).
TEST_CASE("checked xqa_decode reports bad page indices and seq_lens instead of faulting", "[gpu][xqa][checked]") {
  KTUNE_REQUIRE_GPU();
  RuntimeOptions opts = RuntimeOptions::from_env();
  const bool via_option = GENERATE(false, true);
  opts.checked = via_option;
  Runtime rt(opts);
  std::vector<Combo> combos = checked_combos();
  combos.pop_back();  // the q_cu_seq_lens test's
  for (const Combo& cb : combos) {
    Problem p = cb.p;
    p.checked = !via_option;
    Problem unchecked = p;
    unchecked.checked = false;
    const char* cfg = cb.config.empty() ? nullptr : cb.config.c_str();
    INFO(cb.name << ": " << p.key() << " / " << (cfg ? cfg : "default"));
    test::XqaRandomOptions o;
    o.batch = 4;
    o.min_seq_len = 100;
    o.max_seq_len = 1500;
    o.seed = test::run_seed(("xqa checked " + cb.name).c_str());
    DevCase dc(test::make_xqa_case(unchecked, o));
    const int bound = std::max(1, dc.c.max_seq_len);
    dc.ensure_workspace(xqa_decode_workspace_bytes(rt, p, o.batch, bound, cfg));
    auto launch_once = [&](int max_seq_len) {
      dc.poisoned_launch(rt, p, max_seq_len, cfg);  // throws on any CUDA error: a checked kernel must not fault
    };

    // Clean data: right answer, no fault.
    launch_once(bound);
    const test::XqaRefResult ref = test::xqa_reference(unchecked, dc.c.host_params());
    const Outcome clean = check(unchecked, dc.compare(ref));
    INFO(clean.line);
    CHECK(clean.ok);
    CHECK_FALSE(rt.take_device_fault().has_value());
    const std::vector<unsigned char> clean_out = dc.out->download<unsigned char>(dc.out_bytes);

    // A page number past the end of the cache in request 2's first block-table entry.
    std::vector<int> bt = dc.c.block_tables;
    const int bad_page = int(dc.c.num_pages) + 7;
    bt[size_t(2) * dc.c.max_pages_per_req] = bad_page;
    dc.bt->upload(bt);
    launch_once(bound);
    std::optional<DeviceFault> f = rt.take_device_fault();
    REQUIRE(f.has_value());
    INFO(f->message());
    CHECK(f->what == "page index");
    CHECK(f->where == 2u);
    CHECK(f->value == bad_page);
    CHECK(f->limit == dc.c.num_pages);
    CHECK_FALSE(rt.take_device_fault().has_value());  // taking it cleared the record
    dc.bt->upload(dc.c.block_tables);

    // A seq_len that needs more pages than a block-table row holds (request 1).
    std::vector<int> sl = dc.c.seq_lens;
    const int too_long = dc.c.max_pages_per_req * p.page_size + 5;
    sl[1] = too_long;
    dc.sl->upload(sl);
    // The host bound stays what the caller promised (a larger one is refused on the host, naming
    // max_pages_per_req); only the device data disagrees with it, which is what the host cannot see.
    launch_once(bound);
    f = rt.take_device_fault();
    REQUIRE(f.has_value());
    INFO(f->message());
    CHECK(f->what == "seq_len");
    CHECK(f->where == 1u);
    CHECK(f->value == too_long);
    // A seq_len within a page of 2^31: its page count in 32 bits wraps negative, which must not pass the check.
    sl[1] = 2147483647;
    dc.sl->upload(sl);
    launch_once(bound);
    f = rt.take_device_fault();
    REQUIRE(f.has_value());
    INFO(f->message());
    CHECK(f->what == "seq_len");
    CHECK(f->value == 2147483647);
    dc.sl->upload(dc.c.seq_lens);

    // Clean data again: the bits of the first clean launch (same kernel, same data), no fault.
    launch_once(bound);
    CHECK_FALSE(rt.take_device_fault().has_value());
    CHECK(dc.out->download<unsigned char>(dc.out_bytes) == clean_out);
    std::printf("checked xqa_decode %s (%s): bad page and long seq_len reported, 0 CUDA errors\n", cb.name.c_str(),
                via_option ? "RuntimeOptions::checked" : "problem.checked");
  }
}

TEST_CASE("checked xqa_decode reports q_cu_seq_lens entries outside the query tokens and touches nothing for them",
          "[gpu][xqa][checked]") {
  KTUNE_REQUIRE_GPU();
  Runtime rt(RuntimeOptions::from_env());
  const Problem p = checked_combos().back().p;  // bf16 q4 causal, checked, default config
  Problem unchecked = p;
  unchecked.checked = false;
  // Four requests of 4 tokens, passed in the ragged form (q_cu_seq_lens = 0, 4, 8, 12, 16 in device memory): the
  // same rows as the uniform form, so its reference applies, and every offset below is chosen, not drawn.
  test::XqaRandomOptions o;
  o.batch = 4;
  o.ragged = false;
  o.min_seq_len = 100;
  o.max_seq_len = 1500;
  o.seed = test::run_seed("xqa checked q_cu");
  DevCase dc(test::make_xqa_case(unchecked, o));
  REQUIRE(dc.c.num_tokens == 16);
  dc.c.opt.ragged = true;
  // Room past out for rows a request could write if its offsets were trusted, kept poisoned.
  const size_t row_bytes = size_t(p.num_q_heads) * p.head_dim * kc::dtype_size(int(p.out_dtype));
  dc.out = std::make_unique<test::DeviceBuffer>(dc.out_bytes + size_t(p.max_q_len) * row_bytes);
  const int bound = std::max(1, dc.c.max_seq_len);
  dc.ensure_workspace(xqa_decode_workspace_bytes(rt, p, o.batch, bound));
  auto out_bytes = [&] { return dc.out->download<unsigned char>(dc.out->bytes()); };
  // Rows [r0, r1) of `now` as in `clean` (same kernel, same data: bit for bit), or untouched.
  auto rows_as = [&](const std::vector<unsigned char>& now, const std::vector<unsigned char>* clean, int r0, int r1) {
    size_t differ = 0;
    for (size_t i = size_t(r0) * row_bytes; i < size_t(r1) * row_bytes; ++i)
      differ += now[i] != (clean ? (*clean)[i] : 0xFF);
    return differ;
  };

  dc.cu->upload(dc.c.q_cu);
  dc.poisoned_launch(rt, p, bound);
  const Outcome clean_check = check(unchecked, dc.compare(test::xqa_reference(unchecked, dc.c.host_params())));
  INFO(clean_check.line);
  CHECK(clean_check.ok);
  CHECK_FALSE(rt.take_device_fault().has_value());
  const std::vector<unsigned char> clean = out_bytes();
  CHECK(rows_as(clean, nullptr, 16, 16 + p.max_q_len) == 0);

  struct BadOffsets {
    const char* what;
    std::vector<int> cu;
    unsigned request;
    long long value;
    int same_rows;  // rows [0, same_rows) as in the clean run, the rest (and the room past out) untouched
  };
  const BadOffsets cases[] = {
      // request 3 starts at 14: trusted, its 4 rows would end 2 rows past out
      {"end past num_tokens", {0, 4, 8, 14, 18}, 3, 18, 12},
      // request 3 starts before the first row (request 2's length is then negative: no rows, nothing reported)
      {"start before row 0", {0, 4, 8, -3, 16}, 3, -3, 8},
  };
  for (const BadOffsets& bad : cases) {
    INFO(bad.what);
    dc.cu->upload(bad.cu);
    dc.poisoned_launch(rt, p, bound);  // a checked kernel must not fault
    const std::optional<DeviceFault> f = rt.take_device_fault();
    REQUIRE(f.has_value());
    INFO(f->message());
    CHECK(f->what == "q_cu_seq_lens entry");
    CHECK(f->where == bad.request);
    CHECK(f->value == bad.value);
    CHECK(f->limit == 17);
    const std::vector<unsigned char> now = out_bytes();
    CHECK(rows_as(now, &clean, 0, bad.same_rows) == 0);
    CHECK(rows_as(now, nullptr, bad.same_rows, 16 + p.max_q_len) == 0);
  }
  dc.cu->upload(dc.c.q_cu);  // good offsets again: the clean bits, no fault
  dc.poisoned_launch(rt, p, bound);
  CHECK(rows_as(out_bytes(), &clean, 0, 16) == 0);
  CHECK_FALSE(rt.take_device_fault().has_value());
  std::printf("checked xqa_decode: q_cu_seq_lens entries past num_tokens and below 0 reported, nothing written "
              "outside out or for those requests\n");
}

// The GPU half of the host-backend oracle (tests/support/xqa_oracle.hpp): runs the oracle cases on this GPU,
// checks them against the fp64 reference, and writes the raw outputs to $KTUNE_ORACLE_OUT for the [host][oracle]
// test to compare with the LLVM host kernel. KTUNE_ORACLE_HEADER is stored as the fixture's description.
TEST_CASE("xqa_decode outputs for the host-backend oracle", "[.][xqa_oracle_dump]") {
  KTUNE_REQUIRE_GPU();
  const char* path = std::getenv("KTUNE_ORACLE_OUT");
  REQUIRE(path != nullptr);
  Runtime& rt = test_runtime();
  test::OracleFile file;
  const char* header = std::getenv("KTUNE_ORACLE_HEADER");
  file.header = header ? header : "xqa_decode GPU outputs";
  const uint64_t base = test::run_seed("xqa oracle dump");
  uint64_t i = 0;
  for (const test::OracleCase& oc : test::oracle_cases()) {
    const uint64_t seed = base + 1000 * (++i);
    DevCase dc(test::make_oracle_case(oc, seed));
    const Problem& p = oc.problem;
    const int bound = std::max(1, dc.c.max_seq_len);
    dc.ensure_workspace(xqa_decode_workspace_bytes(rt, p, dc.c.batch, bound));
    XqaDecodeArgs a = dc.args(bound);
    if (dc.ws) {
      a.workspace = dc.ws->as<void>();
      a.workspace_bytes = dc.ws->bytes();
    }
    dc.poison();
    xqa_decode(rt, p, a, nullptr);
    test::sync();
    const test::XqaRefResult ref = test::xqa_reference(p, dc.c.host_params());
    const Outcome r = check(p, dc.compare(ref));
    INFO(oc.name << ": " << r.line);
    CHECK(r.ok);
    test::OracleRecord rec;
    rec.name = oc.name;
    rec.problem_key = p.key();
    rec.config = xqa_decode_plan(rt, p, dc.c.batch, bound).config;
    rec.seed = seed;
    rec.input_digest = test::oracle_input_digest(dc.c);
    rec.out = dc.out->download<unsigned char>(dc.out_bytes);
    if (p.write_lse) rec.lse = dc.lse->download<float>(dc.lse_bytes / sizeof(float));
    file.records.push_back(std::move(rec));
  }
  test::write_oracle_file(path, file);
  std::printf("oracle: %zu GPU outputs written to %s\n", file.records.size(), path);
}
