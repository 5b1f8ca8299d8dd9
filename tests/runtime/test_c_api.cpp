#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <thread>

#include "ktune/ktune.h"
#include "nvrtc_api.hpp"
#include "support/c_runtime.hpp"
#include "support/env_guard.hpp"
#include "support/gpu.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

TEST_CASE("C API reports errors as status + message", "[capi]") {
  ktune::test::TempDir dir;
  std::string db = dir.file("c.db");
  CHECK(ktune_runtime_create(nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("out must not be NULL"));

  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  REQUIRE(rt != nullptr);
  CHECK(std::string(ktune_last_error()).empty());

  CHECK(ktune_compile(rt, "no_such_family", "x", nullptr, "sm_90a", nullptr) == KTUNE_ERROR_NOT_FOUND);
  CHECK_THAT(ktune_last_error(), Catch::Contains("unknown family 'no_such_family'"));
  CHECK(ktune_compile(rt, "xqa_decode", "garbage", nullptr, "sm_90a", nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(ktune_last_error()).size() > 0);
  CHECK(ktune_compile(rt, nullptr, "x", nullptr, "sm_90a", nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("family"));
  CHECK(ktune_compile(rt, "xqa_decode", "x", nullptr, "sm_9z", nullptr) != KTUNE_OK);
  CHECK(ktune_runtime_stats(rt, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);

  ktune_stats s{};
  REQUIRE(ktune_runtime_stats(rt, &s) == KTUNE_OK);
  CHECK(s.compiles == 0);
  CHECK(std::string(ktune_status_name(KTUNE_ERROR_JIT_DISABLED)) == "jit_disabled");
  CHECK(std::string(ktune_version()).size() > 0);
  ktune_runtime_destroy(rt);
}

TEST_CASE("C API default options keep their cache_path after later fills and on other threads", "[capi]") {
  // An engine may fill options on one thread and create the runtime on another, or fill two sets in turn.
  const std::string first = "/tmp/ktune-options-first-" + std::string(64, 'a') + ".db";
  const std::string second = "/tmp/ktune-options-second-" + std::string(64, 'b') + ".db";
  ktune_runtime_options a, b, c;
  {
    ktune::test::EnvGuard cache("KTUNE_CACHE", first.c_str());
    ktune_runtime_options_default(&a);
    setenv("KTUNE_CACHE", second.c_str(), 1);
    ktune_runtime_options_default(&b);
    std::thread([&] { ktune_runtime_options_default(&c); }).join();
  }
  REQUIRE(a.cache_path != nullptr);
  CHECK(std::string(a.cache_path) == first);
  CHECK(std::string(b.cache_path) == second);
  CHECK(std::string(c.cache_path) == second);  // filled on a thread that has exited since
}

TEST_CASE("C warmup with options.device leaves the caller's own context current", "[gpu][capi]") {
  KTUNE_REQUIRE_GPU();
  const ktune::detail::DriverApi& cu = ktune::detail::driver();
  ktune::test::TempDir dir;
  const std::string db = dir.file("w.db");
  std::thread([&] {
    ktune_runtime* rt = ktune::test::c_runtime(db);
    ktune_warmup_options o;
    ktune_warmup_options_default(&o);
    o.preset = "no-such-preset";  // the warmup fails after it made device 0 current
    o.device = 0;
    ktune_warmup_result r;
    CUcontext cur = nullptr;
    CU_CHECK(cu.cuCtxGetCurrent(&cur));
    REQUIRE(cur == nullptr);  // a new thread: no context
    CHECK(ktune_warmup(rt, &o, &r) != KTUNE_OK);
    CU_CHECK(cu.cuCtxGetCurrent(&cur));
    CHECK(cur == nullptr);
    CUcontext own = nullptr;  // an engine's own context, current
    CU_CHECK(ktune::test::context_lifecycle().create(&own, nullptr, 0, 0));
    CHECK(ktune_warmup(rt, &o, &r) != KTUNE_OK);
    CU_CHECK(cu.cuCtxGetCurrent(&cur));
    CHECK(cur == own);
    CHECK(ktune_use_device(KTUNE_HOST_DEVICE) == KTUNE_OK);  // the host CPU as the thread's device
    CHECK(ktune_warmup(rt, &o, &r) != KTUNE_OK);
    CHECK(ktune::host_device_current());
    ktune_runtime_destroy(rt);
    CU_CHECK(ktune::test::context_lifecycle().destroy(own));
  }).join();
}

TEST_CASE("C API with KTUNE_JIT off reports jit_disabled on a miss", "[capi]") {
  KTUNE_REQUIRE_NVRTC();
  ktune::test::TempDir dir;
  std::string db = dir.file("c.db");
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  o.allow_jit = 0;
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  const char* problem = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none";
  ktune_status st = ktune_compile(rt, "xqa_decode", problem, nullptr, "sm_90a", nullptr);
  CHECK(st == KTUNE_ERROR_JIT_DISABLED);
  CHECK_THAT(ktune_last_error(), Catch::Contains("KTUNE_JIT=0"));
  ktune_runtime_destroy(rt);
}

TEST_CASE("C API ktune_compile builds a config and the problem's shared module, then finds both", "[capi]") {
  KTUNE_REQUIRE_NVRTC();
  ktune::test::TempDir dir;
  const std::string db = dir.file("c.db");
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  const char* problem = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none";
  int compiled = -1;
  REQUIRE(ktune_compile(rt, "xqa_decode", problem, nullptr, "sm_90a", &compiled) == KTUNE_OK);
  CHECK(compiled == 1);
  ktune_stats s{};
  REQUIRE(ktune_runtime_stats(rt, &s) == KTUNE_OK);
  CHECK(s.compiles == 2);  // the default config's decode module and the shared combine + helpers module
  REQUIRE(ktune_compile(rt, "xqa_decode", problem, nullptr, "sm_90a", &compiled) == KTUNE_OK);
  CHECK(compiled == 0);
  REQUIRE(ktune_runtime_stats(rt, &s) == KTUNE_OK);
  CHECK(s.compiles == 2);
  ktune_runtime_destroy(rt);

  // On a runtime that cannot store (read-only): the compile happens, but a cache entry is what ktune_compile
  // promises, so it is KTUNE_ERROR_CACHE naming why, in this call and the next (the binary lives in memory).
  o.read_only = 1;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  const char* other = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q2.causal";
  compiled = -1;
  CHECK(ktune_compile(rt, "xqa_decode", other, nullptr, "sm_90a", &compiled) == KTUNE_ERROR_CACHE);
  CHECK_THAT(ktune_last_error(), Catch::Contains("not stored") && Catch::Contains("read-only"));
  CHECK(compiled == 1);
  CHECK(ktune_compile(rt, "xqa_decode", other, nullptr, "sm_90a", &compiled) == KTUNE_ERROR_CACHE);
  CHECK(compiled == 0);
  CHECK(ktune_compile(rt, "xqa_decode", problem, nullptr, "sm_90a", &compiled) == KTUNE_OK);  // stored before
  ktune_runtime_destroy(rt);
  o.read_only = 0;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  CHECK(ktune_compile(rt, "xqa_decode", other, nullptr, "sm_90a", &compiled) == KTUNE_OK);
  CHECK(compiled == 1);  // nothing of it had been stored
  ktune_runtime_destroy(rt);
}

TEST_CASE("C API xqa_decode validates before touching the GPU", "[capi][xqa]") {
  ktune::test::TempDir dir;
  std::string db = dir.file("c.db");
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  ktune_xqa_args a;
  ktune_xqa_args_default(&a);
  CHECK(a.q_len_per_req == 1);
  CHECK(a.window_left == -1);
  CHECK(ktune_xqa_decode(rt, "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_xqa_decode(rt, "not-a-key", &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_xqa_decode(rt, "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("batch: expected 1..65535, got 0"));  // the first bad field, named
  ktune_runtime_destroy(rt);
}

TEST_CASE("C API mxfp4_gemm host calls validate before any compile", "[capi][mxfp4]") {
  ktune::test::TempDir dir;
  std::string db = dir.file("c.db");
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  ktune_mxfp4_args a;
  ktune_mxfp4_args_default(&a);
  CHECK(a.layout_version == ktune_mxfp4_layout_version());
  CHECK(ktune_mxfp4_gemm_host(nullptr, "n100.k96.bf16-bf16", &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_mxfp4_gemm_host(rt, "n100.k96.bf16-bf16", nullptr, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("ktune_mxfp4_gemm_host"));
  // A grouped key through the dense entry point (and back) names problem_key.
  CHECK(ktune_mxfp4_gemm_host(rt, "n100.k96.e4.top2.bf16-bf16", &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("problem_key"));
  CHECK(ktune_mxfp4_grouped_gemm_host(rt, "n100.k96.bf16-bf16", &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("problem_key"));
  // The GPU call's argument check: the first missing field is named (the weight's pointers here).
  CHECK(ktune_mxfp4_gemm_host(rt, "n100.k96.bf16-bf16", &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("weight.packed"));
  ktune_runtime_destroy(rt);
}
