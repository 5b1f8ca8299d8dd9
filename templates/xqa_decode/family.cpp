#include "templates/xqa_decode/family.hpp"

#include <fmt/format.h>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "problem_json.hpp"
#include "typed_family.hpp"
#include "templates/xqa_decode/spec.hpp"

namespace ktune::xqa {
namespace {

using cache::Json;
constexpr const char* kFamily = "xqa_decode";

// The problem's JSON members (docs/xqa_decode.md, docs/presets.md).
const std::vector<ProblemField>& fields() {
  using K = ProblemField::Kind;
  const std::vector<std::string> dtypes = {"bf16", "fp16", "fp8"};
  static const std::vector<ProblemField> all = {
      {"head_dim", K::positive_int, true, {}},
      {"num_q_heads", K::positive_int, true, {}},
      {"num_kv_heads", K::positive_int, true, {}},
      {"page_size", K::positive_int, false, {}},
      {"layout", K::choice, false, {"hnd", "nhd"}},
      {"q_dtype", K::choice, false, dtypes},
      {"kv_dtype", K::choice, false, dtypes},
      {"out_dtype", K::choice, false, dtypes},
      {"max_q_len", K::positive_int, false, {}},
      {"mask", K::choice, false, {"none", "causal", "explicit"}},
      {"sinks", K::boolean, false, {}},
      {"sliding_window", K::boolean, false, {}},
      {"softcap", K::boolean, false, {}},
      {"lse", K::boolean, false, {}},
      {"checked", K::boolean, false, {}},
  };
  return all;
}

// Rules every xqa_decode kernel shares; the kernel's own limits (head_dim 64/128/256, ...) stay in validate().
void check_rules(const Json& j) {
  const int q = problem_json::int_or(j, "num_q_heads", 1), kv = problem_json::int_or(j, "num_kv_heads", 1);
  if (q % kv != 0)
    throw ProblemFieldError(kFamily, "num_q_heads", fmt::format("expected a multiple of num_kv_heads ({}), got {}", kv, q));
}

DType dtype_of(const std::string& s) {
  if (s == "fp16") return ::ktune_common::kFP16;
  if (s == "fp8") return ::ktune_common::kE4M3;
  return ::ktune_common::kBF16;
}

std::string problem_from_json(const std::string& text) {
  using problem_json::bool_or;
  using problem_json::int_or;
  using problem_json::string_or;
  const Json j = problem_json::checked(kFamily, fields(), text);
  check_rules(j);
  Problem p;
  p.head_dim = int_or(j, "head_dim", 0);
  p.num_q_heads = int_or(j, "num_q_heads", 0);
  p.num_kv_heads = int_or(j, "num_kv_heads", 0);
  p.page_size = int_or(j, "page_size", 32);
  p.layout = string_or(j, "layout", "hnd") == "hnd" ? Layout::Hnd : Layout::Nhd;
  p.q_dtype = dtype_of(string_or(j, "q_dtype", "bf16"));
  p.kv_dtype = dtype_of(string_or(j, "kv_dtype", "bf16"));
  p.out_dtype = dtype_of(string_or(j, "out_dtype", string_or(j, "q_dtype", "bf16")));
  p.max_q_len = int_or(j, "max_q_len", 1);
  const std::string mask = string_or(j, "mask", p.max_q_len > 1 ? "causal" : "none");
  p.mask = mask == "none" ? MaskKind::None : mask == "causal" ? MaskKind::Causal : MaskKind::Explicit;
  p.has_sinks = bool_or(j, "sinks", false);
  p.sliding_window = bool_or(j, "sliding_window", false);
  p.softcap = bool_or(j, "softcap", false);
  p.write_lse = bool_or(j, "lse", false);
  p.checked = bool_or(j, "checked", false);
  p.validate();
  return p.key();
}

// Tensor parallelism splits the query heads; KV heads split while there are enough, past that each GPU keeps
// one (replicated) KV head.
std::string shard(const std::string& problem, int tp, const std::string&) {
  Json j = Json::parse(problem);
  problem_json::divide(kFamily, j, "num_q_heads", tp);
  const int kv = problem_json::int_or(j, "num_kv_heads", 1);
  if (kv % tp == 0) j.set("num_kv_heads", kv / tp);
  else if (tp % kv == 0) j.set("num_kv_heads", 1);
  else throw ProblemFieldError(kFamily, "num_kv_heads", fmt::format("expected a divisor or a multiple of tp ({}), got {}", tp, kv));
  return j.dump();
}

// K draft tokens: max_q_len = K + 1 and a causal mask over them (unless the problem asks for an explicit one);
// no mask without draft tokens.
std::string with_spec_tokens(const std::string& problem, int spec_tokens) {
  Json j = Json::parse(problem);
  j.set("max_q_len", spec_tokens + 1);
  const bool explicit_mask = problem_json::string_or(j, "mask", "") == "explicit";
  if (spec_tokens == 0) j.set("mask", "none");
  else if (!explicit_mask) j.set("mask", "causal");
  return j.dump();
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = kFamily;
  f.description = "paged decode attention (GQA, BF16/FP16/FP8 KV, spec-decode masks, sinks, sliding window, split-KV)";
  f.problem_fields = fields();
  f.check_problem_fields = [](const std::string& json) { check_rules(Json::parse(json)); };
  f.problem_from_json = problem_from_json;
  typed_family::fill_kernel_entries<Problem, Config>(f);
  f.has_shared_module = [](const std::string&, const Arch& arch) { return !arch.host; };
  f.example_problems = [] {
    return std::vector<std::string>{
        problem_from_json(R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32})"),
        problem_from_json(R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"kv_dtype":"fp8"})"),
        problem_from_json(R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"max_q_len":4,"mask":"causal"})"),
    };
  };
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(ktune_xqa_args);
  f.c_args_older_sizes = {kCArgsSizeBeforeForms};
  f.tuning_dims = {"batch", "seq_len"};
  f.workload = make_workload;
  f.host_workload = make_host_workload;
  f.shard_problem = shard;
  f.apply_spec_tokens = with_spec_tokens;
  f.engine_kv_dtypes = {"bf16", "fp16", "fp8"};
  return f;
}

}  // namespace ktune::xqa
