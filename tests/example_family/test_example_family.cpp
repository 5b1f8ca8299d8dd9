// example_scale through everything a family goes through, with no edit outside its folder but its registration
// (register.cpp): the registry, the one problem schema (JSON, presets, the C API's ktune_problem_key), NVRTC
// compile for sm_90a and the cache, the C op (ktune_op_prepare / run / plan), and on the host CPU (LLVM backend)
// the call, tune, warmup and replay. The [gpu] cases run the same on a GPU. The CLI and Python parts run as
// ctest scripts against libktune_example.so (CMakeLists.txt here).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/error_of.hpp"
#include "autotune/host_tuner.hpp"
#include "autotune/plan.hpp"
#include "autotune/presets.hpp"
#include "autotune/tuner.hpp"
#include "autotune/warmup.hpp"
#include "common/numerics.cuh"
#include "example_family/family.hpp"
#include "host/host_support.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/tuning.hpp"
#include "support/gpu.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
namespace kc = ::ktune_common;

namespace {

constexpr const char* kName = "example_scale";

using test::error_of;

// A preset of one example op; buckets batch 1..4 give the tokens buckets m1, m2, m4.
const char* const kPreset = R"({"name": "scale-only", "buckets": {"batch": {"min": 1, "max": 4},
  "seq_len": {"min": 128, "max": 128}},
  "ops": [{"label": "scale", "family": "example_scale", "problem": {"cols": 256, "dtype": "bf16"}}]})";

RuntimeOptions in(const test::TempDir& dir, bool jit = true) {
  RuntimeOptions o;
  o.cache_path = dir.file("example.db");
  o.allow_jit = jit;
  return o;
}

// alpha * x in the problem's dtype, as the kernels compute it.
std::vector<unsigned char> expected(const example::Problem& p, const std::vector<unsigned char>& x, float alpha) {
  std::vector<unsigned char> out(x.size());
  const size_t n = x.size() / kc::dtype_size(p.dtype);
  for (size_t i = 0; i < n; ++i) {
    const float y = alpha * kc::to_float(p.dtype, x.data(), static_cast<long long>(i));
    if (p.dtype == kc::kBF16) {
      const unsigned short h = kc::float_to_bf16(y);
      std::memcpy(out.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(out.data() + 4 * i, &y, 4);
    }
  }
  return out;
}

std::vector<unsigned char> ramp(const example::Problem& p, int64_t rows) {
  const size_t n = size_t(rows) * p.cols;
  std::vector<unsigned char> x(n * kc::dtype_size(p.dtype));
  for (size_t i = 0; i < n; ++i) {
    const float v = float(int(i % 97) - 48) * 0.37f;
    if (p.dtype == kc::kBF16) {
      const unsigned short h = kc::float_to_bf16(v);
      std::memcpy(x.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(x.data() + 4 * i, &v, 4);
    }
  }
  return x;
}

}  // namespace

TEST_CASE("example family: registered by one call, listed after the library's own", "[example]") {
  const FamilyInfo& f = family(kName);
  CHECK(&f == &families().back());
  CHECK(f.tuning_dims == std::vector<std::string>{"tokens"});
  CHECK(f.workload != nullptr);
  CHECK(f.host_workload != nullptr);

  // What register_family refuses, naming it; and a registration after the registry was read.
  FamilyInfo bad = f;
  bad.name = "Example-Scale";
  CHECK_THAT(error_of([&] { register_family(bad); }), Catch::Contains("name: expected [a-z0-9_]+, got 'Example-Scale'"));
  bad.name = "example_scale_2";
  bad.generate = nullptr;
  CHECK_THAT(error_of([&] { register_family(bad); }), Catch::Contains("example_scale_2: expected generate"));
  bad = f;
  bad.name = "example_scale_2";
  bad.tp_splits = {"n"};
  CHECK_THAT(error_of([&] { register_family(bad); }), Catch::Contains("\"none\" among tp_splits"));
  bad.tp_splits.clear();
  CHECK_THAT(error_of([&] { register_family(bad); }), Catch::Contains("the registry has been read already"));
  CHECK_THROWS_AS(family("example_scale_2"), Error);
}

TEST_CASE("example family: one problem schema for JSON, presets and the C API", "[example]") {
  const FamilyInfo& f = family(kName);
  CHECK(f.problem_from_json(R"({"cols": 4096, "dtype": "bf16"})") == "c4096.bf16");
  CHECK(f.problem_from_json(R"({"cols": 8})") == "c8.f32");
  CHECK(canonical_problem_json(f, R"({"dtype": "bf16", "cols": 8})") == R"({"cols":8,"dtype":"bf16"})");
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"cols": 0})"); }),
             Catch::Contains("problem JSON: cols: expected a positive integer, got 0"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"cols": 8, "dtype": "fp16"})"); }),
             Catch::Contains(R"(dtype: expected one of "f32", "bf16", got "fp16")"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"colz": 8})"); }),
             Catch::Contains("colz: unknown field (expected one of cols, dtype)"));
  CHECK_THAT(error_of([&] { f.problem_from_json("{}"); }), Catch::Contains("cols: required field missing"));
  CHECK_THAT(error_of([&] { f.problem_from_json(R"({"cols": 2000000})"); }), Catch::Contains("cols: expected 1..1048576"));
  CHECK(f.canonical_problem("c16.bf16") == "c16.bf16");
  CHECK_THAT(error_of([&] { f.canonical_problem("c16.fp8"); }), Catch::Contains("problem key"));

  // The C API builds keys through the same schema (what Python's ktune.problem_key calls).
  const char* key = nullptr;
  REQUIRE(ktune_problem_key(kName, R"({"cols": 64})", &key) == KTUNE_OK);
  CHECK(std::string(key) == "c64.f32");
  CHECK(ktune_problem_key(kName, R"({"cols": -1})", &key) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("cols: expected a positive integer, got -1"));

  // Presets: the schema names the member by its preset path; the family's tuning dim gives the buckets.
  const autotune::Preset p = autotune::parse_preset(kPreset, "test preset");
  REQUIRE(p.ops.size() == 1);
  CHECK(p.ops[0].problem_json == R"({"cols":256,"dtype":"bf16"})");
  CHECK(p.ops[0].tp_split.empty());
  const auto plan = autotune::make_plan(p, {"sm_90a"});
  REQUIRE(plan.size() == 3);  // m1, m2, m4
  CHECK(plan[2].item_key == R"(sm_90a/example_scale/{"cols":256,"dtype":"bf16"}|m4)");
  CHECK(autotune::item_kv_tokens(plan[2]) == 4);  // the family's work_tokens: rows
  std::string bad = kPreset;
  bad.replace(bad.find("\"cols\": 256"), 11, "\"cols\": \"x\"");
  CHECK_THAT(error_of([&] { autotune::parse_preset(bad, "test preset"); }),
             Catch::Contains("test preset: ops[0].problem.cols: expected a positive integer, got \"x\""));
  // No shard rule: tensor parallelism leaves the problem as it is.
  CHECK(autotune::parse_preset(kPreset, "test preset", 2).ops[0].problem_json == R"({"cols":256,"dtype":"bf16"})");
  // Overrides that name other families' members leave this family alone.
  const autotune::Preset o = autotune::with_overrides(p, std::string("fp8"), std::nullopt, std::nullopt, 3);
  CHECK(o.ops[0].problem_json == R"({"cols":256,"dtype":"bf16"})");
  CHECK(autotune::make_plan(o, {"sm_90a"}).size() == 3);  // tokens = batch x (3 + 1): m4 .. m16
}

TEST_CASE("example family: compiles for sm_90a through NVRTC into the cache, then hits it", "[example][compile]") {
  KTUNE_REQUIRE_NVRTC();
  test::TempDir dir;
  const FamilyInfo& f = family(kName);
  const Arch arch = Arch::parse("sm_90a");
  const std::string key = f.problem_from_json(R"({"cols": 4096, "dtype": "bf16"})");
  const std::vector<std::string> space = f.search_space(key, arch, DeviceLimits{});
  REQUIRE(space.size() == 12);
  const std::string def = f.default_config(key, arch);
  CHECK(def == "t256.v1");
  {
    Runtime rt(in(dir));
    const EnsureResult r = rt.ensure_binary(f.generate(key, def, arch), arch);
    CHECK(r.compiled);
    CHECK(r.not_stored.empty());
    CHECK_THAT(r.name, Catch::Contains("example_scale"));
  }
  Runtime again(in(dir, false));  // KTUNE_JIT=0: what is cached loads, what is not is refused
  CHECK_FALSE(again.ensure_binary(f.generate(key, def, arch), arch).compiled);
  CHECK(again.stats().compiles == 0);
  const std::string other = space.back();
  CHECK_THROWS_WITH(again.ensure_binary(f.generate(key, other, arch), arch), Catch::Contains("KTUNE_JIT=0 forbids compiling"));
  // Every candidate compiles (what a GPU tuning of this problem will time), the default once more a cache hit.
  std::vector<autotune::CompileJob> jobs;
  for (const auto& c : space) jobs.push_back({kName, key, c, arch});
  Runtime rt(in(dir));
  const auto results = autotune::compile_all(rt, jobs, 2);
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(space[i] << ": " << results[i].error);
    CHECK(results[i].error.empty());
    CHECK(results[i].compiled == (space[i] != def));
  }
  // A config the problem cannot take is named before anything compiles.
  CHECK_THAT(error_of([&] { f.generate(f.problem_from_json(R"({"cols": 6})"), "t64.v4", arch); }),
             Catch::Contains("v: expected a divisor of cols (6)"));
}

TEST_CASE("example family: the C op refuses what it cannot run, naming it", "[example][capi]") {
  test::TempDir dir;
  const std::string db = dir.file("c.db");
  ktune_runtime_options ro;
  ktune_runtime_options_default(&ro);
  ro.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&ro, &rt) == KTUNE_OK);
  ktune_op* op = nullptr;
  CHECK(ktune_op_prepare(rt, kName, R"({"cols": 0})", &op) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("cols: expected a positive integer"));
  CHECK(op == nullptr);
  REQUIRE(ktune_op_prepare(rt, kName, R"({"cols": 64})", &op) == KTUNE_OK);
  example::CArgs a = example::c_args_default();
  CHECK(a.family_id == ktune_family_id(kName));
  ktune_xqa_args other;
  ktune_xqa_args_default(&other);
  CHECK(ktune_op_run(op, &other, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("args.family_id") && Catch::Contains(kName));
  a.struct_size = 8;
  CHECK(ktune_op_run(op, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("args.struct_size"));
  a = example::c_args_default();
  a.rows = 4;
  CHECK(ktune_op_run(op, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);  // before any driver call
  CHECK_THAT(ktune_last_error(), Catch::Contains("x: expected a device pointer, got null"));
  a.rows = -1;
  CHECK(ktune_op_run(op, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("rows:"));
  a = example::c_args_default();
  a.rows = 1000, a.config = "t128.v2";
  const char* plan = nullptr;
  REQUIRE(ktune_op_plan(op, &a, &plan) == KTUNE_OK);  // a forced config plans without a GPU
  CHECK(std::string(plan) == R"({"config":"t128.v2","source":"forced","num_splits":1,"workspace_bytes":0,"tuning_key":"c64.f32|m1024"})");
  a.config = "t128";
  CHECK(ktune_op_plan(op, &a, &plan) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("config: expected a config key t<threads>.v<vec>"));
  // Its kernel does not wait for the kernel before it: programmatic dependent launch is refused, not ignored.
  CHECK(ktune_op_set_pdl(op, 1) == KTUNE_ERROR_UNSUPPORTED);
  CHECK_THAT(ktune_last_error(), Catch::Contains("pdl:"));
  CHECK(ktune_op_set_pdl(op, 0) == KTUNE_OK);
  ktune_op_free(op);
  ktune_runtime_destroy(rt);
}

TEST_CASE("example family on the host CPU: the call, the C op, tune, warmup and replay", "[example][host]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  const FamilyInfo& f = family(kName);
  const example::Problem p = example::Problem::from_key("c256.bf16");

  SECTION("the host call computes alpha * x; the C op on a host-device thread is the same call") {
    Runtime rt(in(dir));
    const std::vector<unsigned char> x = ramp(p, 5);
    std::vector<unsigned char> out(x.size(), 0xEE);
    example::Args a;
    a.x = x.data(), a.out = out.data(), a.rows = 5, a.alpha = -1.5f;
    for (const std::string& config : f.search_space(p.key(), Arch::host_cpu(), DeviceLimits{})) {
      std::fill(out.begin(), out.end(), 0xEE);
      a.config = config.c_str();
      example::scale_host(rt, p, a);
      CHECK(out == expected(p, x, -1.5f));
    }
    a.config = nullptr;
    a.x = nullptr;
    CHECK_THAT(error_of([&] { example::scale_host(rt, p, a); }), Catch::Contains("x: expected a host pointer, got null"));

    ktune_runtime_options ro;
    ktune_runtime_options_default(&ro);
    const std::string db = dir.file("c.db");
    ro.cache_path = db.c_str();
    ktune_runtime* crt = nullptr;
    REQUIRE(ktune_runtime_create(&ro, &crt) == KTUNE_OK);
    ktune_op* op = nullptr;
    REQUIRE(ktune_op_prepare(crt, kName, "c256.bf16", &op) == KTUNE_OK);
    std::vector<unsigned char> via(x.size(), 0xEE);
    example::CArgs c = example::c_args_default();
    c.x = x.data(), c.out = via.data(), c.rows = 5, c.alpha = -1.5f;
    std::thread([&] {
      REQUIRE(ktune_use_device(KTUNE_HOST_DEVICE) == KTUNE_OK);
      CHECK(ktune_op_run(op, &c, nullptr) == KTUNE_OK);
    }).join();
    CHECK(via == expected(p, x, -1.5f));
    ktune_op_free(op);
    ktune_runtime_destroy(crt);
  }

  SECTION("tune stores a row the host call then runs") {
    Runtime rt(in(dir));
    autotune::TuneOptions t;
    t.host = true;
    t.measure = autotune::host_measure_options();
    const autotune::TuneOutcome o = autotune::tune(rt, kName, p.key(), {{"m", 8}}, t);
    CHECK(o.tuning_key == "c256.bf16|m8");
    CHECK(o.candidates.size() == 9);
    const auto space = f.search_space(p.key(), Arch::host_cpu(), DeviceLimits{});
    CHECK(std::find(space.begin(), space.end(), o.winner) != space.end());
    Runtime later(in(dir, false));  // another process on the same cache
    const example::Plan plan = example::scale_host_plan(later, p, 7);
    CHECK(plan.source == "tuned");
    CHECK(plan.config == o.winner);
  }

  SECTION("warmup of a preset tunes every bucket; replay then runs them with 0 compiles and 0 tunings") {
    const autotune::Preset preset = autotune::parse_preset(kPreset, "test preset");
    {
      Runtime rt(in(dir));
      autotune::WarmupOptions w;
      w.arches = {"host"};
      const autotune::WarmupReport r = autotune::warmup(rt, preset, w);
      CHECK(r.failed == 0);
      CHECK(r.compile_failed == 0);
      CHECK(r.tuned == 3);
      for (const auto& item : r.items) CHECK(item.status == "tuned");
      CHECK(autotune::warmup(rt, preset, w).already_done == 3);  // resumable
    }
    Runtime serve(in(dir, false));  // KTUNE_JIT=0
    example::reset_most_workloads_alive();
    const autotune::ReplayReport r = autotune::replay(serve, preset, autotune::WarmupOptions{}.host_max_total_tokens,
                                                      true, "host");
    REQUIRE(r.ops.size() == 3);
    CHECK(example::most_workloads_alive() == 1);  // one op's inputs at a time, not every op's together
    for (const auto& op : r.ops) {
      CHECK(op.family == kName);
      CHECK(op.source == "tuned");
    }
    CHECK(r.ops[0].tuning_key == "c256.bf16|m1");
    CHECK(r.stats.compiles == 0);
    CHECK(r.tunings == 0);
  }
}

namespace {

// One call of `op` on the calling thread's current context, checked against alpha * x; the buffers are freed
// before it returns, so the context can be destroyed after it.
void run_and_check(example::ScaleOp& op, const example::Problem& p) {
  const int64_t rows = 9;
  const std::vector<unsigned char> x = ramp(p, rows);
  test::DeviceBuffer dx(x.size()), dout(x.size());
  dx.upload(x.data(), x.size());
  dout.poison();
  example::Args a;
  a.x = dx.as<void>(), a.out = dout.as<void>(), a.rows = rows, a.alpha = -1.25f;
  op.run(a, nullptr);
  test::sync();
  CHECK(dout.download<unsigned char>(x.size()) == expected(p, x, -1.25f));
}

}  // namespace

// A destroyed context takes its modules with it, and the driver may hand its handle value to the next context
// it creates: the runtime's module table and a prepared op's plans must not serve the old context's kernels
// there (a stale CUfunction launched on the new context). Each context's first call loads the module afresh.
TEST_CASE("example family on the GPU: a context created after another was destroyed gets its own modules",
          "[example][gpu]") {
  KTUNE_REQUIRE_GPU();
  const test::ContextLifecycle& cc = test::context_lifecycle();
  const detail::DriverApi& cu = detail::driver();
  test::TempDir dir;
  Runtime rt(in(dir));
  const example::Problem p = example::Problem::from_key("c4096.bf16");
  example::ScaleOp op = example::prepare(rt, p);
  CUdevice dev = 0;
  CU_CHECK(cu.cuCtxGetDevice(&dev));
  std::vector<CUcontext> handles;
  for (int round = 0; round < 3; ++round) {
    CUcontext ctx = nullptr;
    CU_CHECK(cc.create(&ctx, nullptr, 0, dev));  // current on this thread
    handles.push_back(ctx);
    INFO("context " << round);
    run_and_check(op, p);
    run_and_check(op, p);  // the memoized plan on this context
    CU_CHECK(cc.destroy(ctx));
  }
  const bool reused = handles[1] == handles[0] || handles[2] == handles[1];
  WARN("a new context reused the destroyed one's handle value: " << (reused ? "yes" : "no"));
  CHECK(rt.stats().loads == 3);
  use_device(0);
  run_and_check(op, p);
  CHECK(rt.stats().loads == 4);
}

// A primary context reset (cudaDeviceReset in the runtime API) keeps the context's handle and drops its modules.
// Hidden (run in a process of its own by bench/run_h200.sh): the reset would also drop every other test's
// allocations on the primary context.
TEST_CASE("example family on the GPU: a primary context reset drops the prepared op's modules, not the op",
          "[.][primary_reset]") {
  KTUNE_REQUIRE_GPU();
  const detail::DriverApi& cu = detail::driver();
  test::TempDir dir;
  Runtime rt(in(dir));
  const example::Problem p = example::Problem::from_key("c4096.bf16");
  example::ScaleOp op = example::prepare(rt, p);
  run_and_check(op, p);
  CUcontext before = nullptr;
  CUdevice dev = 0;
  CU_CHECK(cu.cuCtxGetCurrent(&before));
  CU_CHECK(cu.cuCtxGetDevice(&dev));
  CU_CHECK(test::context_lifecycle().primary_reset(dev));
  use_device(0);  // retains the primary context again and makes it current
  CUcontext after = nullptr;
  CU_CHECK(cu.cuCtxGetCurrent(&after));
  WARN("the primary context kept its handle across the reset: " << (before == after ? "yes" : "no"));
  run_and_check(op, p);
  run_and_check(op, p);
  CHECK(rt.stats().loads == 2);
}

TEST_CASE("example family on the GPU: the op matches alpha * x, tune and replay", "[example][gpu]") {
  KTUNE_REQUIRE_GPU();
  test::TempDir dir;
  Runtime rt(in(dir));
  const FamilyInfo& f = family(kName);
  for (const char* key : {"c4096.f32", "c4096.bf16", "c6.bf16"}) {
    const example::Problem p = example::Problem::from_key(key);
    const int64_t rows = 33;
    const std::vector<unsigned char> x = ramp(p, rows);
    test::DeviceBuffer dx(x.size()), dout(x.size());
    dx.upload(x.data(), x.size());
    example::ScaleOp op = example::prepare(rt, p);
    example::Args a;
    a.x = dx.as<void>(), a.out = dout.as<void>(), a.rows = rows, a.alpha = 0.75f;
    for (const std::string& config : f.search_space(key, rt.current_arch(), DeviceLimits{})) {
      INFO(key << " " << config);
      dout.poison();
      a.config = config.c_str();
      op.run(a, nullptr);
      test::sync();
      CHECK(dout.download<unsigned char>(x.size()) == expected(p, x, 0.75f));
    }
    a.config = nullptr;
    CHECK(op.plan(a).source == "default");
  }
  const example::Problem p = example::Problem::from_key("c4096.bf16");
  const autotune::TuneOutcome o = autotune::tune(rt, kName, p.key(), {{"m", 64}}, autotune::TuneOptions{});
  CHECK(example::scale_plan(rt, p, 40).config == o.winner);
  CHECK(example::scale_plan(rt, p, 40).source == "tuned");
  const autotune::Preset preset = autotune::parse_preset(kPreset, "test preset");
  autotune::WarmupOptions w;
  const autotune::WarmupReport wr = autotune::warmup(rt, preset, w);
  CHECK(wr.failed == 0);
  CHECK(wr.tuned + wr.already_done == 3);
  Runtime serve(in(dir, false));
  example::reset_most_workloads_alive();
  const autotune::ReplayReport r = autotune::replay(serve, preset, w.max_total_tokens, true);
  REQUIRE(r.ops.size() == 3);
  CHECK(example::most_workloads_alive() == 1);  // one op's device inputs at a time
  for (const auto& op : r.ops) CHECK(op.source == "tuned");
  CHECK(r.stats.compiles == 0);
}
