// CPU tests of the xqa_decode host spec, the shared numerics and the CPU reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/mask.cuh"
#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "random_inputs.hpp"
#include "xqa_decode/shape.h"
#include "host_pipeline.hpp"
#include "xqa_decode/spec.hpp"
#include "xqa_reference.hpp"

using namespace ktune::xqa;
namespace kc = ::ktune_common;

namespace {

Problem base_problem() {
  Problem p;
  p.head_dim = 128;
  p.num_q_heads = 32;
  p.num_kv_heads = 8;
  p.page_size = 32;
  p.max_q_len = 4;
  p.mask = MaskKind::Causal;
  return p;
}

std::string validation_error(const Problem& p) {
  try {
    p.validate();
  } catch (const ktune::Error& e) {
    CHECK(e.status() == ktune::Status::invalid_argument);
    return e.what();
  }
  return "";
}

const std::vector<ktune::Arch>& arches() {
  static const std::vector<ktune::Arch> a = {{8, 0, 0}, {8, 9, 0}, {9, 0, 'a'}, {10, 0, 'a'}, {12, 0, 'a'}};
  return a;
}

}  // namespace

TEST_CASE("xqa validation errors name the field", "[xqa]") {
  Problem p = base_problem();
  REQUIRE(validation_error(p).empty());
  struct Case {
    void (*mutate)(Problem&);
    const char* field;
    const char* detail;
  } cases[] = {
      {[](Problem& q) { q.head_dim = 96; }, "head_dim", "got 96"},
      {[](Problem& q) { q.num_q_heads = 30; }, "num_q_heads", "multiple of num_kv_heads"},
      {[](Problem& q) { q.num_q_heads = 17 * 8; }, "num_q_heads", "1..16"},
      {[](Problem& q) { q.num_kv_heads = 0; }, "num_kv_heads", "got 0"},
      {[](Problem& q) { q.page_size = 48; }, "page_size", "got 48"},
      {[](Problem& q) { q.kv_dtype = kc::kF32; }, "kv_dtype", "f32"},
      {[](Problem& q) { q.out_dtype = kc::kF32; }, "out_dtype", "f32"},
      {[](Problem& q) { q.q_dtype = kc::kFP16; }, "q_dtype", "bf16"},
      {[](Problem& q) { q.q_dtype = kc::kE4M3; }, "q_dtype", "e4m3"},
      {[](Problem& q) { q.max_q_len = 65; }, "max_q_len", "expected 1..64, got 65"},
      {[](Problem& q) { q.max_q_len = 0; }, "max_q_len", "got 0"},
      {[](Problem& q) { q.mask = MaskKind::None; }, "mask", "max_q_len 1"},
  };
  for (const Case& c : cases) {
    Problem q = base_problem();
    c.mutate(q);
    const std::string msg = validation_error(q);
    INFO(msg);
    CHECK(msg.find("xqa_decode") != std::string::npos);
    CHECK(msg.find(std::string(c.field) + ":") != std::string::npos);
    CHECK(msg.find(c.detail) != std::string::npos);
  }
  // valid edge cases
  Problem mqa = base_problem();
  mqa.num_kv_heads = 1;
  mqa.num_q_heads = 16;
  CHECK(validation_error(mqa).empty());
  Problem fp8 = base_problem();
  fp8.kv_dtype = kc::kE4M3;  // bf16 Q with e4m3 KV
  fp8.out_dtype = kc::kE4M3;
  CHECK(validation_error(fp8).empty());
  Problem tree = base_problem();  // EAGLE-style draft trees: up to 64 query tokens
  tree.max_q_len = 64;
  tree.mask = MaskKind::Explicit;
  CHECK(validation_error(tree).empty());
  CHECK(tree.key() == "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q64.mask");
  CHECK(Problem::from_key(tree.key()) == tree);
  CHECK_THROWS_AS(Problem::from_key("d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q65.mask"), ktune::Error);
}

TEST_CASE("xqa problem and config keys round trip", "[xqa]") {
  Problem p = base_problem();
  CHECK(p.key() == "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal");
  p.has_sinks = p.sliding_window = true;
  CHECK(p.key() == "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.sink.win");
  p.softcap = p.write_lse = true;
  p.layout = Layout::Nhd;
  p.kv_dtype = kc::kE4M3;
  p.mask = MaskKind::Explicit;
  const std::string k = p.key();
  CHECK(k == "d128.h32.kv8.p32.nhd.bf16-e4m3-bf16.q4.mask.sink.win.cap.lse");
  CHECK(Problem::from_key(k) == p);
  CHECK(Problem::from_key(k).key() == k);
  p.checked = true;
  CHECK(p.key() == k + ".chk");
  CHECK(Problem::from_key(k + ".chk").checked);
  CHECK_THROWS_AS(Problem::from_key("d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.chk.sink"), ktune::Error);

  for (const char* bad : {"", "garbage", "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4", "d128.h32.kv8.p32.xyz.bf16-bf16-bf16.q4.causal",
                          "d128.h32.kv8.p32.hnd.bf16-bf16.q4.causal", "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.win.sink",
                          "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.sink.sink", "d0128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal",
                          "d96.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal", "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.extra"}) {
    INFO(bad);
    CHECK_THROWS_AS(Problem::from_key(bad), ktune::Error);
  }
  try {
    Problem::from_key("d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.bogus");
  } catch (const ktune::Error& e) {
    CHECK(std::string(e.what()).find("bogus") != std::string::npos);
  }

  const Config c{64, 3, 4, 0};
  CHECK(c.key() == "t64.s3.w4");
  CHECK(Config::from_key("t64.s3.w4") == c);
  CHECK(Config::from_key("t32.s2.w8.m4") == Config{32, 2, 8, 4});
  for (const char* bad : {"t64.s3", "t64.s3.w4.m0", "x64.s3.w4", "t64.s3.w4.m2.z", "t-1.s3.w4"}) {
    INFO(bad);
    CHECK_THROWS_AS(Config::from_key(bad), ktune::Error);
  }
}

TEST_CASE("xqa distinct problems give distinct keys", "[xqa]") {
  std::set<std::string> keys;
  int n = 0;
  for (int d : {64, 128, 256})
    for (int g : {1, 4, 16})
      for (int ps : {16, 128})
        for (Layout l : {Layout::Hnd, Layout::Nhd})
          for (DType kv : {kc::kBF16, kc::kE4M3})
            for (int ql : {1, 2})
              for (MaskKind m : {MaskKind::Causal, MaskKind::Explicit})
                for (int flags = 0; flags < 16; flags += 5) {
                  Problem p;
                  p.head_dim = d;
                  p.num_kv_heads = 2;
                  p.num_q_heads = 2 * g;
                  p.page_size = ps;
                  p.layout = l;
                  p.kv_dtype = kv;
                  p.max_q_len = ql;
                  p.mask = m;
                  p.has_sinks = flags & 1;
                  p.sliding_window = flags & 2;
                  p.softcap = flags & 4;
                  p.write_lse = flags & 8;
                  keys.insert(p.key());
                  ++n;
                  REQUIRE(Problem::from_key(p.key()) == p);
                }
  CHECK((int)keys.size() == n);
}

TEST_CASE("xqa default config can implement a broad matrix on every arch", "[xqa]") {
  int checked = 0;
  for (const ktune::Arch& arch : arches()) {
    const ktune::DeviceLimits lim = default_limits(arch);
    for (int d : {64, 128, 256})
      for (int g : {1, 2, 5, 8, 12, 16})
        for (int ps : {16, 32, 128})
          for (DType kv : {kc::kBF16, kc::kFP16, kc::kE4M3})
            for (int ql : {1, 2, 3, 4, 7, 16})
              for (MaskKind m : {MaskKind::Causal, MaskKind::Explicit}) {
                Problem p;
                p.head_dim = d;
                p.num_kv_heads = 4;
                p.num_q_heads = 4 * g;
                p.page_size = ps;
                p.layout = (g + ps) % 2 ? Layout::Nhd : Layout::Hnd;
                p.kv_dtype = kv;
                p.q_dtype = kv == kc::kE4M3 ? kc::kBF16 : kv;
                p.out_dtype = p.q_dtype;
                p.max_q_len = ql;
                p.mask = m;
                p.has_sinks = p.sliding_window = (d == 128);
                const Config c = default_config(p, arch);
                const std::string why = can_implement(p, c, arch, lim);
                INFO(p.key() << " " << c.key() << " sm_" << arch.sm() << ": " << why);
                REQUIRE(why.empty());
                REQUIRE(ctas_per_sm(p, c, lim) >= 1);
                ++checked;
              }
  }
  CHECK(checked == 5 * 3 * 6 * 3 * 3 * 6 * 2);
  // search spaces hold only implementable configs, the default among them
  const Problem p = base_problem();
  const auto space = search_space(p, {9, 0, 'a'});
  CHECK(space.size() >= 4);
  for (const Config& c : space) CHECK(can_implement(p, c, {9, 0, 'a'}, default_limits({9, 0, 'a'})).empty());
}

TEST_CASE("xqa q_len 17..64: a default config and a pruned search space on every arch", "[xqa]") {
  int checked = 0;
  for (const ktune::Arch& arch : arches()) {
    const ktune::DeviceLimits lim = default_limits(arch);
    for (int d : {64, 128, 256})
      for (int g : {1, 3, 8, 16})
        for (DType kv : {kc::kBF16, kc::kFP16, kc::kE4M3})
          for (int ql : {17, 32, 33, 64})
            for (MaskKind m : {MaskKind::Causal, MaskKind::Explicit}) {
              Problem p;
              p.head_dim = d;
              p.num_kv_heads = 8;
              p.num_q_heads = 8 * g;
              p.page_size = (g + ql) % 2 ? 16 : 64;
              p.layout = (g + ql) % 3 ? Layout::Hnd : Layout::Nhd;
              p.kv_dtype = kv;
              p.q_dtype = kv == kc::kE4M3 ? kc::kBF16 : kv;
              p.out_dtype = p.q_dtype;
              p.max_q_len = ql;
              p.mask = m;
              p.has_sinks = p.sliding_window = (g == 8);
              const Config c = default_config(p, arch);
              INFO(p.key() << " " << c.key() << " sm_" << arch.sm());
              REQUIRE(can_implement(p, c, arch, lim).empty());
              REQUIRE(ctas_per_sm(p, c, lim) >= 1);
              if (arch.sm() == 90) {  // the tuner's candidates: every one implementable, the default first
                const std::vector<Config> space = search_space(p, arch);
                REQUIRE(!space.empty());
                for (const Config& sc : space) REQUIRE(can_implement(p, sc, arch, lim).empty());
                CHECK(std::find(space.begin(), space.end(), c) != space.end());
              }
              ++checked;
            }
  }
  CHECK(checked == 5 * 3 * 4 * 3 * 4 * 2);
  // 1024 rows per kv head (q64 x group 16) on 1024 kv heads: configs whose row groups overflow grid.y are
  // refused with the reason, and the default is not one of them
  Problem wide = base_problem();
  wide.max_q_len = 64;
  wide.num_kv_heads = 1024;
  wide.num_q_heads = 16 * 1024;
  const ktune::Arch h{9, 0, 'a'};
  CHECK(can_implement(wide, Config{32, 3, 2, 1}, h, default_limits(h)).find("grid.y") != std::string::npos);
  const Config wd = default_config(wide, h);
  CHECK(can_implement(wide, wd, h, default_limits(h)).empty());
  CHECK(decode_dims(wide, wd, 1, 1).grid[1] <= 65535u);
}

TEST_CASE("xqa can_implement explains rejections", "[xqa]") {
  const Problem p = base_problem();
  const ktune::Arch h{9, 0, 'a'};
  ktune::DeviceLimits small = default_limits(h);
  small.max_smem_per_block_optin = 16 * 1024;
  CHECK(can_implement(p, {64, 3, 4, 0}, h, small).find("shared memory") != std::string::npos);
  CHECK(can_implement(p, {48, 3, 4, 0}, h, default_limits(h)).find("tokens_per_tile") != std::string::npos);
  CHECK(can_implement(p, {64, 1, 4, 0}, h, default_limits(h)).find("stages") != std::string::npos);
  CHECK(!can_implement(p, {32, 3, 4, 0}, h, default_limits(h)).empty());  // 8 tokens per token-warp
  CHECK(can_implement(p, {64, 3, 4, 0}, ktune::Arch{7, 5, 0}, default_limits(h)).find("sm_80") != std::string::npos);
  ktune::Arch host;
  host.host = true;
  CHECK(!can_implement(p, {64, 3, 4, 0}, host, default_limits(h)).empty());
}

TEST_CASE("xqa wgmma configs (.wg): key, arch and shape rules, search space", "[xqa]") {
  Config wg{32, 2, 4, 0};
  wg.wgmma = true;
  CHECK(wg.key() == "t32.s2.w4.wg");
  CHECK(Config::from_key("t32.s2.w4.wg") == wg);
  CHECK(!(Config::from_key("t32.s2.w4") == wg));
  Config wg4 = wg;
  wg4.m_tiles_per_cta = 4;
  CHECK(Config::from_key("t32.s2.w4.m4.wg") == wg4);
  for (const char* bad : {"t32.s2.w4.wg.m4", "t32.s2.w4.gw", "t32.s2.wg", "t32.s2.w4.wg.wg"}) {
    INFO(bad);
    CHECK_THROWS_AS(Config::from_key(bad), ktune::Error);
  }

  Problem q16 = base_problem();  // 32 q heads / 8 kv heads: q16 x group 4 = 64 rows a kv head
  q16.max_q_len = 16;
  const ktune::Arch h{9, 0, 'a'}, a80{8, 0, 0}, b100{10, 0, 'a'};
  const auto why = [](const Problem& p, const Config& c, const ktune::Arch& a) {
    return can_implement(p, c, a, default_limits(a));
  };
  CHECK(why(q16, wg, h).empty());
  CHECK(why(q16, wg, a80).find("sm_90a") != std::string::npos);
  CHECK(why(q16, wg, b100).find("sm_90a") != std::string::npos);
  Config wg_w2 = wg;
  wg_w2.warps = 2;
  CHECK(why(q16, wg_w2, h).find("4 warps") != std::string::npos);
  Config wg_t128 = wg;  // .wg tiles are 32 or 64 tokens, the sizes its search space times
  wg_t128.tokens_per_tile = 128;
  CHECK(why(q16, wg_t128, h).find("tokens_per_tile 32 or 64") != std::string::npos);
  Problem fp8 = q16;
  fp8.kv_dtype = kc::kE4M3;
  CHECK(why(fp8, wg, h).find("16-bit KV") != std::string::npos);
  Problem q8 = base_problem();  // 32 rows
  q8.max_q_len = 8;
  CHECK(why(q8, wg, h).find("query rows a CTA") != std::string::npos);
  Problem d256 = q16;
  d256.head_dim = 256;
  CHECK(why(d256, wg, h).find("head_dim") != std::string::npos);
  Problem rows128 = q16;  // q16 x group 8
  rows128.num_q_heads = 64;
  CHECK(why(rows128, wg, h).find("warpgroup per 64 rows") != std::string::npos);  // 4 warps for 128 rows
  CHECK(why(rows128, wg4, h).empty());
  Config wg8 = wg;  // two warpgroups sharing each K/V tile
  wg8.warps = 8;
  CHECK(why(rows128, wg8, h).empty());
  CHECK(why(q16, wg8, h).find("warpgroup per 64 rows") != std::string::npos);
  CHECK(decode_dims(rows128, wg8, 3, 1).grid[1] == 8u);
  CHECK(decode_dims(rows128, wg8, 3, 1).block[0] == 256u);
  CHECK(decode_dims(rows128, wg4, 3, 1).grid[1] == 8u * 2);
  CHECK(decode_dims(rows128, wg4, 3, 1).block[0] == 128u);

  // The operand regions wgmma reads start on 1024-byte swizzle atoms.
  for (const Config& c : search_space(rows128, h)) {
    if (!c.wgmma) continue;
    const ktune_xqa::Shape s = ktune_xqa::make_shape(128, 8, 16, 32, int(kc::kBF16), c.tokens_per_tile, c.stages,
                                                     c.warps, c.m_tiles_per_cta, true);
    INFO(c.key());
    CHECK(s.off_q % 1024 == 0);
    CHECK(s.smem_stage % 1024 == 0);
    CHECK(!s.q_in_regs);
  }
  const auto count_wg = [](const std::vector<Config>& v) {
    return std::count_if(v.begin(), v.end(), [](const Config& c) { return c.wgmma; });
  };
  CHECK(count_wg(search_space(q16, h)) == 6);
  CHECK(count_wg(search_space(rows128, h)) == 12);
  CHECK(count_wg(search_space(q16, a80)) == 0);
  CHECK(count_wg(search_space(q8, h)) == 0);
  CHECK(count_wg(search_space(fp8, h)) == 0);
  CHECK(generate(q16, wg, h).source.find("kWgmma = true") != std::string::npos);
  CHECK(generate(q16, Config{32, 2, 2, 0}, h).source.find("kWgmma = false") != std::string::npos);
}

TEST_CASE("xqa generated source carries the constants", "[xqa]") {
  Problem p = base_problem();
  p.kv_dtype = kc::kE4M3;
  p.has_sinks = true;
  p.layout = Layout::Nhd;
  const Config c{64, 3, 2, 0};
  const ktune::GeneratedKernel k = generate(p, c, {9, 0, 'a'});
  CHECK(k.family == "xqa_decode");
  CHECK(k.problem_key == p.key());
  CHECK(k.config_key == "t64.s3.w2");
  for (const char* s : {"#include \"xqa_decode/kernel.cuh\"", "struct Spec", "kHeadDim = 128", "kNumKvHeads = 8",
                        "kGroupSize = 4", "kPageSize = 32", "kLayoutHND = false", "kKVType = 2", "kQType = 0",
                        "kMaxQLen = 4", "kMask = 1", "kSinks = true", "kSlidingWindow = false", "kTokensPerTile = 64",
                        "kStages = 3", "kWarps = 2", "kMTilesPerCta = 0"}) {
    INFO(s);
    CHECK(k.source.find(s) != std::string::npos);
  }
  CHECK(k.source.find("DISPATCH") == std::string::npos);
  // the combine and the helpers are in the problem's shared module (below; test_xqa_helpers.cpp)
  CHECK(k.entry_points == std::vector<std::string>{"ktune_xqa::decode_kernel<ktune_xqa::Spec>"});
  CHECK(k.options == std::vector<std::string>{"-std=c++17"});
  CHECK_THROWS_AS(generate(p, Config{64, 1, 4, 0}, {9, 0, 'a'}), ktune::Error);
  // The checked variant is a different translation unit (so a different binary key), unchecked by default.
  CHECK(k.source.find("kChecked = false") != std::string::npos);
  Problem pc = p;
  pc.checked = true;
  const ktune::GeneratedKernel kc_ = generate(pc, c, {9, 0, 'a'});
  CHECK(kc_.source.find("kChecked = true") != std::string::npos);
  CHECK(kc_.problem_key == p.key() + ".chk");
}

TEST_CASE("xqa launch planning", "[xqa]") {
  const ktune::Arch h{9, 0, 'a'};
  const ktune::DeviceLimits lim = default_limits(h);
  Problem p = base_problem();
  p.max_q_len = 1;
  p.mask = MaskKind::None;
  const Config c{32, 3, 2, 0};
  CHECK(choose_num_splits(p, c, 64, 4096, lim) == 1);
  CHECK(workspace_bytes(p, c, 64, 1) == 0);
  Problem big = p;
  big.num_q_heads = 64;
  const int s1 = choose_num_splits(big, c, 1, 131072, lim);
  CHECK(s1 >= 16);
  CHECK(s1 <= 64);
  CHECK(choose_num_splits(big, c, 4, 131072, lim) < s1);
  CHECK(choose_num_splits(big, c, 1, 40, lim) == 1);  // one tile: nothing to split
  CHECK(workspace_bytes(big, c, 1, s1) == size_t(1) * 1 * 64 * s1 * (128 + 2) * 4);
  const ktune::LaunchDims d = decode_dims(big, c, 3, s1);
  CHECK(d.grid[0] == unsigned(s1));
  CHECK(d.grid[1] == 8u);
  CHECK(d.grid[2] == 3u);
  CHECK(d.block[0] == 64u);
  CHECK(d.dynamic_smem_bytes > 3u * 2 * 32 * 128 * 2);
  const ktune::LaunchDims cd = combine_dims(big, c, 3);
  CHECK(cd.grid[0] == 64u);
  CHECK(cd.grid[1] == 3u);
  CHECK(cd.block[0] == 128u);
  // rows split over CTAs multiply grid.y
  Problem wide = base_problem();
  wide.head_dim = 256;
  wide.num_q_heads = 64;
  wide.num_kv_heads = 4;
  wide.max_q_len = 16;
  CHECK(decode_dims(wide, Config{32, 3, 8, 8}, 1, 1).grid[1] == 4u * 2);
}

TEST_CASE("xqa numerics: e4m3 / bf16 / fp16 conversions are exact", "[xqa]") {
  CHECK(kc::e4m3_to_float(0x7E) == 448.f);
  CHECK(kc::e4m3_to_float(0xFE) == -448.f);
  CHECK(kc::e4m3_to_float(0x01) == std::ldexp(1.f, -9));
  CHECK(kc::e4m3_to_float(0x08) == std::ldexp(1.f, -6));
  CHECK(kc::e4m3_to_float(0x38) == 1.f);
  CHECK(std::isnan(kc::e4m3_to_float(0x7F)));
  CHECK(std::isnan(kc::e4m3_to_float(0xFF)));
  CHECK(kc::float_to_e4m3(1e9f) == 0x7E);  // satfinite
  CHECK(kc::float_to_e4m3(-1e9f) == 0xFE);
  CHECK(kc::float_to_e4m3(NAN) == 0x7F);
  CHECK(kc::float_to_e4m3(std::ldexp(1.f, -10)) == 0x00);  // tie to even -> 0
  CHECK(kc::float_to_e4m3(std::ldexp(3.f, -10)) == 0x02);  // 1.5 * 2^-9 ties to even -> 2 * 2^-9
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;
    const float f = kc::e4m3_to_float((unsigned char)b);
    if (b == 0x80) continue;  // -0 encodes as -0 too, but compare by value
    CHECK(kc::float_to_e4m3(f) == b);
  }
  for (unsigned h = 0; h < 65536; h += 7) {
    const float f = kc::fp16_to_float((unsigned short)h), g = kc::bf16_to_float((unsigned short)h);
    if (!std::isnan(f)) CHECK(kc::float_to_fp16(f) == h);
    if (!std::isnan(g)) CHECK(kc::float_to_bf16(g) == h);
  }
  CHECK(kc::float_to_bf16(1.00390625f) == 0x3F80);  // 1 + 2^-8: tie to even
  CHECK(kc::float_to_fp16(65520.f) == 0x7C00);      // rounds to inf
  CHECK(kc::fp16_to_float(0x0001) == std::ldexp(1.f, -24));
}

TEST_CASE("xqa draft mask bit layout", "[xqa]") {
  std::vector<unsigned short> m(2 * 3, 0);
  kc::draft_mask_set(m.data(), 1, 1, 0);
  kc::draft_mask_set(m.data(), 1, 1, 15);
  kc::draft_mask_set(m.data(), 1, 1, 16);
  kc::draft_mask_set(m.data(), 2, 1, 31);
  CHECK(m[0] == 0);
  CHECK(m[1] == 0);
  CHECK(m[2] == 0x8001);  // row 1, low half: bits 0 and 15
  CHECK(m[3] == 0x0001);  // row 1, high half: bit 16
  CHECK(m[5] == 0x8000);  // row 2, bit 31
  CHECK(kc::draft_mask_word(m.data(), 1, 1, 0) == 0x00018001u);
  CHECK(kc::draft_mask_visible(m.data(), 1, 1, 16));
  CHECK(!kc::draft_mask_visible(m.data(), 1, 1, 17));
  CHECK(kc::draft_mask_words(16) == 1);
  CHECK(kc::draft_mask_words(32) == 1);
  CHECK(kc::draft_mask_words(33) == 2);
  CHECK(kc::draft_mask_words(64) == 2);
  // two words a row (max_q_len 33..64): row r starts at uint16 4r; word 1 holds draft keys 32..63
  std::vector<unsigned short> m2(4 * 3, 0);
  kc::draft_mask_set(m2.data(), 1, 2, 0);
  kc::draft_mask_set(m2.data(), 1, 2, 31);
  kc::draft_mask_set(m2.data(), 1, 2, 32);
  kc::draft_mask_set(m2.data(), 1, 2, 63);
  kc::draft_mask_set(m2.data(), 2, 2, 48);
  CHECK(m2[4] == 0x0001);
  CHECK(m2[5] == 0x8000);
  CHECK(m2[6] == 0x0001);
  CHECK(m2[7] == 0x8000);
  CHECK(m2[10] == 0x0000);
  CHECK(m2[11] == 0x0001);  // row 2, key 48: word 1, bit 16
  CHECK(kc::draft_mask_word(m2.data(), 1, 2, 1) == 0x80000001u);
  const unsigned row1[2] = {kc::draft_mask_word(m2.data(), 1, 2, 0), kc::draft_mask_word(m2.data(), 1, 2, 1)};
  for (int j = 0; j < 64; ++j) {
    INFO(j);
    const bool set = j == 0 || j == 31 || j == 32 || j == 63;
    CHECK(kc::draft_mask_bit<2>(row1, j) == set);
    CHECK(kc::draft_mask_visible(m2.data(), 1, 2, j) == set);
  }
  const unsigned one[1] = {0x80000001u};
  CHECK(kc::draft_mask_bit<1>(one, 0));
  CHECK(kc::draft_mask_bit<1>(one, 31));
  CHECK(!kc::draft_mask_bit<1>(one, 30));
}

TEST_CASE("xqa reference: tiny q_len 1 case by hand", "[xqa]") {
  // D = 64, one kv head, one q head, page 16, L = 3 keys on page 5 of 6.
  Problem p;
  p.head_dim = 64;
  p.num_q_heads = p.num_kv_heads = 1;
  p.page_size = 16;
  p.max_q_len = 1;
  p.mask = MaskKind::None;
  p.write_lse = true;
  const int D = 64, P = 16;
  std::vector<unsigned short> q(D), kv(6 * 2 * P * D, kc::float_to_bf16(NAN));
  for (int d = 0; d < D; ++d) q[d] = kc::float_to_bf16(d % 3 == 0 ? 0.5f : -0.25f);
  double K[3][64], V[3][64];
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < D; ++d) {
      const float kf = 0.125f * ((k + d) % 5) - 0.25f, vf = 0.5f * k - 0.03125f * (d % 7);
      kv[(5 * 2 * P + k) * D + d] = kc::float_to_bf16(kf);
      kv[(5 * 2 * P + P + k) * D + d] = kc::float_to_bf16(vf);
      K[k][d] = kc::bf16_to_float(kc::float_to_bf16(kf));
      V[k][d] = kc::bf16_to_float(kc::float_to_bf16(vf));
    }
  const int bt[2] = {5, -1}, sl[1] = {3};
  ktune_xqa::Params prm{};
  prm.q = q.data();
  prm.kv_cache = kv.data();
  prm.block_tables = bt;
  prm.seq_lens = sl;
  prm.batch = 1;
  prm.num_tokens = 1;
  prm.q_len_per_req = 1;
  prm.max_pages_per_req = 2;
  prm.bmm1_scale = 0.5f;
  prm.bmm2_scale = 2.f;
  prm.window_left = -1;
  const ktune::test::XqaRefResult r = ktune::test::xqa_reference(p, prm, 1);
  double logit[3], mx = -1e30, den = 0;
  for (int k = 0; k < 3; ++k) {
    double s = 0;
    for (int d = 0; d < D; ++d) s += kc::bf16_to_float(q[d]) * K[k][d];
    logit[k] = 0.5 * s;
    mx = std::max(mx, logit[k]);
  }
  for (int k = 0; k < 3; ++k) den += std::exp(logit[k] - mx);
  for (int d = 0; d < D; ++d) {
    double o = 0;
    for (int k = 0; k < 3; ++k) o += std::exp(logit[k] - mx) / den * V[k][d];
    CHECK(r.out[d] == Approx(2.0 * o).epsilon(1e-12));
  }
  CHECK(r.lse[0] == Approx(mx + std::log(den)).epsilon(1e-12));
  CHECK(r.written[0] == 1);
}

TEST_CASE("xqa reference: sinks, masks, windows and padding behave", "[xqa]") {
  Problem p = base_problem();
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.page_size = 16;
  p.write_lse = true;
  ktune::test::XqaRandomOptions o;
  o.batch = 6;
  o.max_seq_len = 300;
  o.ragged = true;
  o.zero_fraction = 0.3;
  o.seed = 11;
  const ktune::test::XqaRandomCase c = ktune::test::make_xqa_case(p, o);
  const auto norm = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
  };
  const ktune::test::XqaRefResult plain = ktune::test::xqa_reference(p, c.host_params(), 2);

  // zero-length requests write nothing
  for (int b = 0; b < c.batch; ++b)
    for (int t = c.q_cu[b]; t < c.q_cu[b + 1]; ++t) CHECK(plain.written[t] == 1);
  int written = 0;
  for (unsigned char w : plain.written) written += w;
  CHECK(written == c.num_tokens);

  // sinks only add to the denominator: every row shrinks, LSE grows
  Problem ps = p;
  ps.has_sinks = true;
  ktune_xqa::Params with_sinks = c.host_params();
  with_sinks.sinks = c.sinks.data();
  const ktune::test::XqaRefResult sunk = ktune::test::xqa_reference(ps, with_sinks, 2);
  CHECK(norm(sunk.out) < norm(plain.out));
  for (size_t i = 0; i < plain.lse.size(); ++i)
    if (plain.written[i / p.num_q_heads]) CHECK(sunk.lse[i] > plain.lse[i]);

  // an explicit lower-triangular mask is the causal mask
  ktune::test::XqaRandomCase tri = c;
  std::fill(tri.mask.begin(), tri.mask.end(), 0);
  for (int b = 0; b < c.batch; ++b)
    for (int i = 0; i < c.q_cu[b + 1] - c.q_cu[b]; ++i)
      for (int j = 0; j <= i; ++j) kc::draft_mask_set(tri.mask.data(), c.q_cu[b] + i, 1, j);
  Problem pe = p;
  pe.mask = MaskKind::Explicit;
  ktune_xqa::Params tri_params = tri.host_params();
  tri_params.mask = tri.mask.data();
  const ktune::test::XqaRefResult expl = ktune::test::xqa_reference(pe, tri_params, 2);
  for (size_t i = 0; i < plain.out.size(); ++i) REQUIRE(expl.out[i] == plain.out[i]);
  // ... and a random explicit mask differs from it
  ktune_xqa::Params rnd_params = c.host_params();
  rnd_params.mask = c.mask.data();
  const ktune::test::XqaRefResult rnd = ktune::test::xqa_reference(pe, rnd_params, 2);
  double diff = 0;
  for (size_t i = 0; i < plain.out.size(); ++i) diff += std::fabs(rnd.out[i] - plain.out[i]);
  CHECK(diff > 0);

  // a window wider than every sequence changes nothing; a narrow one changes the output
  Problem pw = p;
  pw.sliding_window = true;
  ktune_xqa::Params wide = c.host_params();
  wide.window_left = 100000;
  const ktune::test::XqaRefResult w1 = ktune::test::xqa_reference(pw, wide, 2);
  for (size_t i = 0; i < plain.out.size(); ++i) REQUIRE(w1.out[i] == plain.out[i]);
  wide.window_left = 5;
  const ktune::test::XqaRefResult w2 = ktune::test::xqa_reference(pw, wide, 2);
  diff = 0;
  for (size_t i = 0; i < plain.out.size(); ++i) diff += std::fabs(w2.out[i] - plain.out[i]);
  CHECK(diff > 0);

  // softcap bounds every logit: LSE <= log(L) + cap
  Problem pc = p;
  pc.softcap = true;
  ktune_xqa::Params capped = c.host_params();
  capped.softcap = 1.0f;
  const ktune::test::XqaRefResult cr = ktune::test::xqa_reference(pc, capped, 2);
  for (int b = 0; b < c.batch; ++b)
    for (int t = c.q_cu[b]; t < c.q_cu[b + 1]; ++t)
      for (int h = 0; h < p.num_q_heads; ++h) CHECK(cr.lse[t * p.num_q_heads + h] <= std::log(double(c.seq_lens[b])) + 1.0 + 1e-9);
}

TEST_CASE("xqa random inputs follow the layouts", "[xqa]") {
  Problem p = base_problem();
  p.kv_dtype = kc::kE4M3;
  p.layout = Layout::Nhd;
  ktune::test::XqaRandomOptions o;
  o.batch = 5;
  o.max_seq_len = 500;
  o.seed = 3;
  const ktune::test::XqaRandomCase c = ktune::test::make_xqa_case(p, o);
  CHECK(c.num_tokens == 5 * 4);  // uniform: batch * q_len
  std::set<int> used;
  for (int b = 0; b < c.batch; ++b) {
    CHECK(c.seq_lens[b] >= 4);
    const int pages = (c.seq_lens[b] + p.page_size - 1) / p.page_size;
    for (int i = 0; i < c.max_pages_per_req; ++i) {
      const int e = c.block_tables[b * c.max_pages_per_req + i];
      if (i < pages) {
        CHECK(e >= 0);
        CHECK(e < c.num_pages);
        CHECK(used.insert(e).second);  // no page shared
      } else {
        CHECK(e == -1);
      }
    }
  }
  CHECK((long long)c.kv.size() == c.num_pages * 2 * p.num_kv_heads * p.page_size * p.head_dim);
  // some slot beyond a request's length is NaN (poison for stray reads)
  bool has_nan = false;
  for (unsigned char x : c.kv) has_nan |= (x & 0x7F) == 0x7F;
  CHECK(has_nan);
}

TEST_CASE("xqa_decode GPU modules: the decode kernel per config, the combine and helpers once per problem",
          "[xqa]") {
  const ktune::FamilyInfo& fam = ktune::family("xqa_decode");
  const ktune::Arch sm90a = ktune::Arch::parse("sm_90a");
  ktune::Arch host;
  host.host = true;
  Problem p;
  p.max_q_len = 4;
  p.mask = MaskKind::Causal;
  const std::string key = p.key();
  CHECK(ktune::shared_module_configs(fam, key, sm90a) == std::vector<std::string>{ktune::kSharedConfig});
  CHECK(ktune::shared_module_configs(fam, key, host).empty());  // the host module keeps its combine
  for (const Config& c : search_space(p, sm90a))
    CHECK(generate(p, c, sm90a).entry_points == std::vector<std::string>{"ktune_xqa::decode_kernel<ktune_xqa::Spec>"});
  const ktune::GeneratedKernel shared = fam.generate(key, ktune::kSharedConfig, sm90a);
  CHECK(shared.config_key == ktune::kSharedConfig);
  CHECK(shared.entry_points.size() == 3);
  CHECK(shared.entry_points[kCombineEntry] == "ktune_xqa::combine_kernel<ktune_xqa::Spec>");
  // The shared source names the problem and no tile config, so it serves every config's split launches.
  CHECK(shared.source.find("kMaxQLen = 4") != std::string::npos);
  CHECK(shared.source.find("kTokensPerTile") == std::string::npos);
  // Config modules no longer include the helpers' header; the shared one does.
  CHECK(generate(p, default_config(p, sm90a), sm90a).source.find("helpers.cuh") == std::string::npos);
  CHECK(shared.source.find("xqa_decode/helpers.cuh") != std::string::npos);
  CHECK_THROWS_WITH(generate_shared(p, host), Catch::Contains("host backend"));
  CHECK_THROWS_WITH(fam.generate(key, "shared.x", sm90a), Catch::Contains("config key"));
}

namespace {
struct ItemsSpec {  // what host_pipeline::work_items reads of a family's host spec
  static constexpr const char* kFamily = "xqa_decode";
};
}  // namespace

TEST_CASE("xqa_decode host work items are counted in 64 bits and a count past int32 is refused", "[xqa][host_plan]") {
  // 16384 q heads over 1024 kv heads, max_q_len 64: 64 x 16 rows = 4 row groups a kv head. At batch 2048 the
  // combine has 2048 x 64 x 16384 = 2^31 items, one past int32 (it wrapped to INT32_MIN: a call that ran nothing).
  Problem p = base_problem();
  p.head_dim = 64;
  p.num_q_heads = 16384;
  p.num_kv_heads = 1024;
  p.max_q_len = 64;
  CHECK(host_combine_items(p, 2048) == 2147483648LL);
  CHECK(host_decode_items(p, 2048, 2) == 2048LL * 1024 * 4 * 2);
  CHECK(ktune::host_pipeline::work_items<ItemsSpec>(host_decode_items(p, 2048, 2), "batch", 2048) == 16777216);
  CHECK_THROWS_WITH(ktune::host_pipeline::work_items<ItemsSpec>(host_combine_items(p, 2048), "batch", 2048),
                    Catch::Contains("batch") && Catch::Contains("2147483648 items") && Catch::Contains("2048"));
}
