// The host target through the runtime: object files in the SQLite cache keyed with the plugin's target id,
// reload with 0 compiles, KTUNE_JIT=0, compile errors, entry points by expression, and warmup + replay on the
// host in one process with two runtimes.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "autotune/presets.hpp"
#include "autotune/tuner.hpp"
#include "autotune/warmup.hpp"
#include "binary_key.hpp"
#include "host/host_support.hpp"
#include "host_compiler.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "support/temp_dir.hpp"
#include "support/xqa_reference.hpp"

using namespace ktune;
namespace kc = ::ktune_common;

namespace {

Arch host_arch() { return Arch::host_cpu(); }

RuntimeOptions opts_for(const std::string& path) {
  RuntimeOptions o;
  o.cache_path = path;
  return o;
}

xqa::Problem small_problem() {
  xqa::Problem p;
  p.head_dim = 64;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.page_size = 16;
  p.max_q_len = 2;
  p.mask = xqa::MaskKind::Causal;
  p.write_lse = true;
  p.validate();
  return p;
}

// Runs small_problem() through `rt` and checks it against the reference.
void run_and_check(Runtime& rt, const xqa::Problem& p) {
  test::XqaRandomOptions o;
  o.batch = 3;
  o.max_seq_len = 200;
  o.seed = 7;
  const test::XqaRandomCase c = test::make_xqa_case(p, o);
  std::vector<unsigned char> out(size_t(c.num_tokens) * p.num_q_heads * p.head_dim * 2, 0xFF);
  std::vector<float> lse(size_t(c.num_tokens) * p.num_q_heads);
  std::memset(lse.data(), 0xFF, lse.size() * sizeof(float));
  xqa_decode_host(rt, p, test::host_args(c, out.data(), lse.data()), 2);
  const auto ref = test::xqa_reference(p, c.host_params());
  const auto cmp = test::xqa_compare(p, ref, out.data(), lse.data(), 0xFF);
  CHECK(cmp.nonfinite == 0);
  CHECK(cmp.clobbered == 0);
  CHECK(cmp.rel_l2 < 5e-3);
}

}  // namespace

TEST_CASE("the host target id names triple, CPU, features and LLVM", "[host][runtime]") {
  KTUNE_REQUIRE_HOST();
  const std::string id = Runtime::host_target_id();
  INFO(id);
  CHECK(id.find('/') != std::string::npos);
  CHECK_THAT(id, Catch::Contains(";llvm 19."));
  CHECK_THAT(id, Catch::StartsWith("x86_64") || Catch::StartsWith("aarch64") || Catch::Contains("-linux"));
  test::TempDir dir;
  Runtime rt(opts_for(dir.file("k.db")));
  CHECK_THAT(rt.host_fingerprint(), Catch::StartsWith(id) && Catch::Contains(";cores="));
}

TEST_CASE("a KTUNE_DUMP folder that cannot be written costs a warning, not the call", "[host][runtime][cache]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  RuntimeOptions o = opts_for(dir.file("k.db"));
  o.dump_dir = "/dev/null/dump";  // under a file: no folder can be made there
  Runtime rt(o);
  const xqa::Problem p = small_problem();
  run_and_check(rt, p);
  run_and_check(rt, p);
  CHECK(rt.stats().compiles == 1);  // compiled once and stored, not compiled (and failed) at every call
  CHECK(cache_list(o.cache_path).size() == 1);
}

TEST_CASE("host objects round-trip through the cache: a second runtime compiles nothing", "[host][runtime][cache]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  const std::string db = dir.file("k.db");
  const xqa::Problem p = small_problem();
  const xqa::Config cfg = xqa::default_config(p, host_arch());
  {
    Runtime rt(opts_for(db));
    auto r = rt.ensure_binary(xqa::generate(p, cfg, host_arch()), host_arch());
    CHECK(r.compiled);
    CHECK(r.name == "xqa_decode/host/" + p.key() + "/" + cfg.key());
    CHECK(r.compile_ms > 0);
    run_and_check(rt, p);
    CHECK(rt.stats().compiles == 1);  // the launch found the object in memory
    CHECK(rt.stats().loads == 1);
  }
  auto entries = cache_list(db);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].arch == "host");
  CHECK(entries[0].compiler == "llvm");
  CHECK(entries[0].compiler_version == Runtime::host_target_id());
  CHECK(entries[0].blob_size > 1000);

  Runtime second(opts_for(db));  // another process would see the same
  run_and_check(second, p);
  run_and_check(second, p);
  const RuntimeStats s = second.stats();
  CHECK(s.compiles == 0);
  CHECK(s.cache_hits == 1);
  CHECK(s.loads == 1);
  CHECK(s.memory_hits >= 1);
}

TEST_CASE("a host object compiled for another CPU or LLVM is a cache miss", "[host][runtime][cache]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  const xqa::Problem p = small_problem();
  const GeneratedKernel k = xqa::generate(p, xqa::default_config(p, host_arch()), host_arch());
  const auto opts = detail::host_options(k);
  const std::string id = Runtime::host_target_id();
  const auto here = detail::derive_binary_key(k, host_arch(), "llvm", id, opts);
  const auto other_cpu = detail::derive_binary_key(k, host_arch(), "llvm", "x86_64-pc-linux-gnu/other/+sse2;llvm 19.1.7", opts);
  const auto other_llvm = detail::derive_binary_key(k, host_arch(), "llvm", id + ".1", opts);
  CHECK(here.digest != other_cpu.digest);
  CHECK(here.digest != other_llvm.digest);
  CHECK(here.compiler_version == id);

  // A cache whose only row is this kernel's object filed under another CPU's target id: not served.
  const std::string db = dir.file("k.db");
  {
    Runtime rt(opts_for(dir.file("src.db")));
    rt.ensure_binary(k, host_arch());
  }
  {
    cache::LayeredCache src(dir.file("src.db"), true);
    cache::BinaryLookup found = src.get_binary(here.digest);
    REQUIRE(found.status == cache::LookupStatus::hit);
    cache::BinaryRecord moved = found.record;
    moved.digest = other_cpu.digest;
    moved.compiler_version = other_cpu.compiler_version;
    moved.blob_sha256.clear();
    moved.row_digest.clear();
    cache::LayeredCache dst(db, false);
    REQUIRE(dst.put_binary(moved));
  }
  Runtime rt(opts_for(db));
  CHECK(rt.ensure_binary(k, host_arch()).compiled);
  CHECK(rt.stats().compiles == 1);
  CHECK(cache_list(db).size() == 2);
}

TEST_CASE("KTUNE_JIT=0 turns a host miss into an error and a host hit into a load", "[host][runtime][cache]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  const std::string db = dir.file("k.db");
  const xqa::Problem p = small_problem();
  RuntimeOptions o = opts_for(db);
  o.allow_jit = false;
  {
    Runtime no_jit(o);
    try {
      run_and_check(no_jit, p);
      FAIL("expected jit_disabled");
    } catch (const Error& e) {
      CHECK(e.status() == Status::jit_disabled);
      CHECK_THAT(e.what(), Catch::Contains("KTUNE_JIT=0") && Catch::Contains("xqa_decode/host/" + p.key()));
    }
    CHECK(no_jit.stats().compiles == 0);
  }
  {
    Runtime jit(opts_for(db));
    run_and_check(jit, p);
  }
  Runtime no_jit_again(o);
  run_and_check(no_jit_again, p);
  CHECK(no_jit_again.stats().compiles == 0);
  CHECK(no_jit_again.stats().cache_hits == 1);
}

TEST_CASE("a failed host compile carries the clang log, options and kernel name", "[host][runtime][compiler]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(opts_for(dir.file("k.db")));
  GeneratedKernel bad;
  bad.family = "test_host";
  bad.problem_key = "broken";
  bad.config_key = "default";
  bad.source = "extern \"C\" int f(int x) { return undefined_symbol(x); }\n";
  bad.entry_points = {"f"};
  try {
    rt.ensure_binary(bad, host_arch());
    FAIL("expected a compile error");
  } catch (const CompileError& e) {
    CHECK(e.status() == Status::compile_error);
    CHECK_THAT(e.log(), Catch::Contains("undefined_symbol"));
    CHECK_THAT(e.options(), Catch::Contains("-std=c++17"));
    CHECK(e.kernel_name() == "test_host/host/broken/default");
  }
  CHECK(rt.stats().compile_failures == 1);
  CHECK(cache_list(dir.file("k.db")).empty());

  // No system header is reachable: the in-memory templates are the only files the compiler sees.
  GeneratedKernel sys = bad;
  sys.problem_key = "system_header";
  sys.source = "#include <stdio.h>\nextern \"C\" int f(int x) { return x; }\n";
  CHECK_THROWS_AS(rt.ensure_binary(sys, host_arch()), CompileError);
}

TEST_CASE("host entry points are C++ expressions: extern C functions and template instances", "[host][runtime]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(opts_for(dir.file("k.db")));
  GeneratedKernel k;
  k.family = "test_host";
  k.problem_key = "entries";
  k.config_key = "default";
  k.source =
      "#include \"common/numerics.cuh\"\n"
      "extern \"C\" int add_one(int x) { return x + 1; }\n"
      "namespace t { template <int N> float scale_bf16(unsigned short h) { return N * ktune_common::bf16_to_float(h); } }\n";
  k.entry_points = {"add_one", "t::scale_bf16<3>"};
  const LoadedKernel& lk = rt.get_host("test_host/entries", [&] { return k; });
  REQUIRE(lk.functions.size() == 2);
  CHECK(lk.context == nullptr);
  CHECK(reinterpret_cast<int (*)(int)>(lk.functions[0])(41) == 42);
  CHECK(reinterpret_cast<float (*)(unsigned short)>(lk.functions[1])(0x3FC0) == 4.5f);  // 3 * 1.5
  CHECK(&rt.get_host("test_host/entries", [&]() -> GeneratedKernel { FAIL("regenerated"); return k; }) == &lk);
}

TEST_CASE("host warmup tunes every key, a second runtime replays with 0 compiles and 0 tunings", "[host][autotune][warmup]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  const RuntimeOptions o = opts_for(dir.file("w.db"));
  autotune::Preset preset = autotune::with_overrides(autotune::load_preset("llama-3.1-8b"), std::nullopt, 2, 1024, std::nullopt);
  autotune::WarmupOptions w;
  w.arches = {"host"};
  int keys = 0;
  {
    Runtime rt(o);
    const auto r = autotune::warmup(rt, preset, w);
    CHECK(r.failed == 0);
    CHECK(r.compile_failed == 0);
    CHECK(r.keys == 4);  // batch {1, 2} x seq_len {512, 1024}
    CHECK(r.tuned == 4);
    CHECK(r.compiled > 0);
    for (const auto& it : r.items) {
      INFO(it.tuning_key << ": " << it.status);
      CHECK(it.status == "tuned");
      CHECK_FALSE(it.winner.empty());
    }
    keys = r.keys;
  }
  const int64_t tunings_before = autotune::tunings_performed();
  {
    Runtime again(o);
    const auto r = autotune::replay(again, preset, w.host_max_total_tokens, true, "host");
    CHECK(r.ops.size() == static_cast<size_t>(keys));
    CHECK(r.stats.compiles == 0);
    CHECK(r.tunings == 0);
    CHECK(r.stats.tuning_misses == 0);
    for (const auto& op : r.ops) {
      INFO(op.tuning_key);
      CHECK(op.tuned);
      CHECK(op.steady_call_ms > 0);
    }
  }
  {
    Runtime third(o);  // warmup again: everything done earlier, nothing compiled
    const auto r = autotune::warmup(third, preset, w);
    CHECK(r.already_done == keys);
    CHECK(r.tuned == 0);
    CHECK(r.compiled == 0);
    CHECK(third.stats().compiles == 0);
  }
  CHECK(autotune::tunings_performed() == tunings_before);
}
