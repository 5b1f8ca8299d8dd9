// example_scale behind the uniform FamilyInfo interface: the one entry that tells the CLI, the C API, Python's
// key building, the presets, the tuner, warmup and replay everything they ask of this family.
#include "example_family/family.hpp"

#include <fmt/format.h>

#include "c_op.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "problem_json.hpp"
#include "typed_family.hpp"

namespace ktune::example {
namespace {

using cache::Json;

// JSON members: cols (required), dtype ("f32" | "bf16", default "f32").
const std::vector<ProblemField>& fields() {
  using K = ProblemField::Kind;
  static const std::vector<ProblemField> all = {
      {"cols", K::positive_int, true, {}},
      {"dtype", K::choice, false, {"f32", "bf16"}},
  };
  return all;
}

std::string problem_from_json(const std::string& text) {
  const Json j = problem_json::checked(kFamily, fields(), text);
  Problem p;
  p.cols = problem_json::int_or(j, "cols", 0);
  p.dtype = problem_json::string_or(j, "dtype", "f32") == "bf16" ? ::ktune_common::kBF16 : ::ktune_common::kF32;
  p.validate();
  return p.key();
}

// The C op: CArgs -> Args, and the plan as JSON.
Args args_from_c(const Problem&, const CArgs& c) {
  Args a;
  a.x = c.x, a.out = c.out, a.rows = c.rows, a.alpha = c.alpha, a.config = c.config;
  return a;
}

std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key) {
  return make_c_op<Family, CArgs>(rt, Problem::from_key(problem_key), args_from_c);
}

// Work per call for warmup's host cap: the rows (bucket m).
int64_t work_tokens(const std::string&, const TuningBuckets& buckets) {
  int64_t rows = 1;
  for (const auto& [dim, value] : buckets)
    if (dim == "m") rows = value;
  return rows;
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = kFamily;
  f.description = "example: out = alpha * x over [rows, cols] (f32 or bf16); the reference family of docs/new_family.md";
  f.example_problems = [] { return std::vector<std::string>{problem_from_json(R"({"cols":4096,"dtype":"bf16"})")}; };
  f.problem_fields = fields();
  f.problem_from_json = problem_from_json;
  typed_family::fill_kernel_entries<Problem, Config>(f);
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(CArgs);
  f.tuning_dims = {"tokens"};  // rows per call, bucket m
  f.workload = make_workload;
  f.host_workload = make_host_workload;
  f.work_tokens = work_tokens;
  f.work_tokens_text = "rows";
  return f;
}

}  // namespace ktune::example
