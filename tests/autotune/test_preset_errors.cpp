// Bad preset JSON: every error names the origin and the exact field path.
#include <catch2/catch.hpp>

#include <string>

#include "autotune/presets.hpp"
#include "ktune/error.hpp"

using namespace ktune::autotune;

namespace {

const char* const kAttn =
    R"({"label": "attn", "family": "xqa_decode", "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8}})";
const char* const kGemm =
    R"({"label": "moe.down", "family": "mxfp4_gemm", "tp_split": "k", "problem": {"n": 2880, "k": 2880, "num_experts": 128, "top_k": 4}})";
const char* const kBuckets = R"({"batch": {"min": 1, "max": 64}, "seq_len": {"min": 512, "max": 8192}})";

std::string preset(const std::string& ops, const std::string& buckets = kBuckets, const std::string& extra = "") {
  return R"({"name": "custom", )" + extra + R"("buckets": )" + buckets + R"(, "ops": [)" + ops + "]}";
}

std::string attn_with(const std::string& problem, const std::string& label = "attn") {
  return R"({"label": ")" + label + R"(", "family": "xqa_decode", "problem": )" + problem + "}";
}

void expect_error(const std::string& json, const std::string& message) {
  INFO(json);
  try {
    parse_preset(json, "models/custom.json");
    FAIL("no error; expected " << message);
  } catch (const ktune::Error& e) {
    CHECK(e.status() == ktune::Status::invalid_argument);
    CHECK(e.subsystem() == "presets");
    CHECK_THAT(e.what(), Catch::StartsWith("ktune presets: models/custom.json: "));
    CHECK_THAT(e.what(), Catch::Contains(message));
  }
}

}  // namespace

TEST_CASE("autotune presets: the valid base of the error cases parses", "[autotune]") {
  Preset p = parse_preset(preset(std::string(kAttn) + "," + kGemm), "models/custom.json");
  CHECK(p.ops.size() == 2);
  CHECK(p.ops[1].tp_split == "k");
  CHECK(p.ops[0].tp_split.empty());
}

TEST_CASE("autotune presets: bad input names the field path", "[autotune]") {
  // The example of the error convention.
  expect_error(preset(std::string(kAttn) + "," + attn_with(R"({"head_dim": 64, "num_q_heads": 8, "num_kv_heads": 8})", "attn.small") +
                      "," + kGemm + "," +
                      R"({"label": "x", "family": "xqa_decode", "problem": {"head_dim": "abc", "num_q_heads": 32, "num_kv_heads": 8}})"),
               R"(ops[3].problem.head_dim: expected a positive integer, got "abc")");
  expect_error(preset(kAttn, kBuckets, R"("nmae": "typo", )"), "nmae: unknown field (expected one of name, description");
  // A field given twice: refused at the repeat, not resolved to one of the two (another kernel, silently).
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "head_dim": 64})")),
               R"(expected a key not given before in this object, found '"' ("head_dim" repeats))");
  expect_error(R"({"buckets": )" + std::string(kBuckets) + R"(, "ops": [)" + kAttn + "]}", "name: required field missing");
  expect_error(R"({"name": "Custom Model", "buckets": )" + std::string(kBuckets) + R"(, "ops": [)" + kAttn + "]}",
               R"(name: expected a name of a-z, 0-9)");
  expect_error(R"({"name": "custom", "buckets": )" + std::string(kBuckets) + "}", "ops: required field missing");
  expect_error(preset(""), "ops: expected a non-empty array of ops, got []");
  expect_error(R"({"name": "custom", "buckets": )" + std::string(kBuckets) + R"(, "ops": {}})",
               "ops: expected a non-empty array of ops, got {}");
  // Every registered family is listed (this binary registers example_scale after the library's own).
  expect_error(preset(R"({"label": "attn", "family": "xqa", "problem": {}})"),
               R"(ops[0].family: expected one of "xqa_decode", "sparse_mla_decode", "mxfp4_gemm", )");
  expect_error(preset(R"({"label": "attn", "family": "xqa", "problem": {}})"), R"(, got "xqa")");
  expect_error(preset(R"({"label": "attn", "problem": {}})"), "ops[0].family: required field missing");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32})")),
               "ops[0].problem.num_kv_heads: required field missing (expected a positive integer)");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 0})")),
               "ops[0].problem.num_kv_heads: expected a positive integer, got 0");
  expect_error(preset(attn_with(R"({"head_dim": -64, "num_q_heads": 32, "num_kv_heads": 8})")),
               "ops[0].problem.head_dim: expected a positive integer, got -64");
  expect_error(preset(attn_with(R"({"head_dim": 128.5, "num_q_heads": 32, "num_kv_heads": 8})")),
               "ops[0].problem.head_dim: expected a positive integer, got 128.5");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "layout": "khd"})")),
               R"(ops[0].problem.layout: expected one of "hnd", "nhd", got "khd")");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "sinks": "yes"})")),
               R"(ops[0].problem.sinks: expected true or false, got "yes")");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "kv_dtype": "int8"})")),
               R"(ops[0].problem.kv_dtype: expected one of "bf16", "fp16", "fp8", got "int8")");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "window": 128})")),
               "ops[0].problem.window: unknown field (expected one of head_dim, num_q_heads");
  expect_error(preset(attn_with(R"({"head_dim": 128, "num_q_heads": 12, "num_kv_heads": 8})")),
               "ops[0].problem.num_q_heads: expected a multiple of num_kv_heads (8), got 12");
  expect_error(preset(attn_with("[128, 32, 8]")), "ops[0].problem: expected an object of problem fields, got [128,32,8]");
  expect_error(preset(std::string(kAttn) + "," + kAttn), R"(ops[1].label: expected a label no other op has, got "attn")");
  expect_error(preset(std::string(kAttn) + R"(, {"label": "g", "family": "xqa_decode", "tp_split": "n", "problem": {}})"),
               "ops[1].tp_split: unknown field");
  expect_error(preset(R"({"label": "g", "family": "mxfp4_gemm", "tp_split": "m", "problem": {"n": 64, "k": 64}})"),
               R"(ops[0].tp_split: expected one of "n", "k", "none", got "m")");
  expect_error(preset(R"({"label": "g", "family": "mxfp4_gemm", "problem": {"n": 64, "k": 64, "top_k": 4}})"),
               "ops[0].problem.top_k: expected at most num_experts, got 4");
  expect_error(preset(R"({"label": "m", "family": "sparse_mla_decode", "problem": {"num_heads": 128, "kv_lora_rank": 512, "rope_dim": 64}})"),
               "ops[0].problem.topk: required field missing");
  expect_error(preset(R"({"label": "a", "family": "xqa_decode", "arches": ["sm_90a", "hopper"], "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8}})"),
               R"(ops[0].arches[1]: expected an arch name like "sm_90a", got "hopper")");
  // Names no GPU has would drop the op from every warmup and check without a word.
  expect_error(preset(R"({"label": "a", "family": "xqa_decode", "arches": ["sm_999"], "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8}})"),
               "ops[0].arches[0]: 'sm_999' is not a GPU's compute capability (known: sm_70,");
  expect_error(preset(R"({"label": "a", "family": "xqa_decode", "arches": ["sm_80a"], "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8}})"),
               "ops[0].arches[0]: 'sm_80a': the 'a' variant exists only from sm_90 on");
  expect_error(preset(kAttn, R"({"batch": {"min": 8, "max": 4}, "seq_len": {"max": 8192}})"),
               "buckets.batch.max: expected an integer in 8..1073741824, got 4");
  // 2^30 + 1 would round up to 2^31, which wraps to a negative int bucket.
  expect_error(preset(kAttn, R"({"batch": {"max": 4}, "seq_len": {"max": 1073741825}})"),
               "buckets.seq_len.max: expected an integer in 1..1073741824, got 1073741825");
  expect_error(preset(kAttn, R"({"batch": {"max": 4}})"), "buckets.seq_len: required field missing");
  expect_error(preset(kAttn, R"({"batch": {"max": 4, "step": 2}, "seq_len": {"max": 8192}})"),
               "buckets.batch.step: unknown field (expected one of min, max)");
  expect_error(preset(kAttn, kBuckets, R"("tp": 3, )"), "ops[0].problem.num_q_heads: expected a multiple of tp (3), got 32");
  expect_error(preset(kAttn, kBuckets, R"("tp": 0, )"), "tp: expected a positive integer, got 0");
  expect_error(preset(kAttn, kBuckets, R"("spec_tokens": "2", )"), R"(spec_tokens: expected an integer >= 0, got "2")");
  expect_error(preset(kAttn, kBuckets, R"("description": 7, )"), "description: expected a string, got 7");
  expect_error(preset(kAttn, kBuckets, R"("spec_tokens": 300, )"), "spec_tokens: expected an integer in 0..255, got 300");
  expect_error("[1, 2]", "(document): expected a JSON object, got [1,2]");
  expect_error(R"({"name": "custom",, })", "(document): not valid JSON: JSON parse error at 1:19");
}
