// mxfp4_gemm on the CPU (no GPU needed): exact e2m1/e8m0 decoding, problem/config keys, validation errors that
// name the field, prepack <-> unpack round trip on fresh random weights, the packed file and its layout version.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/error_of.hpp"
#include "support/c_runtime.hpp"
#include "support/temp_dir.hpp"
#include "common/mxfp4.h"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/mxfp4_gemm.hpp"
#include "mxfp4_gemm/spec.hpp"
#include "support/mxfp4_reference.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace ktune::mxfp4;
namespace kc = ::ktune_common;

namespace {

using test::error_of;

}  // namespace

TEST_CASE("e2m1 and e8m0 decode exactly", "[mxfp4]") {
  const float mags[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  for (unsigned c = 0; c < 16; ++c) {
    const float v = kc::e2m1_to_float(c);
    CHECK(v == (c & 8 ? -mags[c & 7] : mags[c & 7]));
    CHECK(std::signbit(v) == bool(c & 8));
    if (c != 8) CHECK(kc::float_to_e2m1(v) == c);
  }
  CHECK(std::isnan(kc::e8m0_to_float(0xFF)));
  CHECK(kc::e8m0_to_float(0) == std::ldexp(1.f, -127));
  for (int e = 1; e < 255; ++e) CHECK(kc::e8m0_to_float(uint8_t(e)) == std::ldexp(1.f, e - 127));
}

TEST_CASE("mxfp4_gemm problem and config keys round-trip", "[mxfp4]") {
  const FamilyInfo& f = family("mxfp4_gemm");
  const std::string dense = f.problem_from_json(R"({"n":8192,"k":8192})");
  CHECK(dense == "n8192.k8192.bf16-bf16");
  const std::string moe = f.problem_from_json(R"({"n":5760,"k":2880,"num_experts":128,"top_k":4,"a_dtype":"fp16"})");
  CHECK(moe == "n5760.k2880.e128.top4.fp16-fp16");
  CHECK(Problem::from_key(moe).grouped());
  CHECK(Problem::from_key(moe).key() == moe);
  for (const char* badkey : {"n8192.k8192", "n8192.k8192.bf16-e4m3", "n8192.k100.bf16-bf16", "n08.k64.bf16-bf16",
                             "n64.k64.e1.top1.bf16-bf16", "n64.k64.e4.top8.bf16-bf16"})
    CHECK_THROWS_AS(Problem::from_key(badkey), Error);
  const Arch sm90 = Arch::parse("sm_90a");
  for (const Config& c : search_space(Problem::from_key(dense), sm90)) {
    CHECK(Config::from_key(c.key()) == c);
    CHECK(can_implement(Problem::from_key(dense), c, sm90, default_limits(sm90)).empty());
  }
  CHECK_THROWS_AS(Config::from_key("bm16.tn1.wn1.wk4.s3"), Error);
  CHECK(can_implement(Problem::from_key(dense), Config{128, 4, 4, 1, 3, 2}, sm90, default_limits(sm90)) != "");
  // wgmma tiles with warpgroups along K; bm256 cannot take 16 warps (ptxas: 128 accumulators under a 128 cap)
  CHECK(can_implement(Problem::from_key(dense), Config::from_key("bm128.tn1.wn4.wk4.s3.d2.wg"), sm90,
                      default_limits(sm90)).empty());
  CHECK_THAT(can_implement(Problem::from_key(dense), Config::from_key("bm256.tn1.wn8.wk2.s3.d2.wg"), sm90,
                           default_limits(sm90)),
             Catch::Contains("bm256 expected at most 8 warps"));
  // Defaults by token count: bandwidth shape for few tokens, wider tiles for many; all runnable.
  for (int64_t m : {1, 7, 16, 64, 1000, 4096})
    for (const std::string& pk : {dense, moe}) {
      const Config c = default_config(Problem::from_key(pk), sm90, m);
      INFO(pk << " m " << m << " -> " << c.key());
      CHECK(can_implement(Problem::from_key(pk), c, sm90, default_limits(sm90)).empty());
    }
  CHECK(f.search_space(moe, sm90, default_limits(sm90)).front() == f.default_config(moe, sm90));
  // FP16 activations from 1024 rows: bm128.tn2 would need 256 accumulators, so the tile of the bucket below
  // (64..1023 rows), not the 16-row ring fallback that reads the weight 4x as often.
  const std::string dense16 = f.problem_from_json(R"({"n":8192,"k":8192,"a_dtype":"fp16"})");
  for (const Arch& a : {sm90, Arch::parse("sm_80")})
    for (int64_t m : {1024, 4096}) {
      const Config c = default_config(Problem::from_key(dense16), a, m);
      INFO(a.str() << " fp16 m " << m << " -> " << c.key());
      CHECK(c.bm >= 64);
      CHECK(c == default_config(Problem::from_key(dense16), a, 1000));
      CHECK(can_implement(Problem::from_key(dense16), c, a, default_limits(a)).empty());
    }
  // The generated source depends on dtypes + form only: same binary for every dense bf16 shape.
  const GeneratedKernel g1 = generate(Problem::from_key(dense), Config{}, sm90);
  const GeneratedKernel g2 = generate(Problem::from_key("n2880.k2880.bf16-bf16"), Config{}, sm90);
  CHECK(g1.source == g2.source);
  CHECK(g1.source != generate(Problem::from_key("n2880.k2880.e128.top4.bf16-bf16"), Config{}, sm90).source);
}

TEST_CASE("MXFP8 activation scale: the smallest power of two that keeps the block within e4m3", "[mxfp4]") {
  // mxfp8_scale_byte(amax) = e: amax <= 448 * 2^(e-127) < 2 * amax' for e - 1 (tight), checked in double.
  std::mt19937_64 rng(test::run_seed("mxfp8 scale"));
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-125, 126);
  auto fits = [](float amax, unsigned e) { return double(amax) <= 448.0 * std::ldexp(1.0, int(e) - 127); };
  std::vector<float> amaxes = {448.f, 449.f, 1.75f, std::nextafter(1.75f, 2.f), 1.f, 0.5f, 3.0e38f, 1e-30f,
                               std::ldexp(1.f, -120)};
  for (int i = 0; i < 20000; ++i) amaxes.push_back(float(std::ldexp(mant(rng), expo(rng))));
  for (float amax : amaxes) {
    const unsigned e = kc::mxfp8_scale_byte(amax);
    INFO("amax " << amax << " -> e " << e);
    REQUIRE(e <= 247u);
    CHECK(fits(amax, e));
    if (e > 0) CHECK_FALSE(fits(amax, e - 1));
    // The block's largest value lands in (224, 448] of the e4m3 grid (so it is never clamped), exactly.
    const float scaled = amax * kc::mxfp8_inv_scale(e);
    CHECK(double(scaled) == double(amax) * std::ldexp(1.0, 127 - int(e)));
    if (e > 0) CHECK(scaled > 224.f);
    CHECK(kc::e4m3_to_float(kc::float_to_e4m3(scaled)) <= 448.f);
  }
  CHECK(kc::mxfp8_scale_byte(0.f) == 127u);
  CHECK(kc::mxfp8_scale_byte(std::ldexp(1.f, -140)) == 0u);  // tiny blocks clamp to 2^-127
  CHECK(kc::mxfp8_scale_byte(INFINITY) == 247u);
  CHECK(kc::mxfp8_inv_scale(127) == 1.f);
  CHECK(kc::mxfp8_inv_scale(0) == std::ldexp(1.f, 127));
  CHECK(kc::mxfp8_inv_scale(247) == std::ldexp(1.f, -120));
  // The GPU test's reference activations for ".mx" (support: mxfp8_roundtrip): exact in the 16-bit dtype, each
  // value within half an e4m3 step of the input (2^-4 relative; 2^-10 of the block max in the subnormal range).
  for (kc::DType t : {kc::kBF16, kc::kFP16}) {
    const int rows = 5, k = 96, lda = 128;
    const std::vector<uint16_t> a = test::random_16bit(size_t(rows) * lda, t, 1.f, rng);
    const std::vector<uint16_t> q = test::mxfp8_roundtrip(a, rows, k, lda, t);
    auto f = [t](uint16_t h) { return double(t == kc::kBF16 ? kc::bf16_to_float(h) : kc::fp16_to_float(h)); };
    int changed = 0;
    for (int r = 0; r < rows; ++r)
      for (int b = 0; b < k; b += 32) {
        double amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(f(a[size_t(r) * lda + b + i])));
        for (int i = 0; i < 32; ++i) {
          const size_t x = size_t(r) * lda + b + i;
          CHECK(std::fabs(f(q[x]) - f(a[x])) <= std::ldexp(std::fabs(f(a[x])), -4) + std::ldexp(amax, -10));
          changed += q[x] != a[x];
        }
      }
    CHECK(changed > 0);  // bf16/fp16 inputs have more mantissa than e4m3: the rounding is real
    for (int x = k; x < lda; ++x) CHECK(q[x] == a[x]);  // past k (row padding) untouched
  }
}

TEST_CASE("mxfp4_gemm native MMA configs (.mx): sm_120a only, opt-in", "[mxfp4]") {
  const Problem dense = Problem::from_key("n8192.k8192.bf16-bf16");
  const Config mx = Config::from_key("bm8.tn2.wn1.wk8.s0.d2.mx");
  CHECK(mx.native);
  CHECK_FALSE(mx.wgmma);
  CHECK(mx.key() == "bm8.tn2.wn1.wk8.s0.d2.mx");
  CHECK_FALSE(mx == Config::from_key("bm8.tn2.wn1.wk8.s0.d2"));
  CHECK_THROWS_AS(Config::from_key("bm64.tn1.wn4.wk1.s4.d2.wg.mx"), Error);
  const Arch sm120 = Arch::parse("sm_120a");
  CHECK(can_implement(dense, mx, sm120, default_limits(sm120)).empty());
  CHECK(can_implement(dense, Config::from_key("bm32.tn2.wn4.wk1.s3.d2.mx"), sm120, default_limits(sm120)).empty());
  for (const char* a : {"sm_90a", "sm_100a", "sm_80", "sm_89"})
    CHECK_THAT(can_implement(dense, mx, Arch::parse(a), default_limits(Arch::parse(a))),
               Catch::Contains("native block-scaled MMA (.mx): only on sm_120a"));
  // It changes the numerics (activations rounded to MXFP8): never chosen by a default or the tuner.
  for (const char* a : {"sm_90a", "sm_100a", "sm_120a"}) {
    const Arch arch = Arch::parse(a);
    for (int64_t m : {1, 16, 4096}) CHECK_FALSE(default_config(dense, arch, m).native);
    for (const Config& c : search_space(dense, arch)) CHECK_FALSE(c.native);
  }
  const std::string src = generate(dense, mx, sm120).source;
  CHECK_THAT(src, Catch::Contains("kNative = true"));
  CHECK_THAT(generate(dense, Config::from_key("bm8.tn2.wn1.wk8.s0.d2"), sm120).source,
             Catch::Contains("kNative = false"));
}

TEST_CASE("mxfp4_gemm tensor-memory MMA configs (.tc): sm_100a only, opt-in, one tiling", "[mxfp4]") {
  const Problem dense = Problem::from_key("n8192.k8192.bf16-bf16");
  const Arch sm100 = Arch::parse("sm_100a");
  const Config tc = Config::from_key("bm64.tn2.wn4.wk1.s2.d1.tc");
  CHECK(tc.tcgen05);
  CHECK_FALSE(tc.native);
  CHECK_FALSE(tc.wgmma);
  CHECK(tc.key() == "bm64.tn2.wn4.wk1.s2.d1.tc");
  CHECK_FALSE(tc == Config::from_key("bm64.tn2.wn4.wk1.s2.d1"));
  CHECK_THROWS_AS(Config::from_key("bm64.tn2.wn4.wk1.s2.d1.mx.tc"), Error);
  for (int bm : {16, 32, 64, 128}) {
    const Config c = Config::from_key("bm" + std::to_string(bm) + ".tn2.wn4.wk1.s2.d1.tc");
    CHECK(can_implement(dense, c, sm100, default_limits(sm100)).empty());
  }
  for (const char* a : {"sm_80", "sm_89", "sm_90a", "sm_120a"})
    CHECK_THAT(can_implement(dense, tc, Arch::parse(a), default_limits(Arch::parse(a))),
               Catch::Contains("(.tc): only on sm_100a"));
  // one CTA shape: 128 weight rows (tn2 x wn4 x 16), 4 warps, two stages; bm is the MMA N
  CHECK_THAT(can_implement(dense, Config::from_key("bm8.tn2.wn4.wk1.s2.d1.tc"), sm100, default_limits(sm100)),
             Catch::Contains("tcgen05: bm expected 16, 32, 64 or 128"));
  for (const char* bad : {"bm64.tn1.wn4.wk1.s2.d1.tc", "bm64.tn2.wn4.wk2.s2.d1.tc", "bm64.tn2.wn4.wk1.s3.d1.tc"})
    CHECK_THAT(can_implement(dense, Config::from_key(bad), sm100, default_limits(sm100)),
               Catch::Contains("tcgen05: expected tn2.wn4.wk1.s2.d1"));
  // It changes the numerics (activations rounded to MXFP8): never chosen by a default or the tuner.
  for (int64_t m : {1, 16, 4096}) CHECK_FALSE(default_config(dense, sm100, m).tcgen05);
  for (const Config& c : search_space(dense, sm100)) CHECK_FALSE(c.tcgen05);
  const GeneratedKernel k = generate(dense, tc, sm100);
  CHECK_THAT(k.source, Catch::Contains("mxfp4_gemm/kernel_tc.cuh"));
  CHECK_THAT(k.source, Catch::Contains("kTcgen05 = true"));
  REQUIRE(k.entry_points.size() == 1);
  CHECK(k.entry_points[0] == "ktune_mxfp4::gemm_kernel_tc<ktune_mxfp4::Spec>");
  CHECK(generate(dense, Config::from_key("bm16.tn2.wn4.wk1.s3.d2"), sm100).entry_points[0] ==
        "ktune_mxfp4::gemm_kernel<ktune_mxfp4::Spec>");
}

TEST_CASE("e2m1x4_to_e4m3x4 gives the same values, in every byte", "[mxfp4]") {
  namespace kc = ::ktune_common;
  for (unsigned code = 0; code < 16; ++code)
    for (int byte = 0; byte < 4; ++byte) {
      // the other bytes hold other codes, to catch carries between bytes
      const unsigned others = 0x0F070901u & ~(0xFFu << (8 * byte));
      const unsigned out = kc::e2m1x4_to_e4m3x4(others | (code << (8 * byte)));
      const float got = kc::e4m3_to_float((unsigned char)(out >> (8 * byte)));
      INFO("code " << code << " byte " << byte);
      CHECK(got == kc::e2m1_to_float(code));
      CHECK(std::signbit(got) == ((code & 8u) != 0));
      for (int o = 0; o < 4; ++o)
        if (o != byte)
          CHECK(kc::e4m3_to_float((unsigned char)(out >> (8 * o))) == kc::e2m1_to_float((others >> (8 * o)) & 0xFu));
    }
}

TEST_CASE("mxfp4_gemm validation names the field", "[mxfp4]") {
  const FamilyInfo& f = family("mxfp4_gemm");
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"n":64,"k":48})"); }), Catch::Contains("k: expected a positive multiple of 32"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"n":0,"k":64})"); }), Catch::Contains("n: expected"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"n":64,"k":64,"top_k":3})"); }), Catch::Contains("top_k"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"n":64,"k":64,"a_dtype":"fp8"})"); }), Catch::Contains("a_dtype"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"n":64,"k":64,"kk":1})"); }), Catch::Contains("kk: unknown field (expected one of n, k,"));

  Problem p = Problem::from_key("n96.k96.e4.top2.bf16-bf16");
  alignas(16) static unsigned char fake[64];  // never dereferenced: validation runs before any driver call
  Mxfp4GemmArgs a;
  a.a = fake;
  a.c = fake;
  a.m = 10;
  a.expert_offsets = reinterpret_cast<const int32_t*>(fake);
  a.weight = Mxfp4Weight{packed_layout_version(), 96, 96, 4, fake, fake};
  CHECK(error_of([&] { mxfp4_gemm_validate(p, a); }).empty());
  auto with = [&](auto change) {
    Mxfp4GemmArgs b = a;
    change(b);
    return error_of([&] { mxfp4_gemm_validate(p, b); });
  };
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.weight.layout_version = packed_layout_version() + 1; }),
             Catch::Contains("weight.layout_version: expected"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.weight.layout_version = 0; }), Catch::Contains("weight.layout_version"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.weight.k = 64; }), Catch::Contains("weight.k: expected problem k = 96"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.weight.num_experts = 8; }), Catch::Contains("weight.num_experts"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.a = fake + 2; }), Catch::Contains("a: expected a 16-byte aligned"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.c = nullptr; }), Catch::Contains("c: expected a device pointer"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.lda = 100; }), Catch::Contains("lda: expected"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.ldc = 10; }), Catch::Contains("ldc: expected"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.m = -1; }), Catch::Contains("m: expected"));
  // A grouped call with no rows launches nothing: its row tensors may be null (an empty tensor may have no address).
  CHECK(with([](Mxfp4GemmArgs& b) { b.m = 0; b.a = nullptr; b.c = nullptr; }).empty());
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.m = 0; b.a = fake + 2; }), Catch::Contains("a: expected a 16-byte aligned"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.expert_offsets = nullptr; }), Catch::Contains("expert_offsets: expected a device pointer"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.weight.packed = fake + 4; }), Catch::Contains("weight.packed: expected a 16-byte"));
  CHECK_THAT(with([](Mxfp4GemmArgs& b) { b.config = "fast"; }), Catch::Contains("config: expected a config key"));
  Problem dense = Problem::from_key("n96.k96.bf16-bf16");
  a.weight.num_experts = 1;
  CHECK_THAT(error_of([&] { mxfp4_gemm_validate(dense, a); }), Catch::Contains("expert_offsets: expected null"));
  a.expert_offsets = nullptr;
  a.m = 0;
  CHECK_THAT(error_of([&] { mxfp4_gemm_validate(dense, a); }), Catch::Contains("m: expected >= 1"));
  // Buckets: dense by rows, grouped by tokens = rows / top_k.
  CHECK(mxfp4_gemm_bucket(dense, 7) == 8);
  CHECK(mxfp4_gemm_bucket(p, 7) == 4);
}

TEST_CASE("mxfp4 prepack round-trips fresh random weights, the packed file checks its layout version", "[mxfp4]") {
  std::mt19937_64 rng(test::run_seed("mxfp4 prepack"));
  test::TempDir dir;
  struct Shape {
    int n, k, e;
  };
  for (const Shape s : {Shape{48, 128, 1}, Shape{37, 96, 3}, Shape{16, 32, 1}, Shape{130, 352, 2}}) {
    INFO("n " << s.n << " k " << s.k << " experts " << s.e);
    std::vector<uint8_t> w(size_t(s.e) * s.n * s.k / 2), sc(size_t(s.e) * s.n * s.k / 32);
    for (auto& b : w) b = uint8_t(rng());
    for (auto& b : sc) b = uint8_t(rng());
    std::vector<uint8_t> pw(packed_weight_bytes(s.n, s.k, s.e)), ps(packed_scale_bytes(s.n, s.k, s.e));
    prepack_host(w.data(), sc.data(), s.n, s.k, s.e, pw.data(), ps.data());
    CHECK(pw != std::vector<uint8_t>(pw.size(), 0));
    std::vector<uint8_t> w2(w.size(), 0xAB), sc2(sc.size(), 0xAB);
    unpack_host(pw.data(), ps.data(), s.n, s.k, s.e, w2.data(), sc2.data());
    CHECK(w2 == w);
    CHECK(sc2 == sc);
    // Fragment order spot check: code of (row r, col c) lands at the documented lane / word / nibble.
    const int r = int(rng() % s.n), c = int(rng() % s.k);
    const unsigned code = (w[size_t(r) * (s.k / 2) + c / 2] >> (4 * (c % 2))) & 15u;
    const int cc = c % 64, rr = r % 16;
    const int lane = (rr % 8) * 4 + (cc % 8) / 2, word = cc / 16, nib = rr / 8 + 2 * ((cc % 16) / 8) + 4 * (cc % 2);
    uint32_t packed_word;
    std::memcpy(&packed_word, pw.data() + 4 * ((size_t(c / 64) * ((s.n + 15) / 16) + r / 16) * 128 + lane * 4 + word), 4);
    CHECK(((packed_word >> (4 * nib)) & 15u) == code);

    PackedFile f{packed_layout_version(), s.n, s.k, s.e, pw, ps};
    const std::string path = dir.file("w.ktmx");
    write_packed_file(path, f);
    const PackedFile g = read_packed_file(path);
    CHECK(g.weight == pw);
    CHECK(g.scales == ps);
    // Another layout version in the file is refused with a message saying what to do.
    {
      std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
      io.seekp(8);
      const int32_t other = packed_layout_version() + 1;
      io.write(reinterpret_cast<const char*>(&other), 4);
    }
    CHECK_THAT(error_of([&] { read_packed_file(path); }), Catch::Contains("layout_version: expected") && Catch::Contains("repack"));
    std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a weight";
    CHECK_THAT(error_of([&] { read_packed_file(path); }), Catch::Contains("bad magic"));
  }
  CHECK_THAT(error_of([] { packed_weight_bytes(16, 48, 1); }), Catch::Contains("k: expected a positive multiple of 32"));
}

TEST_CASE("mxfp4_gemm C API: sizes, prepack, argument errors", "[mxfp4][c_api]") {
  size_t wb = 0, sb = 0;
  REQUIRE(ktune_mxfp4_packed_bytes(37, 96, 2, 0, &wb) == KTUNE_OK);
  REQUIRE(ktune_mxfp4_packed_bytes(37, 96, 2, 1, &sb) == KTUNE_OK);
  CHECK(wb == packed_weight_bytes(37, 96, 2));
  CHECK(sb == packed_scale_bytes(37, 96, 2));
  CHECK(ktune_mxfp4_packed_bytes(37, 95, 1, 0, &wb) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("k: expected a positive multiple of 32"));
  // Past the problem limits (n, k <= 2^20, 4096 experts) the sizes would overflow: refused, naming the field.
  const struct {
    int n, k, e;
    const char* field;
  } too_big[] = {{2147483647, 64, 1, "n: expected 1..1048576"},
                 {16, 2147483616, 1, "k: expected a positive multiple of 32 up to 1048576"},
                 {16, 64, 2147483647, "num_experts: expected 1..4096"}};
  for (const auto& t : too_big) {
    wb = 7;
    CHECK(ktune_mxfp4_packed_bytes(t.n, t.k, t.e, 0, &wb) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(ktune_last_error()), Catch::Contains(t.field));
    CHECK(wb == 7);
  }
  REQUIRE(ktune_mxfp4_packed_bytes(1 << 20, 1 << 20, 4096, 0, &wb) == KTUNE_OK);  // the largest: 2^51 bytes
  CHECK(wb == (size_t(1) << 51));
  std::mt19937_64 rng(test::run_seed("mxfp4_gemm C API"));
  std::vector<uint8_t> w(2 * 37 * 48), s(2 * 37 * 3);
  for (auto& b : w) b = uint8_t(rng());
  for (auto& b : s) b = uint8_t(rng());
  std::vector<uint8_t> pw(packed_weight_bytes(37, 96, 2)), ps(packed_scale_bytes(37, 96, 2));
  std::vector<uint8_t> pw2(pw.size()), ps2(ps.size());
  REQUIRE(ktune_mxfp4_prepack_host(w.data(), s.data(), 37, 96, 2, pw.data(), ps.data()) == KTUNE_OK);
  prepack_host(w.data(), s.data(), 37, 96, 2, pw2.data(), ps2.data());
  CHECK(pw == pw2);
  CHECK(ps == ps2);
  CHECK(ktune_mxfp4_prepack_host(nullptr, s.data(), 37, 96, 2, pw.data(), ps.data()) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("w_packed"));
  ktune_mxfp4_args a;
  ktune_mxfp4_args_default(&a);
  CHECK(a.layout_version == ktune_mxfp4_layout_version());
  CHECK(ktune_mxfp4_gemm(nullptr, "n64.k64.bf16-bf16", &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("runtime must not be NULL"));
  // A newer caller's longer struct: its own fields zero, taken (the call goes on to the problem); one set,
  // refused naming the byte.
  struct NewerArgs {
    ktune_mxfp4_args known;
    int64_t future_field;
  } newer;
  REQUIRE(ktune_mxfp4_args_init(&newer.known, sizeof newer) == KTUNE_OK);
  CHECK(newer.known.layout_version == ktune_mxfp4_layout_version());
  CHECK(newer.future_field == 0);
  test::TempDir dir;
  ktune_runtime* rt = test::c_runtime(dir.file("c.db"));
  CHECK(ktune_mxfp4_gemm(rt, "n64.k64.e4.top2.bf16-bf16", &newer.known, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("expected a dense"));
  newer.future_field = 3;
  CHECK(ktune_mxfp4_gemm(rt, "n64.k64.bf16-bf16", &newer.known, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("does not know"));
  ktune_runtime_destroy(rt);
}
