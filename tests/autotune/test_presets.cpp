#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "autotune/presets.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "support/temp_dir.hpp"

using namespace ktune::autotune;
using ktune::cache::Json;

namespace {

const PresetOp& op(const Preset& p, const std::string& label) {
  for (const auto& o : p.ops)
    if (o.label == label) return o;
  FAIL("preset " << p.name << " has no op " << label);
  throw;
}

Json problem(const Preset& p, const std::string& label) { return Json::parse(op(p, label).problem_json); }

std::vector<std::string> member_names(const Json& j) {
  std::vector<std::string> out;
  for (const auto& m : j.members()) out.push_back(m.first);
  return out;
}

}  // namespace

TEST_CASE("autotune presets: the required models are embedded and all of them validate", "[autotune]") {
  std::vector<std::string> names = preset_names();
  for (const char* required : {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-70b-tp2", "llama-3.1-70b-tp4",
                               "llama-3.1-70b-tp8", "gpt-oss-120b", "deepseek-v3.2", "qwen3-32b"})
    CHECK(std::find(names.begin(), names.end(), required) != names.end());
  for (const auto& name : names) {
    INFO(name);
    Preset p = load_preset(name);
    CHECK(p.name == name);
    CHECK(p.origin == "preset " + name);
    CHECK_FALSE(p.description.empty());
    REQUIRE_FALSE(p.ops.empty());
    CHECK(p.batch.dim == "batch");
    CHECK(p.seq_len.dim == "seq_len");
    CHECK(p.batch.min >= 1);
    CHECK(p.batch.max >= p.batch.min);
    CHECK(p.seq_len.max >= p.seq_len.min);
    std::set<std::string> labels;
    for (const auto& o : p.ops) {
      CHECK(labels.insert(o.label).second);
      Json j = Json::parse(o.problem_json);
      CHECK(j.is_object());
      CHECK(j.dump() == o.problem_json);  // compact
    }
  }
}

TEST_CASE("autotune presets: model dimensions are the published ones", "[autotune]") {
  Preset l8 = load_preset("llama-3.1-8b");
  Json a = problem(l8, "attn");
  CHECK(a.at("head_dim").as_int() == 128);
  CHECK(a.at("num_q_heads").as_int() == 32);
  CHECK(a.at("num_kv_heads").as_int() == 8);
  CHECK(l8.seq_len.max == 131072);
  CHECK(l8.tp == 1);

  Json l70 = problem(load_preset("llama-3.1-70b"), "attn");
  CHECK(l70.at("num_q_heads").as_int() == 64);
  CHECK(l70.at("num_kv_heads").as_int() == 8);
  Json tp2 = problem(load_preset("llama-3.1-70b-tp2"), "attn");
  CHECK(tp2.at("num_q_heads").as_int() == 32);
  CHECK(tp2.at("num_kv_heads").as_int() == 4);
  Preset p8 = load_preset("llama-3.1-70b-tp8");
  CHECK(p8.tp == 8);
  Json tp8 = problem(p8, "attn");
  CHECK(tp8.at("num_q_heads").as_int() == 8);
  CHECK(tp8.at("num_kv_heads").as_int() == 1);
  // Past the KV head count each GPU keeps one replicated KV head.
  Json tp16 = problem(load_preset("llama-3.1-70b", 16), "attn");
  CHECK(tp16.at("num_q_heads").as_int() == 4);
  CHECK(tp16.at("num_kv_heads").as_int() == 1);

  Preset oss = load_preset("gpt-oss-120b");
  Json full = problem(oss, "attn.full"), sliding = problem(oss, "attn.sliding");
  for (const Json* j : {&full, &sliding}) {
    CHECK(j->at("head_dim").as_int() == 64);
    CHECK(j->at("num_q_heads").as_int() == 64);
    CHECK(j->at("num_kv_heads").as_int() == 8);
    CHECK(j->at("sinks").as_bool());
  }
  CHECK_FALSE(full.at("sliding_window").as_bool());
  CHECK(sliding.at("sliding_window").as_bool());
  Json gate_up = problem(oss, "moe.gate_up"), down = problem(oss, "moe.down");
  CHECK(op(oss, "moe.gate_up").family == "mxfp4_gemm");
  CHECK(gate_up.at("n").as_int() == 2 * 2880);
  CHECK(gate_up.at("k").as_int() == 2880);
  CHECK(down.at("n").as_int() == 2880);
  CHECK(down.at("k").as_int() == 2880);
  CHECK(gate_up.at("num_experts").as_int() == 128);
  CHECK(gate_up.at("top_k").as_int() == 4);
  // Tensor parallelism splits the MoE GEMMs column- and row-wise.
  Preset oss2 = load_preset("gpt-oss-120b-tp2");
  CHECK(problem(oss2, "moe.gate_up").at("n").as_int() == 2880);
  CHECK(problem(oss2, "moe.gate_up").at("k").as_int() == 2880);
  CHECK(problem(oss2, "moe.down").at("n").as_int() == 2880);
  CHECK(problem(oss2, "moe.down").at("k").as_int() == 1440);
  CHECK(problem(oss2, "attn.full").at("num_q_heads").as_int() == 32);

  Preset ds = load_preset("deepseek-v3.2");
  for (const char* label : {"attn.sparse", "attn.sparse.sm120"}) {
    Json m = problem(ds, label);
    CHECK(op(ds, label).family == "sparse_mla_decode");
    CHECK(m.at("num_heads").as_int() == 128);
    CHECK(m.at("kv_lora_rank").as_int() == 512);
    CHECK(m.at("rope_dim").as_int() == 64);
    CHECK(m.at("topk").as_int() == 2048);
    CHECK(m.at("kv_dtype").as_string() == "fp8_ds_mla");
  }
  CHECK(problem(ds, "attn.sparse.sm120").at("page_size").as_int() == 256);
  CHECK(op(ds, "attn.sparse.sm120").arches == std::vector<std::string>{"sm_120a", "sm_121a"});

  Preset qwen = load_preset("qwen3-32b");
  Json q = problem(qwen, "attn");
  CHECK(q.at("head_dim").as_int() == 128);
  CHECK(q.at("num_q_heads").as_int() == 64);
  CHECK(q.at("num_kv_heads").as_int() == 8);
  CHECK(qwen.seq_len.max == 40960);
}

TEST_CASE("autotune presets: unknown names and unreadable files are not_found", "[autotune]") {
  try {
    load_preset("llama-4");
    FAIL("no error");
  } catch (const ktune::Error& e) {
    CHECK(e.status() == ktune::Status::not_found);
    CHECK_THAT(e.what(), Catch::Contains("unknown preset 'llama-4'"));
    CHECK_THAT(e.what(), Catch::Contains("qwen3-32b"));
  }
  try {
    load_preset("/nonexistent/model.json");
    FAIL("no error");
  } catch (const ktune::Error& e) {
    CHECK(e.status() == ktune::Status::not_found);
    CHECK_THAT(e.what(), Catch::Contains("/nonexistent/model.json"));
  }
  CHECK_THROWS_AS(load_preset("llama-4-tp2"), ktune::Error);
  CHECK_THROWS_AS(load_preset("llama-3.1-70b-tp0"), ktune::Error);
}

TEST_CASE("autotune presets: a custom model loads from a file in the same format", "[autotune]") {
  ktune::test::TempDir dir;
  std::string path = dir.file("my-model.json");
  std::ofstream(path) << R"({
    "name": "my-model", "tp": 2, "spec_tokens": 2,
    "buckets": {"batch": {"max": 32}, "seq_len": {"min": 1024, "max": 8192}},
    "ops": [{"label": "attn", "family": "xqa_decode",
             "problem": {"sinks": false, "num_kv_heads": 4, "head_dim": 128, "num_q_heads": 16}}]
  })";
  Preset p = load_preset(path);
  CHECK(p.name == "my-model");
  CHECK(p.origin == path);
  CHECK(p.tp == 2);
  CHECK(p.spec_tokens == 2);
  CHECK(p.batch.min == 1);
  CHECK(p.batch.max == 32);
  CHECK(p.seq_len.min == 1024);
  // Canonical member order, heads divided by tp, max_q_len and mask from spec_tokens.
  CHECK(p.ops[0].problem_json ==
        R"({"head_dim":128,"num_q_heads":8,"num_kv_heads":2,"max_q_len":3,"mask":"causal","sinks":false})");

  std::ofstream(path) << "{\"name\": \"broken\",";
  CHECK_THROWS_WITH(load_preset(path), Catch::Contains(path + ": (document): not valid JSON"));
}

TEST_CASE("autotune presets: command-line overrides", "[autotune]") {
  Preset base = load_preset("gpt-oss-120b");

  Preset fp8 = with_overrides(base, std::string("fp8"), std::nullopt, std::nullopt, std::nullopt);
  CHECK(problem(fp8, "attn.full").at("kv_dtype").as_string() == "fp8");
  CHECK(problem(fp8, "attn.sliding").at("kv_dtype").as_string() == "fp8");
  CHECK(op(fp8, "moe.down").problem_json == op(base, "moe.down").problem_json);  // GEMMs have no KV
  CHECK(fp8.batch.max == base.batch.max);

  Preset small = with_overrides(base, std::nullopt, 64, 8192, std::nullopt);
  CHECK(small.batch.max == 64);
  CHECK(small.seq_len.max == 8192);
  CHECK(small.seq_len.min == base.seq_len.min);
  CHECK(with_overrides(base, std::nullopt, std::nullopt, 256, std::nullopt).seq_len.min == 256);  // was 512

  Preset spec = with_overrides(base, std::nullopt, std::nullopt, std::nullopt, 3);
  CHECK(spec.spec_tokens == 3);
  Json a = problem(spec, "attn.full");
  CHECK(a.at("max_q_len").as_int() == 4);
  CHECK(a.at("mask").as_string() == "causal");
  std::vector<std::string> order = member_names(a);
  CHECK(std::find(order.begin(), order.end(), "max_q_len") < std::find(order.begin(), order.end(), "sinks"));
  Json back = problem(with_overrides(spec, std::nullopt, std::nullopt, std::nullopt, 0), "attn.full");
  CHECK(back.at("max_q_len").as_int() == 1);
  CHECK(back.at("mask").as_string() == "none");

  Preset ds = with_overrides(load_preset("deepseek-v3.2"), std::string("bf16"), std::nullopt, std::nullopt, 1);
  CHECK(problem(ds, "attn.sparse").at("kv_dtype").as_string() == "fp8_ds_mla");  // model-defined cache format
  CHECK(problem(ds, "attn.sparse").at("max_q_len").as_int() == 2);

  CHECK_THROWS_WITH(with_overrides(base, std::string("int4"), std::nullopt, std::nullopt, std::nullopt),
                    Catch::Contains("kv_dtype: expected one of \"bf16\", \"fp16\", \"fp8\", got \"int4\""));
  CHECK_THROWS_WITH(with_overrides(base, std::nullopt, 0, std::nullopt, std::nullopt),
                    Catch::Contains("max_batch: expected an integer in 1..1073741824"));
  CHECK_THROWS_WITH(with_overrides(base, std::nullopt, std::nullopt, 1073741825, std::nullopt),
                    Catch::Contains("max_seq_len: expected an integer in 1..1073741824"));
  CHECK_THROWS_WITH(with_overrides(base, std::nullopt, std::nullopt, -5, std::nullopt),
                    Catch::Contains("max_seq_len"));
  CHECK_THROWS_WITH(with_overrides(base, std::nullopt, std::nullopt, std::nullopt, -1),
                    Catch::Contains("spec_tokens: expected an integer in 0..255, got -1"));
}
