#include "templates/mxfp4_gemm/family.hpp"

#include <fmt/format.h>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "problem_json.hpp"
#include "typed_family.hpp"
#include "templates/mxfp4_gemm/spec.hpp"

namespace ktune::mxfp4 {
namespace {

using cache::Json;
constexpr const char* kFamily = "mxfp4_gemm";

// The problem's JSON members (docs/mxfp4_gemm.md, docs/presets.md).
const std::vector<ProblemField>& fields() {
  using K = ProblemField::Kind;
  static const std::vector<ProblemField> all = {
      {"n", K::positive_int, true, {}},
      {"k", K::positive_int, true, {}},
      {"num_experts", K::positive_int, false, {}},
      {"top_k", K::positive_int, false, {}},
      {"a_dtype", K::choice, false, {"bf16", "fp16"}},
      {"out_dtype", K::choice, false, {"bf16", "fp16"}},
  };
  return all;
}

// Every kernel of the family: a token picks at most num_experts experts.
void check_rules(const Json& j) {
  const int top_k = problem_json::int_or(j, "top_k", 1), experts = problem_json::int_or(j, "num_experts", 1);
  if (j.contains("top_k") && top_k > experts)
    throw ProblemFieldError(kFamily, "top_k", fmt::format("expected at most num_experts, got {}", top_k));
}

DType dtype_of(const std::string& s) { return s == "fp16" ? ::ktune_common::kFP16 : ::ktune_common::kBF16; }

std::string problem_from_json(const std::string& text) {
  using problem_json::int_or;
  using problem_json::string_or;
  const Json j = problem_json::checked(kFamily, fields(), text);
  check_rules(j);
  Problem p;
  p.n = int_or(j, "n", 0);
  p.k = int_or(j, "k", 0);
  p.num_experts = int_or(j, "num_experts", 1);
  p.top_k = int_or(j, "top_k", 1);
  p.a_dtype = dtype_of(string_or(j, "a_dtype", "bf16"));
  p.out_dtype = dtype_of(string_or(j, "out_dtype", string_or(j, "a_dtype", "bf16")));
  p.validate();
  return p.key();
}

// Tensor parallelism splits the weight by output columns (tp_split "n") or by the reduction (tp_split "k").
std::string shard(const std::string& problem, int tp, const std::string& tp_split) {
  Json j = Json::parse(problem);
  if (tp_split == "n") problem_json::divide(kFamily, j, "n", tp);
  if (tp_split == "k") problem_json::divide(kFamily, j, "k", tp);
  return j.dump();
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = kFamily;
  f.description = "W4A16 GEMM with OCP MXFP4 weights (e2m1 + e8m0 per 32), dense or grouped over MoE experts";
  f.problem_fields = fields();
  f.check_problem_fields = [](const std::string& json) { check_rules(Json::parse(json)); };
  f.problem_from_json = problem_from_json;
  typed_family::fill_kernel_entries<Problem, Config>(f);
  f.example_problems = [] {
    return std::vector<std::string>{
        problem_from_json(R"({"n":8192,"k":8192})"),
        problem_from_json(R"({"n":5760,"k":2880,"num_experts":128,"top_k":4})"),
    };
  };
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(ktune_mxfp4_args);
  f.tuning_dims = {"tokens"};
  f.workload = make_workload;
  f.host_workload = make_host_workload;
  f.shard_problem = shard;
  f.tp_splits = {"n", "k", "none"};
  return f;
}

}  // namespace ktune::mxfp4
