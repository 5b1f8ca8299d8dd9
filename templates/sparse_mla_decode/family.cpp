#include "templates/sparse_mla_decode/family.hpp"

#include <fmt/format.h>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "problem_json.hpp"
#include "typed_family.hpp"
#include "templates/sparse_mla_decode/spec.hpp"

namespace ktune::mla {
namespace {

using cache::Json;
constexpr const char* kFamily = "sparse_mla_decode";

// The problem's JSON members (docs/sparse_mla_decode.md, docs/presets.md).
const std::vector<ProblemField>& fields() {
  using K = ProblemField::Kind;
  static const std::vector<ProblemField> all = {
      {"num_heads", K::positive_int, true, {}},
      {"kv_lora_rank", K::positive_int, true, {}},
      {"rope_dim", K::positive_int, true, {}},
      {"topk", K::positive_int, true, {}},
      {"page_size", K::positive_int, false, {}},
      {"q_dtype", K::choice, false, {"bf16"}},
      {"kv_dtype", K::choice, false, {"bf16", "fp8_ds_mla"}},
      {"max_q_len", K::positive_int, false, {}},
      {"checked", K::boolean, false, {}},
  };
  return all;
}

std::string problem_from_json(const std::string& text) {
  using problem_json::int_or;
  const Json j = problem_json::checked(kFamily, fields(), text);
  Problem p;
  p.num_heads = int_or(j, "num_heads", 0);
  p.kv_lora_rank = int_or(j, "kv_lora_rank", 0);
  p.rope_dim = int_or(j, "rope_dim", 0);
  p.topk = int_or(j, "topk", 0);
  p.page_size = int_or(j, "page_size", 64);
  p.kv_format = problem_json::string_or(j, "kv_dtype", "fp8_ds_mla") == "bf16" ? KvFormat::Bf16 : KvFormat::Fp8DsMla;
  p.max_q_len = int_or(j, "max_q_len", 1);
  p.checked = problem_json::bool_or(j, "checked", false);
  p.validate();
  return p.key();
}

// Tensor parallelism splits the query heads; the one latent KV head is replicated.
std::string shard(const std::string& problem, int tp, const std::string&) {
  Json j = Json::parse(problem);
  problem_json::divide(kFamily, j, "num_heads", tp);
  return j.dump();
}

// K draft tokens (MTP): every request has K + 1 independent query tokens.
std::string with_spec_tokens(const std::string& problem, int spec_tokens) {
  Json j = Json::parse(problem);
  j.set("max_q_len", spec_tokens + 1);
  return j.dump();
}

// Every query token reads its topk rows, however long the context: batch x max_q_len x topk.
int64_t work_tokens(const std::string& problem, const TuningBuckets& buckets) {
  int64_t batch = 1;
  for (const auto& [dim, value] : buckets)
    if (dim == "b") batch = value;
  const Json j = Json::parse(problem);
  return batch * problem_json::int_or(j, "max_q_len", 1) * problem_json::int_or(j, "topk", 1);
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = kFamily;
  f.description = "DeepSeek V3.2 sparse MLA decode (top-k slots, one latent KV head, fp8_ds_mla or BF16 cache, sinks)";
  f.problem_fields = fields();
  f.problem_from_json = problem_from_json;
  typed_family::fill_kernel_entries<Problem, Config>(f);
  f.has_shared_module = [](const std::string&, const Arch& arch) { return !arch.host; };
  f.example_problems = [] {
    return std::vector<std::string>{
        problem_from_json(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64})"),
        problem_from_json(R"({"num_heads":16,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":256})"),
    };
  };
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(ktune_sparse_mla_args);
  f.c_args_older_sizes = {kCArgsSizeBeforeStrides};
  f.tuning_dims = {"batch"};  // the work is bounded by topk, not by the KV length
  f.workload = make_workload;
  f.host_workload = make_host_workload;
  f.work_tokens = work_tokens;
  f.work_tokens_text = "batch x topk";
  f.shard_problem = shard;
  f.apply_spec_tokens = with_spec_tokens;
  return f;
}

}  // namespace ktune::mla
