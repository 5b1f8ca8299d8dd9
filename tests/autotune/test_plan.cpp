#include <catch2/catch.hpp>

#include <set>

#include "autotune/plan.hpp"
#include "autotune/presets.hpp"
#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm.hpp"

using namespace ktune::autotune;

namespace {

std::vector<std::string> keys(const std::vector<WorkItem>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.item_key);
  return out;
}

std::string fmt_bucket(int64_t m) { return "|m" + std::to_string(m); }

}  // namespace

TEST_CASE("autotune plan: one item per op and bucket, with a stable readable key", "[autotune]") {
  Preset p = load_preset("llama-3.1-8b");
  std::vector<WorkItem> plan = make_plan(p, {"sm_90a"});
  // batch 1..256 (9 buckets) x seq_len 512..131072 (9 buckets)
  REQUIRE(plan.size() == 81);
  CHECK(plan[0].arch == "sm_90a");
  CHECK(plan[0].family == "xqa_decode");
  CHECK(plan[0].labels == std::vector<std::string>{"attn"});
  REQUIRE(plan[0].buckets.size() == 2);
  CHECK(plan[0].buckets[0].dim == "batch");
  CHECK(plan[0].buckets[0].value == 1);
  CHECK(plan[0].buckets[1].value == 512);
  CHECK(plan[0].item_key ==
        R"(sm_90a/xqa_decode/{"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"layout":"hnd","q_dtype":"bf16","kv_dtype":"bf16","out_dtype":"bf16"}|b1.l512)");
  CHECK(plan[1].buckets[1].value == 1024);  // the last dim innermost
  CHECK(plan.back().buckets[0].value == 256);
  CHECK(plan.back().buckets[1].value == 131072);

  std::vector<std::string> k = keys(plan);
  CHECK(std::set<std::string>(k.begin(), k.end()).size() == k.size());
  // Stable: another load and plan (as a resumed warmup in a new process would do) gives the same keys.
  CHECK(keys(make_plan(load_preset("llama-3.1-8b"), {"sm_90a"})) == k);
}

TEST_CASE("autotune plan: duplicates are merged", "[autotune]") {
  Preset p = parse_preset(R"({"name": "twins",
    "buckets": {"batch": {"max": 4}, "seq_len": {"min": 1024, "max": 2048}},
    "ops": [
      {"label": "attn.local", "family": "xqa_decode", "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8}},
      {"label": "attn.global", "family": "xqa_decode", "problem": {"num_kv_heads": 8, "num_q_heads": 32, "head_dim": 128}},
      {"label": "attn.sink", "family": "xqa_decode", "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "sinks": true}}
    ]})", "test");
  std::vector<WorkItem> plan = make_plan(p, {"sm_90a", "sm_120a", "sm_90a"});
  // 2 distinct problems x 3 batch x 2 seq_len buckets x 2 distinct arches
  REQUIRE(plan.size() == 24);
  CHECK(plan[0].labels == std::vector<std::string>{"attn.local", "attn.global"});
  CHECK(plan[6].labels == std::vector<std::string>{"attn.sink"});
  CHECK(plan[12].arch == "sm_120a");
  std::vector<std::string> k = keys(plan);
  CHECK(std::set<std::string>(k.begin(), k.end()).size() == 24);
}

TEST_CASE("autotune plan: ops limited to some arches, GEMM token buckets", "[autotune]") {
  Preset ds = load_preset("deepseek-v3.2");
  std::vector<WorkItem> hopper = make_plan(ds, {"sm_90a"});
  REQUIRE(hopper.size() == 9);  // batch buckets only: the work is bounded by topk
  for (const auto& i : hopper) CHECK(i.labels == std::vector<std::string>{"attn.sparse"});
  CHECK(hopper[3].item_key.find("|b8") != std::string::npos);
  std::vector<WorkItem> sm120 = make_plan(ds, {"sm_120a"});
  REQUIRE(sm120.size() == 9);
  CHECK(sm120[0].labels == std::vector<std::string>{"attn.sparse.sm120"});
  CHECK(make_plan(ds, {"sm_89"}).empty());
  // An op's arches name GPUs: "sm_120" lists the same GPU as the "sm_120a" a warmup compiles for.
  Preset plain = ds;
  for (auto& op : plain.ops)
    for (auto& a : op.arches)
      if (a == "sm_120a") a = "sm_120";
  REQUIRE(make_plan(plain, {"sm_120a"}).size() == 9);
  CHECK(make_plan(plain, {"sm_120a"})[0].labels == std::vector<std::string>{"attn.sparse.sm120"});
  // the host CPU tunes the 64-page op; its work is batch x topk KV tokens (what the host cap bounds)
  std::vector<WorkItem> host = make_plan(ds, {"host"});
  REQUIRE(host.size() == 9);
  CHECK(host[0].labels == std::vector<std::string>{"attn.sparse"});
  CHECK(item_kv_tokens(host[0]) == 2048);
  CHECK(item_kv_tokens(host[3]) == 8 * 2048);

  Preset oss = with_overrides(load_preset("gpt-oss-120b"), std::nullopt, 64, 4096, 3);
  std::vector<WorkItem> plan = make_plan(oss, {"sm_90a"});
  // attention: 2 ops x 7 batch x 4 seq_len buckets; GEMMs: 2 ops x tokens 4..256 (7 buckets)
  REQUIRE(plan.size() == 2 * 7 * 4 + 2 * 7);
  const WorkItem& gemm = plan[56];
  CHECK(gemm.family == "mxfp4_gemm");
  REQUIRE(gemm.buckets.size() == 1);
  CHECK(gemm.buckets[0].dim == "tokens");
  CHECK(gemm.buckets[0].value == 4);
  CHECK(plan[62].buckets[0].value == 256);
  CHECK(plan[62].item_key.substr(plan[62].item_key.size() - 5) == "|m256");
}

TEST_CASE("autotune plan: GEMM token buckets are the ones a launch looks up, whatever spec_tokens", "[autotune]") {
  // 2 draft tokens: a batch of b requests is 3b GEMM tokens; the launch looks up their power of two.
  Preset oss = with_overrides(load_preset("gpt-oss-120b"), std::nullopt, 64, 4096, 2);
  std::set<std::string> planned;
  for (const WorkItem& i : make_plan(oss, {"sm_90a"}))
    if (i.family == "mxfp4_gemm") planned.insert(i.item_key.substr(i.item_key.rfind('|')));
  CHECK(planned == std::set<std::string>{"|m4", "|m8", "|m16", "|m32", "|m64", "|m128", "|m256"});
  const ktune::mxfp4::Problem moe = ktune::mxfp4::Problem::from_key("n5760.k2880.e128.top4.bf16-bf16");
  for (int batch = 1; batch <= 64; ++batch)
    CHECK(planned.count(fmt_bucket(ktune::mxfp4_gemm_bucket(moe, int64_t{batch} * 3 * moe.top_k))));

  Preset huge = with_overrides(load_preset("gpt-oss-120b"), std::nullopt, 1 << 30, 4096, 1);
  CHECK_THROWS_WITH(make_plan(huge, {"sm_90a"}),
                    Catch::Contains("buckets.batch.max x (spec_tokens + 1) = 1073741824 x 2: expected GEMM rows"));
}

TEST_CASE("autotune plan: resuming skips done keys and keeps the order", "[autotune]") {
  Preset p = with_overrides(load_preset("qwen3-32b"), std::nullopt, 8, 2048, std::nullopt);
  std::vector<WorkItem> plan = make_plan(p, {"sm_90a"});
  REQUIRE(plan.size() == 4 * 3);
  std::set<std::string> done = {plan[0].item_key, plan[5].item_key};
  std::vector<std::string> rest;
  for (const auto& i : make_plan(p, {"sm_90a"}))
    if (!done.count(i.item_key)) rest.push_back(i.item_key);
  CHECK(rest.size() == 10);
  CHECK(rest[0] == plan[1].item_key);
  CHECK(rest[4] == plan[6].item_key);
}

TEST_CASE("autotune plan: bad arch lists are errors", "[autotune]") {
  Preset p = load_preset("llama-3.1-8b");
  CHECK_THROWS_WITH(make_plan(p, {}), Catch::Contains("arches: expected at least one arch"));
  CHECK_THROWS_WITH(make_plan(p, {"sm_90a", "hopper"}), Catch::Contains("arches[1]"));
}
