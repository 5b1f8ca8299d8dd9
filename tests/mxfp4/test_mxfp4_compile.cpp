// mxfp4_gemm compiles to CUBIN with NVRTC for sm_90a (the measured path) and, compile-only, sm_80 / sm_89 /
// sm_100a / sm_120a (the same mma.sync kernel): bf16 dense and grouped defaults on each, fp16 dense on sm_90a;
// and the native block-scaled MMA configs (".mx": mma.sync kind::mxf8f6f4, e2m1 x e4m3) for sm_120a and (".tc":
// tcgen05.mma kind::mxf8f6f4 from shared memory, e4m3 x e4m3) for sm_100a, never run here. No GPU needed.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

TEST_CASE("mxfp4_gemm compiles for sm_80, sm_89, sm_90a, sm_100a and sm_120a", "[mxfp4][compile]") {
  KTUNE_REQUIRE_NVRTC();
  const FamilyInfo& fam = family("mxfp4_gemm");
  struct Job {
    std::string problem, config;
    Arch arch;
  };
  std::vector<Job> jobs;
  const std::string dense = fam.problem_from_json(R"({"n":8192,"k":8192})");
  const std::string moe = fam.problem_from_json(R"({"n":5760,"k":2880,"num_experts":128,"top_k":4})");
  const std::string fp16 = fam.problem_from_json(R"({"n":2880,"k":2880,"a_dtype":"fp16"})");
  for (const char* a : {"sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120a"}) {
    const Arch arch = Arch::parse(a);
    jobs.push_back({dense, fam.default_config(dense, arch), arch});
    jobs.push_back({moe, fam.default_config(moe, arch), arch});
  }
  jobs.push_back({fp16, "bm32.tn2.wn4.wk1.s3.d2", Arch::parse("sm_90a")});   // fp16: per-block fp32 scaling
  jobs.push_back({dense, "bm64.tn2.wn4.wk1.s4.d2", Arch::parse("sm_90a")});  // the large-M tile
  // sm_120a native block-scaled MMA: few tokens (activations from global), the smem ring, grouped, fp16, bm64
  for (const auto& [prob, cfg] : std::vector<std::pair<std::string, const char*>>{
           {dense, "bm8.tn2.wn1.wk8.s0.d2.mx"},
           {dense, "bm16.tn4.wn1.wk8.s3.d2.mx"},
           {moe, "bm16.tn2.wn4.wk1.s3.d2.mx"},
           {fp16, "bm32.tn2.wn4.wk1.s3.d2.mx"},
           {dense, "bm64.tn2.wn4.wk1.s4.d2.mx"}})
    jobs.push_back({prob, cfg, Arch::parse("sm_120a")});
  // sm_100a tensor-memory block-scaled MMA (tcgen05): every tile width, grouped, fp16 activations / output
  for (const auto& [prob, cfg] : std::vector<std::pair<std::string, const char*>>{
           {dense, "bm16.tn2.wn4.wk1.s2.d1.tc"},
           {dense, "bm32.tn2.wn4.wk1.s2.d1.tc"},
           {dense, "bm64.tn2.wn4.wk1.s2.d1.tc"},
           {dense, "bm128.tn2.wn4.wk1.s2.d1.tc"},
           {moe, "bm16.tn2.wn4.wk1.s2.d1.tc"},
           {fp16, "bm32.tn2.wn4.wk1.s2.d1.tc"}})
    jobs.push_back({prob, cfg, Arch::parse("sm_100a")});
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("m.db");
  Runtime rt(o);
  std::vector<std::string> errors(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        rt.ensure_binary(fam.generate(jobs[i].problem, jobs[i].config, jobs[i].arch), jobs[i].arch);
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
}
