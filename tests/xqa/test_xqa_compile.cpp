// Every xqa_decode specialization class compiles to CUBIN for the CI arches with NVRTC, no GPU needed.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

TEST_CASE("xqa_decode compiles for sm_80, sm_89, sm_90a, sm_100a and sm_120a, with its shared modules", "[xqa][compile]") {
  KTUNE_REQUIRE_NVRTC();
  const FamilyInfo& fam = family("xqa_decode");
  // One problem per feature axis (head dims, GQA ratios, layouts, page sizes, KV/Q/out dtypes, spec-decode
  // masks, sinks, window, softcap, LSE, checked), each with its default config.
  const char* problems[] = {
      R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32})",
      R"({"head_dim":64,"num_q_heads":64,"num_kv_heads":8,"page_size":16,"layout":"nhd","sinks":true,"sliding_window":true})",
      R"({"head_dim":256,"num_q_heads":16,"num_kv_heads":1,"page_size":64,"q_dtype":"fp16","kv_dtype":"fp16"})",
      R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":128,"kv_dtype":"fp8","max_q_len":4,"mask":"causal"})",
      R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":32,"page_size":32,"max_q_len":16,"mask":"explicit","lse":true})",
      R"({"head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":32,"kv_dtype":"fp8","q_dtype":"fp8","out_dtype":"fp8","softcap":true})",
      R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"checked":true})",  // device bounds checks
      // draft trees: two mask words a row (q33..64), 1024 rows a kv head (q64 x group 16) over row groups
      R"({"head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":32,"max_q_len":64,"mask":"explicit","lse":true})",
      R"({"head_dim":256,"num_q_heads":16,"num_kv_heads":1,"page_size":64,"kv_dtype":"fp8","max_q_len":64,"mask":"causal","sinks":true,"sliding_window":true})",
  };
  const char* arches[] = {"sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120a"};
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("x.db");
  Runtime rt(o);
  struct Job {
    std::string problem, config;
    Arch arch;
  };
  // Each problem's default config and its shared module (the combine and the helpers).
  std::vector<Job> jobs;
  for (const char* p : problems)
    for (const char* a : arches) {
      const std::string key = fam.problem_from_json(p);
      const Arch arch = Arch::parse(a);
      jobs.push_back({key, fam.default_config(key, arch), arch});
      const std::vector<std::string> shared = shared_module_configs(fam, key, arch);
      REQUIRE(shared == std::vector<std::string>{kSharedConfig});
      jobs.push_back({key, shared[0], arch});
    }
  std::vector<std::string> errors(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        const Job& j = jobs[i];
        rt.ensure_binary(fam.generate(j.problem, j.config, j.arch), j.arch);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    INFO(jobs[i].problem << " / " << jobs[i].config << " on " << jobs[i].arch.str());
    CHECK(errors[i].empty());
  }
  CHECK(rt.stats().compiles == static_cast<int64_t>(jobs.size()));
}

TEST_CASE("xqa_decode wgmma configs (.wg) compile for sm_90a", "[xqa][compile]") {
  KTUNE_REQUIRE_NVRTC();
  const FamilyInfo& fam = family("xqa_decode");
  // 64 query rows a CTA: q16 x group 4 (bf16, causal), q8 x group 8 (fp16, head_dim 64, explicit mask with every
  // flag), and q16 x group 8 over two row groups (.m4, checked); 128 rows a CTA on two warpgroups (q16 x group 8).
  const std::pair<const char*, const char*> jobs[] = {
      {R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"max_q_len":16,"mask":"causal"})",
       "t32.s2.w4.wg"},
      {R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":16,"max_q_len":16,"mask":"causal"})",
       "t64.s3.w4.wg"},
      {R"({"head_dim":64,"num_q_heads":64,"num_kv_heads":8,"page_size":128,"layout":"nhd","q_dtype":"fp16","kv_dtype":"fp16","out_dtype":"fp16","max_q_len":8,"mask":"explicit","sinks":true,"sliding_window":true,"softcap":true,"lse":true})",
       "t32.s3.w4.wg"},
      {R"({"head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":64,"max_q_len":16,"mask":"causal","checked":true})",
       "t64.s2.w4.m4.wg"},
      {R"({"head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":32,"max_q_len":16,"mask":"causal"})",
       "t32.s2.w8.wg"},
  };
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("x.db");
  Runtime rt(o);
  const Arch arch = Arch::parse("sm_90a");
  for (const auto& [json, config] : jobs) {
    const std::string problem = fam.problem_from_json(json);
    INFO(problem << " / " << config);
    CHECK_NOTHROW(rt.ensure_binary(fam.generate(problem, config, arch), arch));
  }
  CHECK(rt.stats().compiles == 5);
}
