// sparse_mla_decode through the real runtime (ktune::sparse_mla_decode) against the fp64 host reference.
//
// [gpu][sparse_mla]: the matrix heads {16, 64, 128} x topk {512, 2048} x page size {64, 256} x cache
// {fp8_ds_mla, bf16} x sinks {off, on}, each with fresh random inputs (seed printed; KTUNE_TEST_SEED replays):
// random page placement (a shuffled subset of a larger cache whose other pages are NaN), random -1s, one token
// with only -1s, poisoned outputs (NaN) and workspace, planned and forced split counts, LSE checked; plus
// alternative tile configs (up to 4 per problem), an odd topk with MTP (max_q_len 2, also on the warp-specialized
// kernel: the fp8 default at 64 and 128 heads on sm_90a) and the checked variant reporting a bad slot; every config
// of the sm_90a search space of a small bf16 and a small fp8 problem; a null lse (out bit for bit as with one).
// [.][mla_precompile]: compiles every kernel these tests use into $KTUNE_CACHE for $KTUNE_MLA_ARCH (default
// sm_90a); needs no GPU.
//
// Tolerance: ||out - ref|| / ||ref|| < 1e-2 over a case, every (token, head) row < 3e-2, rows of a token with no
// valid slot exactly 0 (LSE -inf, or the sink logit with sinks). The kernel rounds the dequantized K/V and P to
// bf16 (relative 2^-9) and accumulates in fp32. The LSE is checked against the reference LSE of q . bf16(k) (the
// products the kernel forms) within a bound derived per row from fp32 accumulation and ex2/lg2 rounding
// (sparse_mla/mla_reference.hpp, MlaRef::lse_tol), not against the exact LSE with a fixed tolerance: the bf16
// rounding of K moves the exact LSE by up to ~2e-2 on sharp 128-head rows, more than a fixed bound could allow
// without hiding real errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "sparse_mla/mla_reference.hpp"
#include "support/cache_file.hpp"
#include "support/family_oracle.hpp"
#include "support/gpu.hpp"
#include "support/precompile.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"
#include "support/xqa_oracle.hpp"

using namespace ktune;
using namespace ktune::mla;

namespace {

struct Combo {
  std::string name;
  Problem p;
  std::string config;  // empty = the launch resolves it (tuned or default)
  bool sinks = false;
  int num_tokens = 0;  // 0 = drawn per run
};

Problem make_problem(int heads, int topk, int page, KvFormat f, int max_q_len = 1, bool checked = false) {
  Problem p;
  p.num_heads = heads;
  p.topk = topk;
  p.page_size = page;
  p.kv_format = f;
  p.max_q_len = max_q_len;
  p.checked = checked;
  p.validate();
  return p;
}

const Arch kSm90a{9, 0, 'a'};

std::vector<Combo> all_combos() {
  std::vector<Combo> v;
  for (int h : {16, 32, 64, 128})
    for (int topk : {512, 2048})
      for (int page : {64, 256})
        for (KvFormat f : {KvFormat::Fp8DsMla, KvFormat::Bf16})
          for (bool sinks : {false, true}) {
            Combo c;
            c.p = make_problem(h, topk, page, f);
            c.sinks = sinks;
            c.name = std::string(f == KvFormat::Bf16 ? "bf16" : "fp8") + "_h" + std::to_string(h) + "_k" +
                     std::to_string(topk) + "_p" + std::to_string(page) + (sinks ? "_sink" : "");
            v.push_back(c);
          }
  // 4 other configs of the search space, once each, on the topk-512 page-64 problems
  for (int h : {16, 64, 128})
    for (KvFormat f : {KvFormat::Fp8DsMla, KvFormat::Bf16}) {
      const Problem p = make_problem(h, 512, 64, f);
      const auto space = search_space(p, kSm90a);
      std::vector<size_t> picks;  // 4 configs spread over the rest of the space
      for (size_t k = 0; k < 4 && space.size() > 1; ++k) {
        const size_t i = 1 + k * (space.size() - 1) / 4;
        if (std::find(picks.begin(), picks.end(), i) == picks.end()) picks.push_back(i);
      }
      for (size_t i : picks) {
        Combo c;
        c.p = p;
        c.config = space[i].key();
        c.sinks = i % 2 == 1;
        c.name = std::string("cfg_") + (f == KvFormat::Bf16 ? "bf16" : "fp8") + "_h" + std::to_string(h) + "_" + c.config;
        v.push_back(c);
      }
    }
  // the sm_90a wgmma S = Q K^T path (64 heads per CTA), both caches, 8 and 16 warps
  for (int h : {64, 128})
    for (KvFormat f : {KvFormat::Fp8DsMla, KvFormat::Bf16})
      for (const char* cfg : {"t64.s1.g64.wg", "t64.s1.g64.w16.wg", "t32.s2.g64.wg", "t32.s2.g64.w16.wg"}) {
        const Problem p = make_problem(h, 2048, h == 64 ? 256 : 64, f);
        if (!can_implement(p, Config::from_key(cfg), kSm90a, default_limits(kSm90a)).empty()) continue;
        Combo c;
        c.p = p;
        c.config = cfg;
        c.sinks = h == 64;
        c.name = std::string("wgmma_") + (f == KvFormat::Bf16 ? "bf16" : "fp8") + "_h" + std::to_string(h) + "_" + cfg;
        v.push_back(c);
      }
  {  // odd topk (a partial last tile), MTP positions, many tokens
    Combo c;
    c.p = make_problem(32, 200, 64, KvFormat::Fp8DsMla, 2);
    c.name = "odd_topk_mtp";
    c.num_tokens = 40;
    c.sinks = true;
    v.push_back(c);
  }
  // the warp-specialized kernel (64 heads), its paired form (128 heads) and its 16-head form with a partial last
  // tile and MTP positions
  for (const auto& [heads, cfg] : {std::pair<int, const char*>{64, "t64.s2.g64.ws"}, {128, "t64.s2.g64.wsp"},
                                   {16, "t64.s2.g16.ws"}}) {
    Combo c;
    c.p = make_problem(heads, 200, 64, KvFormat::Fp8DsMla, 2);
    c.config = cfg;
    c.name = "h" + std::to_string(heads) + "_" + cfg + "_odd_topk_mtp";
    c.num_tokens = 24;
    c.sinks = true;
    v.push_back(c);
  }
  // the bench shapes (topk 2048, fp8) at 64 tokens: 128 heads, one CTA wave, no split, the default (paired) and
  // unpaired kernels; 16 heads, the 16-head warp-specialized kernel (two splits)
  for (const auto& [heads, cfg] : {std::pair<int, const char*>{128, ""}, {128, "t64.s2.g64.ws"},
                                   {16, "t64.s2.g16.ws"}}) {
    Combo c;
    c.p = make_problem(heads, 2048, 64, KvFormat::Fp8DsMla);
    c.config = cfg;
    c.name = "bench_h" + std::to_string(heads) + "_t64" + (*cfg ? "_" + std::string(cfg) : std::string());
    c.num_tokens = 64;
    v.push_back(c);
  }
  // the other latent ranks and rope widths the problem accepts (everything above is r512.d64; an fp8_ds_mla row is
  // a multiple of 16 bytes only at rank 512): the default kernel of each (the warp-specialized ones where they
  // implement the shape) and, for the fp8 cache, the first other config of its search space
  for (int h : {16, 64, 128})
    for (const auto& [rank, rope] : {std::pair<int, int>{256, 64}, {512, 128}, {128, 64}, {384, 128}})
      for (KvFormat f : {KvFormat::Fp8DsMla, KvFormat::Bf16}) {
        Problem p = make_problem(h, 512, 64, f);
        p.kv_lora_rank = rank;
        p.rope_dim = rope;
        if (p.row_bytes() % 16 != 0) continue;
        p.validate();
        const std::string shape = std::string(f == KvFormat::Bf16 ? "bf16" : "fp8") + "_h" + std::to_string(h) +
                                  "_r" + std::to_string(rank) + "_d" + std::to_string(rope);
        Combo c;
        c.p = p;
        c.sinks = (rank / 128 + h) % 2 == 1;
        c.name = "shape_" + shape;
        v.push_back(c);
        if (f != KvFormat::Fp8DsMla) continue;
        const Config def = default_config(p, kSm90a);
        const auto space = search_space(p, kSm90a);
        const auto alt = std::find_if(space.begin(), space.end(), [&](const Config& x) { return !(x == def); });
        REQUIRE(alt != space.end());
        c.config = alt->key();
        c.sinks = !c.sinks;
        c.name = "shape_" + shape + "_" + c.config;
        v.push_back(c);
      }
  // the 16-head warp-specialized kernel with an odd number of tiles in one split (1 and 3 tiles of 64 slots):
  // the last tile in K/V buffer 0, which the epilogue then reuses
  for (int topk : {40, 150}) {
    Combo c;
    c.p = make_problem(16, topk, 64, KvFormat::Fp8DsMla);
    c.config = "t64.s2.g16.ws";
    c.name = "h16_ws_odd_tiles_k" + std::to_string(topk);
    c.sinks = topk == 40;
    v.push_back(c);
  }
  return v;
}

// Every config of the sm_90a search space of two small problems (128 heads: the paired warp-specialized kernel is
// in the fp8 space; topk 200: a partial last tile; MTP positions), one per cache format: the matrix above runs 4
// configs a problem, this covers the rest of the space.
std::vector<Combo> sweep_combos() {
  std::vector<Combo> v;
  for (KvFormat f : {KvFormat::Fp8DsMla, KvFormat::Bf16}) {
    const Problem p = make_problem(128, 200, 64, f, 2);
    for (const Config& cfg : search_space(p, kSm90a)) {
      Combo c;
      c.p = p;
      c.config = cfg.key();
      c.num_tokens = 6;
      c.name = std::string("sweep_") + (f == KvFormat::Bf16 ? "bf16" : "fp8") + "_" + c.config;
      v.push_back(c);
    }
  }
  return v;
}

Runtime& test_runtime() {
  static Runtime rt(RuntimeOptions::from_env());
  return rt;
}

// Makes sure the modules of (problems[i], configs[i]) are in a cache layer, with each problem's shared module (its
// combine), compiling on all cores where needed.
void precompile(Runtime& rt, const std::vector<Problem>& problems, const std::vector<std::string>& configs,
                const Arch& arch, int* compiled, int* failed) {
  std::vector<test::PrecompileJob> jobs;
  std::set<std::string> shared;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem p = problems[i];
    const std::string cfg = configs[i];
    jobs.push_back({p.key() + " / " + (cfg.empty() ? "default" : cfg), [p, cfg, arch] {
                      return generate(p, cfg.empty() ? default_config(p, arch) : Config::from_key(cfg), arch);
                    }});
    if (shared.insert(p.key()).second)
      jobs.push_back({p.key() + " / " + kSharedConfig, [p, arch] { return generate_shared(p, arch); }});
  }
  test::precompile_jobs(rt, jobs, arch, compiled, failed);
}

// Checked problems: the default kernel of each (64 heads fp8: `.ws`; 16 heads fp8: the 16-head `.ws`; 128 heads
// fp8: the paired `.wsp`; 128 heads bf16: the wgmma kernel), each with its own index checks.
const std::vector<Problem> kCheckedProblems = {
    make_problem(64, 512, 64, KvFormat::Fp8DsMla, 1, true), make_problem(16, 512, 64, KvFormat::Fp8DsMla, 1, true),
    make_problem(128, 512, 64, KvFormat::Fp8DsMla, 1, true), make_problem(128, 512, 64, KvFormat::Bf16, 1, true)};

void precompile_all(Runtime& rt, const Arch& arch, int* compiled, int* failed) {
  std::vector<Problem> ps;
  std::vector<std::string> cs;
  for (const std::vector<Combo>& combos : {all_combos(), sweep_combos()})
    for (const Combo& c : combos) {
      ps.push_back(c.p);
      cs.push_back(c.config);
    }
  for (const Problem& p : kCheckedProblems) {
    ps.push_back(p);
    cs.push_back("");
  }
  for (const test::MlaOracleCase& oc : test::mla_oracle_cases()) {
    ps.push_back(oc.problem);
    cs.push_back("");
  }
  precompile(rt, ps, cs, arch, compiled, failed);
}

struct DevCase {
  test::MlaCase c;
  std::unique_ptr<test::DeviceBuffer> q, kv, idx, sinks, out, lse, ws;
  size_t out_elems = 0, rows = 0;

  explicit DevCase(test::MlaCase&& cc) : c(std::move(cc)) {
    auto up = [](const auto& v) {
      auto b = std::make_unique<test::DeviceBuffer>(std::max<size_t>(16, v.size() * sizeof(v[0])));
      if (!v.empty()) b->upload(v.data(), v.size() * sizeof(v[0]));
      return b;
    };
    q = up(c.q);
    kv = up(c.kv);
    idx = up(c.indices);
    sinks = up(c.sinks);
    rows = size_t(c.opt.num_tokens) * c.p.num_heads;
    out_elems = rows * c.p.kv_lora_rank;
    out = std::make_unique<test::DeviceBuffer>(out_elems * 2);
    lse = std::make_unique<test::DeviceBuffer>(rows * 4);
  }
  SparseMlaDecodeArgs args() const {
    SparseMlaDecodeArgs a;
    a.q = q->as<void>();
    a.kv_cache = kv->as<void>();
    a.indices = idx->as<int32_t>();
    a.sinks = c.sinks.empty() ? nullptr : sinks->as<float>();
    a.out = out->as<void>();
    a.lse = lse->as<float>();
    a.num_tokens = c.opt.num_tokens;
    a.num_pages = c.num_pages;
    a.softmax_scale = c.softmax_scale;
    if (ws) {
      a.workspace = ws->as<void>();
      a.workspace_bytes = ws->bytes();
    }
    return a;
  }
  void ensure_workspace(size_t bytes) {
    if (bytes == 0 || (ws && ws->bytes() >= bytes)) return;
    ws = std::make_unique<test::DeviceBuffer>(bytes);
  }
  void poison() {
    out->poison(0xFF);
    lse->poison(0xFF);
    if (ws) ws->poison(0xFF);
  }
  // with_lse false: out only (a launch given no lse)
  test::MlaCompare compare(const test::MlaRef& ref, bool with_lse = true) const {
    const auto o = out->download<uint16_t>(out_elems);
    const auto l = lse->download<float>(rows);
    return test::mla_compare(c, ref, o.data(), with_lse ? l.data() : nullptr);
  }
};

bool passes(const test::MlaCompare& r, std::string* line) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "rel %.2e row %.2e lse %.1e (%.2f of bound) nonfinite %lld lse_bad %lld", r.rel_l2,
                r.max_row_rel, r.lse_max_abs, r.lse_max_ratio, r.nonfinite, r.lse_bad);
  *line = buf;
  return r.rel_l2 < 1e-2 && r.max_row_rel < 3e-2 && r.lse_max_ratio < 1 && r.nonfinite == 0 && r.lse_bad == 0;
}

struct RunOutcome {
  bool ok = false;
  std::string head, line;  // what ran; the comparison (or what was thrown)
  test::MlaCompare r;
};

// One launch of dc's case (config null: resolved; splits 0: planned; with_lse false: lse null) on poisoned
// outputs and workspace, checked against ref; prints one line.
RunOutcome run_case(Runtime& rt, const std::string& name, const Problem& p, const char* cfg, int splits, DevCase& dc,
                    const test::MlaRef& ref, bool with_lse = true) {
  RunOutcome res;
  SparseMlaDecodePlan plan;
  try {
    plan = sparse_mla_decode_plan(rt, p, dc.c.opt.num_tokens, cfg, splits);
    dc.ensure_workspace(plan.workspace_bytes);
    dc.poison();
    SparseMlaDecodeArgs a = dc.args();
    a.config = cfg;
    a.num_splits = splits;
    if (!with_lse) a.lse = nullptr;
    sparse_mla_decode(rt, p, a, nullptr);
    test::sync();
    res.r = dc.compare(ref, with_lse);
    res.ok = passes(res.r, &res.line);
  } catch (const std::exception& e) {
    res.line = std::string("threw: ") + e.what();
  }
  char head[300];
  std::snprintf(head, sizeof(head), "%-28s %-40s %-11s T%d splits %d (%s)%s", name.c_str(), p.key().c_str(),
                plan.config.c_str(), dc.c.opt.num_tokens, plan.num_splits, splits ? "forced" : "planned",
                with_lse ? "" : " lse null");
  res.head = head;
  std::printf("%s %s %s\n", head, res.line.c_str(), res.ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return res;
}

// Each kernel of the matrix once (a config and cache format, at its first combo), with a small case of its own (up
// to 8 tokens; with all_skip, one token whose entries are all -1): fn(combo, case, reference, config or null).
// Returns how many kernels it ran.
template <class Fn>
int for_each_matrix_kernel(Runtime& rt, test::MlaRng& rng, bool all_skip, Fn&& fn) {
  std::set<std::string> seen;
  int kernels = 0;
  for (const Combo& cb : all_combos()) {
    const std::string cfg_key = cb.config.empty() ? default_config(cb.p, rt.current_arch()).key() : cb.config;
    if (!seen.insert(cfg_key + (cb.p.kv_format == KvFormat::Bf16 ? " bf16" : " fp8")).second) continue;
    ++kernels;
    test::MlaCaseOptions o;
    o.seed = rng.next();
    o.num_tokens = cb.num_tokens > 0 ? std::min(cb.num_tokens, 8) : 3;
    if (all_skip) o.all_skip_token = rng.range(0, o.num_tokens - 1);
    o.sinks = cb.sinks;
    DevCase dc(test::make_mla_case(cb.p, o));
    const test::MlaRef ref = test::mla_reference(dc.c);
    fn(cb, dc, ref, cb.config.empty() ? nullptr : cb.config.c_str());
  }
  return kernels;
}

}  // namespace

TEST_CASE("sparse_mla_decode kernels of the GPU tests compile into the cache", "[.][mla_precompile]") {
  const char* a = std::getenv("KTUNE_MLA_ARCH");
  const Arch arch = Arch::parse(a ? a : "sm_90a");
  int compiled = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  precompile_all(test_runtime(), arch, &compiled, &failed);
  std::printf("mla precompile for %s: %d compiled, %d failed, %.1f s\n", arch.str().c_str(), compiled, failed,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  CHECK(failed == 0);
}

TEST_CASE("sparse_mla_decode matches the fp64 reference over its GPU matrix", "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const uint64_t seed = test::run_seed("sparse_mla gpu matrix");
  INFO("seed " << seed);
  const auto t0 = std::chrono::steady_clock::now();
  {
    int compiled = 0, failed = 0;
    precompile_all(rt, rt.current_arch(), &compiled, &failed);
    std::printf("sparse_mla gpu matrix: kernels ready (%d compiled here, %d failed)\n", compiled, failed);
    CHECK(failed == 0);
  }
  test::MlaRng rng(seed);
  int runs = 0, passed = 0;
  double worst = 0, worst_lse = 0;
  std::vector<std::string> failures;
  size_t case_index = 0;
  for (const Combo& cb : all_combos()) {
    test::MlaCaseOptions o;
    o.seed = rng.next();
    o.num_tokens = cb.num_tokens > 0 ? cb.num_tokens : rng.range(3, 6);
    o.all_skip_token = rng.range(0, o.num_tokens - 1);
    o.skip_fraction = rng.uniform() < 0.5 ? 0.1 : 0.5;
    o.sinks = cb.sinks;
    const int forced = rng.range(2, 9);
    // (the case's data is drawn first: a shard's or a match's cases get the full run's data)
    const std::string cfg_key = cb.config.empty() ? default_config(cb.p, rt.current_arch()).key() : cb.config;
    if (!test::in_test_shard(case_index++) || !test::in_test_match(cb.name, cfg_key)) continue;
    DevCase dc(test::make_mla_case(cb.p, o));
    const test::MlaRef ref = test::mla_reference(dc.c);
    const char* cfg = cb.config.empty() ? nullptr : cb.config.c_str();
    for (int mode = 0; mode < 2; ++mode) {
      const RunOutcome res = run_case(rt, cb.name, cb.p, cfg, mode == 0 ? 0 : forced, dc, ref);
      ++runs;
      worst_lse = std::max(worst_lse, res.r.lse_max_ratio);
      if (res.ok) {
        ++passed;
        worst = std::max(worst, res.r.rel_l2);
      } else {
        failures.push_back(res.head + " " + res.line);
      }
    }
  }
  std::printf("SPARSE MLA GPU MATRIX: %d/%d runs passed, worst rel error %.2e, worst lse %.2f of its bound, %.1f s, "
              "seed %llu\n",
              passed, runs, worst, worst_lse,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              (unsigned long long)seed);
  for (const std::string& f : failures) UNSCOPED_INFO("FAILED: " << f);
  CHECK(failures.empty());
}

// Every config of the sm_90a search space (sweep_combos) against the matrix's reference. Each problem gets two
// cases, with sinks and an all -1 token, and without; each config runs planned splits on one and forced splits on
// the other, alternating, so that every config sees both.
TEST_CASE("sparse_mla_decode matches the fp64 reference on every sm_90a config of a bf16 and an fp8 problem",
          "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const uint64_t seed = test::run_seed("sparse_mla config sweep");
  INFO("seed " << seed);
  const auto t0 = std::chrono::steady_clock::now();
  test::MlaRng rng(seed);
  const std::vector<Combo> combos = sweep_combos();
  std::string problem_key;
  std::unique_ptr<DevCase> cases[2];
  test::MlaRef refs[2];
  int runs = 0, passed = 0;
  size_t index = 0;
  std::vector<std::string> failures;
  for (const Combo& cb : combos) {
    if (cb.p.key() != problem_key) {  // a new problem: fresh data and its reference
      problem_key = cb.p.key();
      for (int k = 0; k < 2; ++k) {
        test::MlaCaseOptions o;
        o.seed = rng.next();
        o.num_tokens = cb.num_tokens;
        o.all_skip_token = k == 0 ? rng.range(0, o.num_tokens - 1) : -1;
        o.skip_fraction = rng.uniform() < 0.5 ? 0.1 : 0.5;
        o.sinks = k == 0;
        cases[k] = std::make_unique<DevCase>(test::make_mla_case(cb.p, o));
        refs[k] = test::mla_reference(cases[k]->c);
      }
    }
    const int forced = rng.range(2, 9);
    const size_t i = index++;
    if (!test::in_test_shard(i) || !test::in_test_match(cb.name, cb.config)) continue;
    for (int mode = 0; mode < 2; ++mode) {
      const int k = (mode + int(i)) % 2;
      const RunOutcome res = run_case(rt, cb.name, cb.p, cb.config.c_str(), mode == 0 ? 0 : forced, *cases[k], refs[k]);
      ++runs;
      if (res.ok) ++passed;
      else failures.push_back(res.head + " " + res.line);
    }
  }
  std::printf("SPARSE MLA CONFIG SWEEP: %d/%d runs passed (%zu configs), %.1f s, seed %llu\n", passed, runs,
              combos.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              (unsigned long long)seed);
  for (const std::string& f : failures) UNSCOPED_INFO("FAILED: " << f);
  CHECK(failures.empty());
  CHECK(runs > 0);  // a KTUNE_TEST_MATCH or shard that selects nothing is not a pass
}

// lse may be null (not written): every kernel of the matrix (one case per config and cache format, planned and
// forced splits: the split path writes the LSE in the combine) gives the same out, bit for bit, with and without
// it, and the run with it matches the reference.
TEST_CASE("sparse_mla_decode with a null lse writes the same out, bit for bit", "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const uint64_t seed = test::run_seed("sparse_mla null lse");
  INFO("seed " << seed);
  test::MlaRng rng(seed);
  std::vector<std::string> failures;
  const int kernels = for_each_matrix_kernel(rt, rng, true, [&](const Combo& cb, DevCase& dc, const test::MlaRef& ref,
                                                                const char* cfg) {
    for (int splits : {0, rng.range(2, 9)}) {
      const RunOutcome with = run_case(rt, cb.name, cb.p, cfg, splits, dc, ref);
      const std::vector<uint16_t> want = dc.out->download<uint16_t>(dc.out_elems);
      const RunOutcome without = run_case(rt, cb.name, cb.p, cfg, splits, dc, ref, false);
      const bool same = dc.out->download<uint16_t>(dc.out_elems) == want;
      if (!with.ok) failures.push_back(with.head + " " + with.line);
      if (!without.ok || !same)
        failures.push_back(without.head + " " + without.line + (same ? "" : ", out differs from the run with lse"));
    }
  });
  std::printf("sparse_mla null lse: %d kernels, %zu failures\n", kernels, failures.size());
  for (const std::string& f : failures) UNSCOPED_INFO("FAILED: " << f);
  CHECK(failures.empty());
  CHECK(kernels > 0);
}

// `out` needs only 4-byte alignment (docs/sparse_mla_decode.md): the decode kernels store a 16-byte aligned row
// 16 bytes at a time and any other 4 bytes at a time, and the combine 4 bytes at a time. Every kernel of the matrix,
// one split and a forced split count, writes an out 4 bytes past a 16-byte boundary bit for bit as it writes an
// aligned one, and nothing outside it (NaN guards on both sides).
TEST_CASE("sparse_mla_decode writes an out that is 4-byte but not 16-byte aligned bit for bit the same",
          "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const uint64_t seed = test::run_seed("sparse_mla out alignment");
  INFO("seed " << seed);
  test::MlaRng rng(seed);
  std::vector<std::string> failures;
  constexpr size_t kGuard = 2;  // bf16 elements before the shifted out: 4 bytes
  const int kernels = for_each_matrix_kernel(rt, rng, false, [&](const Combo& cb, DevCase& dc, const test::MlaRef& ref,
                                                                 const char* cfg) {
    test::DeviceBuffer shifted((dc.out_elems + 2 * kGuard + 8) * 2);
    for (int splits : {1, rng.range(2, 9)}) {
      const RunOutcome aligned = run_case(rt, cb.name, cb.p, cfg, splits, dc, ref);
      if (!aligned.ok) failures.push_back(aligned.head + " " + aligned.line);
      const std::vector<uint16_t> want = dc.out->download<uint16_t>(dc.out_elems);
      std::string why;
      try {
        shifted.poison(0xFF);
        SparseMlaDecodeArgs a = dc.args();
        a.out = shifted.as<uint16_t>() + kGuard;
        a.config = cfg;
        a.num_splits = splits;
        sparse_mla_decode(rt, cb.p, a, nullptr);
        test::sync();
        const std::vector<uint16_t> got = shifted.download<uint16_t>(shifted.bytes() / 2);
        if (!std::equal(want.begin(), want.end(), got.begin() + kGuard))
          why = "out differs from the aligned run's";
        else if (!std::all_of(got.begin(), got.begin() + kGuard, [](uint16_t v) { return v == 0xFFFF; }) ||
                 !std::all_of(got.begin() + kGuard + dc.out_elems, got.end(), [](uint16_t v) { return v == 0xFFFF; }))
          why = "a write outside out";
      } catch (const std::exception& e) {
        why = std::string("threw: ") + e.what();
      }
      std::printf("out at +4 bytes %s %s\n", aligned.head.c_str(), why.empty() ? "PASS" : why.c_str());
      if (!why.empty()) failures.push_back(aligned.head + " out at +4 bytes: " + why);
    }
  });
  std::printf("sparse_mla out alignment: %d kernels, %zu failures\n", kernels, failures.size());
  for (const std::string& f : failures) UNSCOPED_INFO("FAILED: " << f);
  CHECK(failures.empty());
  CHECK(kernels > 0);
}

// q read through token and head strides (a wider NaN-filled buffer: padded heads and rows) by every kernel of
// the matrix: both the mma.sync and the warp-specialized templates share issue_q_tile.
TEST_CASE("sparse_mla_decode reads q through token and head strides", "[gpu][sparse_mla][forms]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const uint64_t seed = test::run_seed("sparse_mla strided q");
  test::MlaRng rng(seed);
  std::vector<std::string> failures;
  for (const Combo& cb : all_combos()) {
    test::MlaCaseOptions o;
    o.seed = rng.next();
    o.num_tokens = cb.num_tokens > 0 ? cb.num_tokens : rng.range(3, 6);
    o.sinks = cb.sinks;
    DevCase dc(test::make_mla_case(cb.p, o));
    const Problem& p = cb.p;
    const int64_t row = p.kv_lora_rank + p.rope_dim, sh = row + 8, st = (p.num_heads + 1) * sh;
    std::vector<uint16_t> wide(size_t(o.num_tokens * st), 0x7FC0);
    for (int64_t t = 0; t < o.num_tokens; ++t)
      for (int64_t h = 0; h < p.num_heads; ++h)
        std::memcpy(wide.data() + t * st + h * sh, dc.c.q.data() + (t * p.num_heads + h) * row, row * 2);
    test::DeviceBuffer q(wide.size() * 2);
    q.upload(wide);
    const test::MlaRef ref = test::mla_reference(dc.c);
    const char* cfg = cb.config.empty() ? nullptr : cb.config.c_str();
    std::string line;
    bool ok = false;
    try {
      dc.ensure_workspace(sparse_mla_decode_plan(rt, p, o.num_tokens, cfg, 0).workspace_bytes);
      dc.poison();
      SparseMlaDecodeArgs a = dc.args();
      a.q = q.as<void>();
      a.q_stride_token = st;
      a.q_stride_head = sh;
      a.config = cfg;
      sparse_mla_decode(rt, p, a, nullptr);
      test::sync();
      ok = passes(dc.compare(ref), &line);
    } catch (const std::exception& e) {
      line = std::string("threw: ") + e.what();
    }
    std::printf("strided q %-28s %-40s %s %s\n", cb.name.c_str(), p.key().c_str(), line.c_str(), ok ? "PASS" : "FAIL");
    if (!ok) failures.push_back(cb.name + " " + line);
  }
  for (const std::string& f : failures) UNSCOPED_INFO("FAILED: " << f);
  CHECK(failures.empty());
}

TEST_CASE("checked sparse_mla_decode reports an out-of-range slot and skips it", "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  for (const Problem& p : kCheckedProblems) {
    INFO(p.key() << " " << default_config(p, rt.current_arch()).key());
    test::MlaCaseOptions o;
    o.seed = test::run_seed(("sparse_mla checked " + p.key()).c_str());
    o.num_tokens = 3;
    o.all_skip_token = -1;
    DevCase dc(test::make_mla_case(p, o));
    const int64_t slots = dc.c.num_pages * p.page_size;
    dc.c.indices[1 * p.topk + 17] = static_cast<int32_t>(slots + 5);  // past the cache
    dc.c.indices[2 * p.topk + 3] = -7;                                // negative, not -1
    dc.idx->upload(dc.c.indices);
    const test::MlaRef ref = test::mla_reference(dc.c);  // skips both
    (void)rt.take_device_fault();
    dc.ensure_workspace(sparse_mla_decode_workspace_bytes(rt, p, o.num_tokens));
    dc.poison();
    sparse_mla_decode(rt, p, dc.args(), nullptr);
    test::sync();
    const auto fault = rt.take_device_fault();
    REQUIRE(fault.has_value());
    INFO(fault->message());
    CHECK(fault->what == "top-k index");
    CHECK(((fault->where == 1 && fault->value == slots + 5) || (fault->where == 2 && fault->value == -7)));
    CHECK(fault->limit == slots);
    std::string line;
    const bool ok = passes(dc.compare(ref), &line);
    INFO(line);
    CHECK(ok);
    CHECK_FALSE(rt.take_device_fault().has_value());
  }
}

TEST_CASE("a second sparse_mla_decode launch of the same key compiles and loads nothing", "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = test_runtime();
  const Problem p = make_problem(64, 512, 64, KvFormat::Fp8DsMla);
  test::MlaCaseOptions o;
  o.seed = test::run_seed("sparse_mla second launch");
  DevCase dc(test::make_mla_case(p, o));
  dc.ensure_workspace(sparse_mla_decode_workspace_bytes(rt, p, o.num_tokens));
  sparse_mla_decode(rt, p, dc.args(), nullptr);
  test::sync();
  const RuntimeStats s1 = rt.stats();
  sparse_mla_decode(rt, p, dc.args(), nullptr);
  test::sync();
  const RuntimeStats s2 = rt.stats();
  CHECK(s2.compiles == s1.compiles);
  CHECK(s2.loads == s1.loads);
  CHECK(s2.memory_hits == s1.memory_hits);  // the op's plan holds the module: no module-table lookup at all
}

// An engine that skipped warmup: its first call finds nothing in the cache, so it compiles the config's module
// and, on a thread of its own, the problem's shared module (the split-KV combine), loads both and launches. The
// output must be right on that first call, and a runtime that may not compile finds both binaries in the file
// and writes the same bits. 128 heads: the paired kernel, the family's longest compile.
TEST_CASE("a sparse_mla_decode cold first call compiles its config and shared modules and launches correctly",
          "[gpu][sparse_mla]") {
  KTUNE_REQUIRE_GPU();
  test::TempDir dir;
  Runtime rt(test::on_cache_file(dir.file("cold.db")));  // no layer from the environment holds these binaries
  const Problem p = make_problem(128, 512, 64, KvFormat::Fp8DsMla);
  test::MlaCaseOptions o;
  o.seed = test::run_seed("sparse_mla cold first call");
  o.num_tokens = 5;
  DevCase dc(test::make_mla_case(p, o));
  const test::MlaRef ref = test::mla_reference(dc.c);
  const int splits = 3;  // the combine runs, from the shared module
  REQUIRE(rt.stats().compiles == 0);
  const RunOutcome first = run_case(rt, "cold first call", p, nullptr, splits, dc, ref);
  INFO(first.head << " " << first.line);
  CHECK(first.ok);
  const std::vector<uint16_t> want = dc.out->download<uint16_t>(dc.out_elems);
  const RuntimeStats s1 = rt.stats();
  CHECK(s1.compiles == 2);  // the config's module and the shared one
  CHECK(s1.loads == 2);
  CHECK(s1.store_failures == 0);  // both binaries are in the file for the next process
  CHECK(run_case(rt, "second call", p, nullptr, splits, dc, ref).ok);
  CHECK(rt.stats().compiles == s1.compiles);
  CHECK(rt.stats().loads == s1.loads);

  Runtime from_file(test::on_cache_file(dir.file("cold.db"), false));  // a miss would be an error
  CHECK(run_case(from_file, "from the file", p, nullptr, splits, dc, ref).ok);
  CHECK(dc.out->download<uint16_t>(dc.out_elems) == want);
  CHECK(from_file.stats().compiles == 0);
  CHECK(from_file.stats().cache_hits == 2);
}

// The GPU half of the host-backend oracle (tests/support/family_oracle.hpp): records this kernel's outputs of
// the fixed oracle cases for `[host][oracle]`. KTUNE_ORACLE_OUT=path (bench/run_h200.sh sanitize style).
TEST_CASE("sparse_mla_decode outputs for the host-backend oracle", "[.][mla_oracle_dump]") {
  KTUNE_REQUIRE_GPU();
  const char* path = std::getenv("KTUNE_ORACLE_OUT");
  REQUIRE(path != nullptr);
  Runtime& rt = test_runtime();
  test::OracleFile file;
  const char* header = std::getenv("KTUNE_ORACLE_HEADER");
  file.header = header ? header : "sparse_mla_decode GPU outputs";
  const uint64_t base = test::run_seed("sparse_mla oracle dump");
  uint64_t i = 0;
  for (const test::MlaOracleCase& oc : test::mla_oracle_cases()) {
    const uint64_t seed = base + 1000 * (++i);
    DevCase dc(test::make_mla_oracle_case(oc, seed));
    const SparseMlaDecodePlan plan = sparse_mla_decode_plan(rt, oc.problem, oc.options.num_tokens);
    dc.ensure_workspace(plan.workspace_bytes);
    dc.poison();
    sparse_mla_decode(rt, oc.problem, dc.args(), nullptr);
    test::sync();
    std::string line;
    const bool ok = passes(dc.compare(test::mla_reference(dc.c)), &line);
    INFO(oc.name << ": " << line);
    CHECK(ok);
    test::OracleRecord rec;
    rec.name = oc.name;
    rec.problem_key = oc.problem.key();
    rec.config = plan.config;
    rec.seed = seed;
    rec.input_digest = test::mla_input_digest(dc.c);
    rec.out = dc.out->download<unsigned char>(dc.out_elems * 2);
    rec.lse = dc.lse->download<float>(dc.rows);
    std::printf("  %-28s %-40s %s splits %d: %s\n", oc.name.c_str(), rec.problem_key.c_str(), plan.config.c_str(),
                plan.num_splits, line.c_str());
    file.records.push_back(std::move(rec));
  }
  test::write_oracle_file(path, file);
  std::printf("oracle: %zu GPU outputs written to %s\n", file.records.size(), path);
}
