// sparse_mla_decode on the CPU (no GPU needed): problem/config keys, JSON problems, validation errors that name
// the field, launch planning, and NVRTC compile-only checks for sm_90a, sm_100a and sm_120a.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "support/error_of.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/runtime.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "nvrtc_api.hpp"
#include "support/skip.hpp"
#include "sparse_mla/mla_reference.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace ktune::mla;

namespace {

// Runs `f` and returns the ktune::Error message it throws ("" when it does not throw).
using test::error_of;

const Arch kSm90a{9, 0, 'a'};

}  // namespace

TEST_CASE("sparse_mla_decode problem and config keys round-trip", "[sparse_mla]") {
  Problem p;
  CHECK(p.key() == "h128.r512.d64.k2048.p64.bf16-fp8ds.q1");
  CHECK(p.row_bytes() == 656);
  for (int h : {16, 32, 64, 128})
    for (int topk : {1, 200, 512, 2048, 8192})
      for (int page : {64, 256})
        for (KvFormat f : {KvFormat::Fp8DsMla, KvFormat::Bf16})
          for (bool chk : {false, true}) {
            Problem q;
            q.num_heads = h;
            q.topk = topk;
            q.page_size = page;
            q.kv_format = f;
            q.max_q_len = topk == 200 ? 2 : 1;
            q.checked = chk;
            const Problem back = Problem::from_key(q.key());
            CHECK(back.key() == q.key());
            CHECK(back.checked == chk);
            CHECK(back.kv_format == f);
          }
  Problem b;
  b.kv_format = KvFormat::Bf16;
  CHECK(b.row_bytes() == 1152);
  for (const char* k : {"t64.s2.g64", "t32.s3.g16", "t64.s4.g32", "t64.s1.g64.w16"}) CHECK(Config::from_key(k).key() == k);
  CHECK(Config::from_key("t64.s1.g64.w16").warps == 16);
  CHECK(Config::from_key("t64.s1.g64.w16.wg").wgmma);
  CHECK(Config::from_key("t64.s1.g64.wg").key() == "t64.s1.g64.wg");
  CHECK_THAT(error_of([] { Config::from_key("t64.s1.wg"); }), Catch::Contains("config key"));
  CHECK_THAT(can_implement(Problem{}, Config::from_key("t64.s1.g64.wg"), Arch::parse("sm_100a"),
                           default_limits(Arch::parse("sm_100a"))),
             Catch::Contains("only on sm_90a"));
  CHECK_THAT(error_of([] { Config::from_key("t64.s1.g64.w8"); }), Catch::Contains("config key"));  // w8 is implied
  {  // the warp-specialized kernel: its own key form, sm_90a and the fp8_ds_mla t64.s2.g64 shape only
    const Config ws = Config::from_key("t64.s2.g64.ws");
    CHECK(ws.ws);
    CHECK(ws.warps == 12);
    CHECK(!ws.wgmma);
    CHECK(ws.key() == "t64.s2.g64.ws");
    CHECK_THAT(error_of([] { Config::from_key("t64.s2.g64.w16.ws"); }), Catch::Contains("config key"));
    Problem fp8;  // 128 heads, fp8_ds_mla
    CHECK(can_implement(fp8, ws, kSm90a, default_limits(kSm90a)).empty());
    CHECK_THAT(can_implement(fp8, ws, Arch::parse("sm_100a"), default_limits(Arch::parse("sm_100a"))),
               Catch::Contains("ws: only on sm_90a"));
    Problem bf16 = fp8;
    bf16.kv_format = KvFormat::Bf16;
    CHECK_THAT(can_implement(bf16, ws, kSm90a, default_limits(kSm90a)), Catch::Contains("fp8_ds_mla"));
    CHECK_THAT(can_implement(fp8, Config::from_key("t32.s2.g64.ws"), kSm90a, default_limits(kSm90a)),
               Catch::Contains("64-slot tiles"));
    CHECK_THAT(can_implement(fp8, Config::from_key("t64.s1.g64.ws"), kSm90a, default_limits(kSm90a)),
               Catch::Contains("2 stages"));
    // its paired form: the two 64-head CTAs of a token as a cluster, so 128 heads
    const Config wsp = Config::from_key("t64.s2.g64.wsp");
    CHECK(wsp.ws);
    CHECK(wsp.paired);
    CHECK(wsp.key() == "t64.s2.g64.wsp");
    CHECK(!(wsp == ws));
    CHECK(can_implement(fp8, wsp, kSm90a, default_limits(kSm90a)).empty());
    Problem h64 = fp8;
    h64.num_heads = 64;
    CHECK_THAT(can_implement(h64, wsp, kSm90a, default_limits(kSm90a)), Catch::Contains("wsp: needs 128 heads"));
    CHECK(can_implement(h64, ws, kSm90a, default_limits(kSm90a)).empty());
    CHECK_THAT(can_implement(fp8, wsp, Arch::parse("sm_100a"), default_limits(Arch::parse("sm_100a"))),
               Catch::Contains("ws: only on sm_90a"));
    CHECK_THAT(error_of([] { Config::from_key("t64.s2.g64.wsp.wg"); }), Catch::Contains("config key"));
    Problem h16 = fp8;
    h16.num_heads = 16;
    CHECK_THAT(can_implement(h16, ws, kSm90a, default_limits(kSm90a)), Catch::Contains("heads_per_cta"));
    Problem rope128 = fp8;
    rope128.rope_dim = 128;
    CHECK_THAT(can_implement(rope128, ws, kSm90a, default_limits(kSm90a)), Catch::Contains("shared memory"));
    // the 16-head form: one consumer warpgroup, two producers; unpaired only
    const Config ws16 = Config::from_key("t64.s2.g16.ws");
    CHECK(ws16 == Config::warp_specialized(false, 16));
    CHECK(ws16.heads_per_cta == 16);
    CHECK(ws16.key() == "t64.s2.g16.ws");
    CHECK(can_implement(h16, ws16, kSm90a, default_limits(kSm90a)).empty());
    CHECK(can_implement(fp8, ws16, kSm90a, default_limits(kSm90a)).empty());  // 8 CTAs per token at 128 heads
    CHECK_THAT(can_implement(h16, Config::from_key("t64.s2.g16.wsp"), kSm90a, default_limits(kSm90a)),
               Catch::Contains("wsp: needs 64 heads per CTA"));
    CHECK_THAT(can_implement(h16, Config::from_key("t64.s3.g16.ws"), kSm90a, default_limits(kSm90a)),
               Catch::Contains("2 stages"));
    CHECK_THAT(can_implement(h16, Config::from_key("t32.s2.g16.ws"), kSm90a, default_limits(kSm90a)),
               Catch::Contains("64-slot tiles"));
    CHECK_THAT(can_implement(fp8, Config::from_key("t64.s2.g32.ws"), kSm90a, default_limits(kSm90a)),
               Catch::Contains("64 or 16 heads per CTA"));
    Problem h16bf = h16;
    h16bf.kv_format = KvFormat::Bf16;
    CHECK_THAT(can_implement(h16bf, ws16, kSm90a, default_limits(kSm90a)), Catch::Contains("fp8_ds_mla"));
    CHECK_THAT(can_implement(h16, ws16, Arch::parse("sm_120a"), default_limits(Arch::parse("sm_120a"))),
               Catch::Contains("ws: only on sm_90a"));
    const auto space16 = search_space(h16, kSm90a);
    CHECK(std::find(space16.begin(), space16.end(), ws16) != space16.end());
  }
  for (const char* k : {"t64.s2", "t64.s2.g64.x", "t064.s2.g64", "t64.s-2.g64", ""})
    CHECK_THAT(error_of([&] { Config::from_key(k); }), Catch::Contains("config key"));
  CHECK_THAT(error_of([] { Problem::from_key("h128.r512.d64.k2048.p64.bf16-fp8.q1"); }), Catch::Contains("field 6"));
  CHECK_THAT(error_of([] { Problem::from_key("h128.r512.d64.k2048.p64.bf16-fp8ds.q1.sink"); }),
             Catch::Contains("unknown flag"));
  CHECK_THAT(error_of([] { Problem::from_key("h100.r512.d64.k2048.p64.bf16-fp8ds.q1"); }),
             Catch::Contains("num_heads"));
}

TEST_CASE("sparse_mla_decode JSON problems and their errors", "[sparse_mla]") {
  const FamilyInfo& f = family("sparse_mla_decode");
  CHECK(f.problem_from_json(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64,)"
                            R"("q_dtype":"bf16","kv_dtype":"fp8_ds_mla"})") == "h128.r512.d64.k2048.p64.bf16-fp8ds.q1");
  CHECK(f.problem_from_json(R"({"num_heads":16,"kv_lora_rank":512,"rope_dim":64,"topk":512,"page_size":256,)"
                            R"("kv_dtype":"bf16","max_q_len":2,"checked":true})") ==
        "h16.r512.d64.k512.p256.bf16-bf16.q2.chk");
  const auto err = [&](const char* j) { return error_of([&] { f.problem_from_json(j); }); };
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64})"), Catch::Contains("topk: required field missing"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"kv_dtype":"fp8"})"),
             Catch::Contains("kv_dtype: expected"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"q_dtype":"fp16"})"),
             Catch::Contains("q_dtype: expected"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"window":3})"),
             Catch::Contains("window: unknown field (expected one of num_heads,"));
  CHECK_THAT(err(R"({"num_heads":96,"kv_lora_rank":512,"rope_dim":64,"topk":2048})"), Catch::Contains("num_heads"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":500,"rope_dim":64,"topk":2048})"), Catch::Contains("kv_lora_rank"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":32,"topk":2048})"), Catch::Contains("rope_dim"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":0})"), Catch::Contains("topk"));
  CHECK_THAT(err(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":100})"),
             Catch::Contains("page_size"));
  CHECK_THAT(err(R"({"num_heads":4294967424,"kv_lora_rank":512,"rope_dim":64,"topk":2048})"),
             Catch::Contains("num_heads: expected a positive integer, got 4294967424"));
  CHECK_THAT(err("[1]"), Catch::Contains("expected an object"));
}

TEST_CASE("sparse_mla_decode configs, search space and split plans", "[sparse_mla]") {
  for (int h : {16, 32, 64, 128})
    for (KvFormat fmt : {KvFormat::Fp8DsMla, KvFormat::Bf16})
      for (const char* a : {"sm_90a", "sm_100a", "sm_120a"}) {
        Problem p;
        p.num_heads = h;
        p.kv_format = fmt;
        const Arch arch = Arch::parse(a);
        const Config d = default_config(p, arch);
        INFO(p.key() << " on " << a << ": default " << d.key());
        CHECK(can_implement(p, d, arch, default_limits(arch)).empty());
        const auto space = search_space(p, arch);
        REQUIRE(!space.empty());
        CHECK(space.front() == d);
        for (const Config& c : space) CHECK(can_implement(p, c, arch, default_limits(arch)).empty());
      }
  Problem p;  // 128 heads, fp8, topk 2048
  const DeviceLimits lim = default_limits(kSm90a);
  const Config d = default_config(p, kSm90a);
  CHECK(d.heads_per_cta == 64);
  CHECK(d.key() == "t64.s2.g64.wsp");  // the paired warp-specialized kernel on sm_90a at 128 heads
  Problem p64 = p;
  p64.num_heads = 64;
  CHECK(default_config(p64, kSm90a).key() == "t64.s2.g64.ws");  // 64 heads: one CTA per token, unpaired
  CHECK(!default_config(p, Arch::parse("sm_100a")).ws);
  {
    const auto space = search_space(p, kSm90a);
    CHECK(std::find(space.begin(), space.end(), Config::warp_specialized(false)) != space.end());
  }
  CHECK(choose_num_splits(p, d, 64, lim) == 1);  // 128 CTAs: one wave on 132 SMs
  Problem small = p;
  small.num_heads = 16;
  const Config ds = default_config(small, kSm90a);
  CHECK(choose_num_splits(small, ds, 4, lim) > 1);  // 4 tokens x 1 head group: split top-k to fill the GPU
  CHECK(workspace_bytes(p, 4, 1) == 0);
  CHECK(workspace_bytes(p, 4, 3) == size_t(4) * 128 * 3 * 514 * 4);
  CHECK_THAT(can_implement(p, Config{64, 2, 48}, kSm90a, lim), Catch::Contains("heads_per_cta"));
  CHECK_THAT(can_implement(p, Config{64, 4, 64}, kSm90a, lim), Catch::Contains("shared memory"));
  CHECK_THAT(can_implement(p, Config{64, 2, 64}, Arch::parse("sm_80"), lim), Catch::Contains("sm_89"));
}

TEST_CASE("sparse_mla_decode host configs: keys, can_implement, search space, generate, split plan", "[sparse_mla]") {
  Arch host;
  host.host = true;
  Problem p;
  p.num_heads = 16;
  const Config d = default_config(p, host);
  CHECK(d.host());
  CHECK(d.key() == "t32.g16.v16.u2");
  CHECK(Config::from_key("t64.g8.v8.u4") == Config::host_config(64, 8, 8, 4));
  CHECK(Config::from_key("t64.g8.v8.u4").key() == "t64.g8.v8.u4");
  CHECK_THAT(error_of([] { Config::from_key("t64.g8.v0.u4"); }), Catch::Contains("config key"));
  CHECK_THAT(error_of([] { Config::from_key("t64.g8.v8"); }), Catch::Contains("config key"));
  // a host key never runs on a GPU arch and a CUDA key never on the host
  CHECK_THAT(can_implement(p, d, kSm90a, default_limits(kSm90a)), Catch::Contains("host config"));
  CHECK_THAT(can_implement(p, Config::from_key("t64.s1.g16"), host, DeviceLimits{}), Catch::Contains("CUDA config"));
  CHECK_THAT(can_implement(p, Config::host_config(48, 16, 16, 2), host, {}), Catch::Contains("tile"));
  CHECK_THAT(can_implement(p, Config::host_config(32, 32, 16, 2), host, {}), Catch::Contains("divisor of num_heads"));
  CHECK_THAT(can_implement(p, Config::host_config(32, 16, 4, 2), host, {}), Catch::Contains("vec_width"));
  CHECK_THAT(can_implement(p, Config::host_config(32, 16, 16, 3), host, {}), Catch::Contains("unroll"));
  const auto space = search_space(p, host);
  REQUIRE(space.size() == 8);
  CHECK(space.front() == d);
  for (const Config& c : space) CHECK(can_implement(p, c, host, {}).empty());
  const GeneratedKernel k = generate(p, Config::from_key("t64.g8.v8.u4"), host);
  CHECK_THAT(k.source, Catch::Contains("sparse_mla_decode/host_kernel.h") && Catch::Contains("kTopk = 2048") &&
                           Catch::Contains("kHeadsPerItem = 8") && Catch::Contains("kFp8 = true"));
  CHECK(k.entry_points == std::vector<std::string>{"ktune_mla::host_decode<ktune_mla::Spec>",
                                                   "ktune_mla::host_combine<ktune_mla::Spec>"});
  // the host module keeps its combine: no shared module on the host
  const FamilyInfo& fam = family("sparse_mla_decode");
  CHECK(shared_module_configs(fam, p.key(), host).empty());
  CHECK_THAT(error_of([&] { generate_shared(p, host); }), Catch::Contains("host backend"));
  // splits only while there are fewer than two items per thread; each split keeps >= 2 tiles
  CHECK(choose_num_splits_host(p, d, 4, 2) == 1);          // 4 items on 2 threads
  CHECK(choose_num_splits_host(p, d, 1, 8) == 16);         // 1 item, 16 wanted
  CHECK(choose_num_splits_host(p, d, 1, 64) == 32);        // capped at tiles / 2 (64 tiles of 32)
  CHECK(host_decode_items(p, Config::from_key("t64.g8.v8.u4"), 3, 2) == 3 * 2 * 2);
}

TEST_CASE("sparse_mla_decode argument errors name the field, before any driver call", "[sparse_mla]") {
  Problem p;
  alignas(16) static unsigned char dummy[64];
  SparseMlaDecodeArgs ok;
  ok.q = dummy;
  ok.kv_cache = dummy;
  ok.indices = reinterpret_cast<const int32_t*>(dummy);
  ok.out = dummy;
  ok.num_tokens = 4;
  ok.num_pages = 10;
  ok.softmax_scale = 0.05f;
  CHECK(error_of([&] { sparse_mla_decode_validate(p, ok); }).empty());
  const auto err = [&](auto mutate) {
    SparseMlaDecodeArgs a = ok;
    mutate(a);
    return error_of([&] { sparse_mla_decode_validate(p, a); });
  };
  CHECK_THAT(err([](auto& a) { a.q = nullptr; }), Catch::Contains("q: expected a device pointer, got null"));
  CHECK_THAT(err([](auto& a) { a.q = dummy + 2; }), Catch::Contains("q: expected a 16-byte aligned"));
  CHECK_THAT(err([](auto& a) { a.kv_cache = nullptr; }), Catch::Contains("kv_cache: expected a device pointer"));
  CHECK_THAT(err([](auto& a) { a.kv_cache = dummy + 8; }), Catch::Contains("kv_cache: expected a 16-byte aligned"));
  CHECK_THAT(err([](auto& a) { a.indices = nullptr; }), Catch::Contains("indices: expected a device pointer"));
  CHECK_THAT(err([](auto& a) { a.out = nullptr; }), Catch::Contains("out: expected a device pointer"));
  CHECK_THAT(err([](auto& a) { a.lse = reinterpret_cast<float*>(dummy + 2); }), Catch::Contains("lse: expected"));
  CHECK_THAT(err([](auto& a) { a.sinks = reinterpret_cast<const float*>(dummy + 1); }), Catch::Contains("sinks: expected"));
  // An empty call (0 tokens, nothing launched) may pass null for the per-token tensors, which may have no address;
  // the cache is still required, and a non-null pointer is still checked.
  CHECK(err([](auto& a) { a.num_tokens = 0; a.q = nullptr; a.indices = nullptr; a.out = nullptr; }).empty());
  CHECK_THAT(err([](auto& a) { a.num_tokens = 0; a.kv_cache = nullptr; }), Catch::Contains("kv_cache: expected a device pointer"));
  CHECK_THAT(err([](auto& a) { a.num_tokens = 0; a.q = dummy + 2; }), Catch::Contains("q: expected a 16-byte aligned"));
  CHECK_THAT(err([](auto& a) { a.num_tokens = -1; }), Catch::Contains("num_tokens: expected 0..65535, got -1"));
  CHECK_THAT(err([](auto& a) { a.num_tokens = 70000; }), Catch::Contains("num_tokens"));
  CHECK_THAT(err([](auto& a) { a.num_pages = 0; }), Catch::Contains("num_pages: expected >= 1, got 0"));
  CHECK_THAT(err([](auto& a) { a.softmax_scale = 0; }), Catch::Contains("softmax_scale: expected a finite value > 0"));
  CHECK_THAT(err([](auto& a) { a.softmax_scale = NAN; }), Catch::Contains("softmax_scale"));
  CHECK_THAT(err([](auto& a) { a.num_splits = 65; }), Catch::Contains("num_splits: expected 0 (planned) or 1..64"));
  CHECK_THAT(err([](auto& a) { a.config = "t64.s2"; }), Catch::Contains("config: expected a config key"));
  CHECK_THAT(err([](auto& a) { a.config = "t64.s2.g64"; a.num_splits = 3; }),
             Catch::Contains("workspace: expected a device pointer of >= "));
  CHECK_THAT(err([](auto& a) {
               a.config = "t64.s2.g64";
               a.num_splits = 3;
               a.workspace = dummy;
               a.workspace_bytes = 16;
             }),
             Catch::Contains("workspace_bytes: expected >= "));
  // a plan with everything forced needs no device
  Runtime rt(RuntimeOptions{});
  const SparseMlaDecodePlan plan = sparse_mla_decode_plan(rt, p, 8, "t64.s2.g64", 4);
  CHECK(plan.num_splits == 4);
  CHECK(plan.source == "forced");
  CHECK(plan.workspace_bytes == workspace_bytes(p, 8, 4));
  CHECK(sparse_mla_decode_batch_bucket(p, 5) == 8);
  Problem mtp = p;
  mtp.max_q_len = 2;
  CHECK(sparse_mla_decode_batch_bucket(mtp, 6) == 4);  // 3 requests x 2 positions
}

TEST_CASE("the fp8_ds_mla host codec round-trips within e4m3 precision", "[sparse_mla]") {
  Problem p;
  test::MlaRng rng(42);
  std::vector<float> v(p.dim()), back(p.dim());
  std::vector<unsigned char> row(p.row_bytes());
  for (int trial = 0; trial < 20; ++trial) {
    for (int i = 0; i < p.dim(); ++i) v[i] = rng.normal() * float(1 + trial);
    test::mla_encode_row(p, v.data(), row.data());
    test::mla_decode_row(p, row.data(), back.data());
    for (int i = 0; i < p.kv_lora_rank; ++i) {
      const float amax_tile = [&] {
        float m = 0;
        for (int j = 0; j < 128; ++j) m = std::max(m, std::fabs(v[(i / 128) * 128 + j]));
        return m;
      }();
      // e4m3: 3 mantissa bits (relative 2^-4), subnormal step 2^-9 of the tile scale amax/448
      REQUIRE(std::fabs(back[i] - v[i]) <= std::fabs(v[i]) / 16 + amax_tile / 448 * std::ldexp(1.0f, -9) + 1e-30f);
    }
    for (int i = p.kv_lora_rank; i < p.dim(); ++i) REQUIRE(std::fabs(back[i] - v[i]) <= std::fabs(v[i]) / 128);
  }
}

TEST_CASE("sparse_mla_decode GPU modules: the decode kernel per config, the combine once per problem", "[sparse_mla]") {
  const FamilyInfo& fam = family("sparse_mla_decode");
  Problem p;
  const std::string key = p.key();
  CHECK(shared_module_configs(fam, key, kSm90a) == std::vector<std::string>{kSharedConfig});
  const GeneratedKernel ws = fam.generate(key, "t64.s2.g64.wsp", kSm90a);
  CHECK(ws.entry_points == std::vector<std::string>{"ktune_mla::decode_kernel_ws_pair<ktune_mla::Spec>"});
  CHECK(fam.generate(key, "t64.s2.g64.ws", kSm90a).entry_points ==
        std::vector<std::string>{"ktune_mla::decode_kernel_ws<ktune_mla::Spec>"});
  const GeneratedKernel shared = fam.generate(key, kSharedConfig, kSm90a);
  CHECK(shared.config_key == kSharedConfig);
  CHECK(shared.entry_points[kCombineEntry] == "ktune_mla::combine_kernel<ktune_mla::Spec>");
  CHECK(shared.entry_points.size() == 1);
  // The shared source names the problem and no tile config: every config's launches can use it.
  CHECK_THAT(shared.source, Catch::Contains("kNumHeads = 128") && Catch::Contains("kChecked = false") &&
                                !Catch::Contains("kHeadsPerCta") && !Catch::Contains("kernel_ws.cuh"));
  // The checked variant's shared module is its own (the key carries the flag).
  Problem checked = p;
  checked.checked = true;
  CHECK(generate_shared(checked, kSm90a).problem_key != shared.problem_key);
}

TEST_CASE("sparse_mla_decode compiles for sm_90a, sm_100a and sm_120a, with its shared modules", "[sparse_mla][compile]") {
  KTUNE_REQUIRE_NVRTC();
  const FamilyInfo& fam = family("sparse_mla_decode");
  // Two problems: the DeepSeek V3.2 shape (fp8_ds_mla, checked) and a 16-head BF16-cache shard.
  const char* problems[] = {
      R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64,"checked":true})",
      R"({"num_heads":16,"kv_lora_rank":512,"rope_dim":64,"topk":512,"page_size":256,"kv_dtype":"bf16"})",
  };
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("m.db");
  Runtime rt(o);
  int n = 0;
  for (const char* pj : problems)
    for (const char* a : {"sm_90a", "sm_100a", "sm_120a"}) {
      const std::string key = fam.problem_from_json(pj);
      const Arch arch = Arch::parse(a);
      INFO(key << " on " << a);
      CHECK_NOTHROW(rt.ensure_binary(fam.generate(key, fam.default_config(key, arch), arch), arch));
      CHECK_NOTHROW(rt.ensure_binary(fam.generate(key, kSharedConfig, arch), arch));
      n += 2;
    }
  CHECK(rt.stats().compiles == n);
}

TEST_CASE("sparse_mla_decode through the C API: errors name the field, plans need no device when forced", "[sparse_mla]") {
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  const char* key = "h128.r512.d64.k2048.p64.bf16-fp8ds.q1";
  ktune_sparse_mla_args a;
  ktune_sparse_mla_args_default(&a);
  CHECK(a.q == nullptr);
  CHECK(a.num_splits == 0);
  CHECK(ktune_sparse_mla_decode(rt, key, nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  // The defaults are an empty call (0 tokens), whose per-token tensors may be null; the cache may not.
  CHECK(ktune_sparse_mla_decode(rt, key, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("kv_cache: expected a device pointer"));
  a.num_tokens = 1;
  CHECK(ktune_sparse_mla_decode(rt, key, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);  // q is null
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("q: expected a device pointer"));
  CHECK(ktune_sparse_mla_decode(rt, "h128.bogus", &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("key"));
  const char* plan = nullptr;
  REQUIRE(ktune_sparse_mla_decode_plan(rt, key, 8, "t64.s1.g64", 4, &plan) == KTUNE_OK);
  CHECK_THAT(std::string(plan), Catch::Contains("\"num_splits\":4") && Catch::Contains("\"source\":\"forced\""));
  size_t bytes = 0;
  REQUIRE(ktune_sparse_mla_decode_workspace_bytes(rt, key, 8, "t64.s1.g64", 4, &bytes) == KTUNE_OK);
  CHECK(bytes == workspace_bytes(Problem{}, 8, 4));
  ktune_runtime_destroy(rt);
}
