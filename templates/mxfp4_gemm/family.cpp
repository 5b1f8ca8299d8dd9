#include "templates/mxfp4_gemm/family.hpp"

#include <fmt/format.h>

#include <climits>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "templates/mxfp4_gemm/spec.hpp"

namespace ktune::mxfp4 {
namespace {

DType parse_dtype(const std::string& s, const char* field) {
  if (s == "bf16") return ::ktune_common::kBF16;
  if (s == "fp16") return ::ktune_common::kFP16;
  throw Error(Status::invalid_argument, "mxfp4_gemm", fmt::format("{}: expected \"bf16\" or \"fp16\", got \"{}\"", field, s));
}

// JSON problem fields (docs/presets.md): n, k (required), num_experts, top_k, a_dtype, out_dtype. Unknown fields
// are errors so a typo never silently builds the wrong kernel.
std::string problem_from_json_unchecked(const std::string& text) {
  cache::Json j;
  try {
    j = cache::Json::parse(text);
  } catch (const cache::JsonError& e) {
    throw Error(Status::invalid_argument, "mxfp4_gemm", fmt::format("problem JSON: {}", e.what()));
  }
  if (!j.is_object()) throw Error(Status::invalid_argument, "mxfp4_gemm", "problem JSON: expected an object");
  static const char* known[] = {"n", "k", "num_experts", "top_k", "a_dtype", "out_dtype"};
  for (const auto& [key, value] : j.members()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) throw Error(Status::invalid_argument, "mxfp4_gemm", fmt::format("problem JSON: unknown field '{}'", key));
  }
  auto int_field = [&](const char* k, int fallback) -> int {
    const cache::Json* v = j.find(k);
    if (!v) return fallback;
    if (!v->is_int() || v->as_int() < INT_MIN || v->as_int() > INT_MAX)
      throw Error(Status::invalid_argument, "mxfp4_gemm", fmt::format("{}: expected an integer, got {}", k, v->dump()));
    return static_cast<int>(v->as_int());
  };
  auto required_int = [&](const char* k) -> int {
    if (!j.contains(k)) throw Error(Status::invalid_argument, "mxfp4_gemm", fmt::format("problem JSON: missing '{}'", k));
    return int_field(k, 0);
  };
  Problem p;
  p.n = required_int("n");
  p.k = required_int("k");
  p.num_experts = int_field("num_experts", 1);
  p.top_k = int_field("top_k", 1);
  p.a_dtype = parse_dtype(j.get_string("a_dtype", "bf16"), "a_dtype");
  p.out_dtype = parse_dtype(j.get_string("out_dtype", j.get_string("a_dtype", "bf16")), "out_dtype");
  p.validate();
  return p.key();
}

std::string problem_from_json(const std::string& text) {
  try {
    return problem_from_json_unchecked(text);
  } catch (const cache::JsonError& e) {
    throw Error(Status::invalid_argument, "mxfp4_gemm", fmt::format("problem JSON: {}", e.what()));
  }
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = "mxfp4_gemm";
  f.description = "W4A16 GEMM with OCP MXFP4 weights (e2m1 + e8m0 per 32), dense or grouped over MoE experts";
  f.canonical_problem = [](const std::string& key) { return Problem::from_key(key).key(); };
  f.problem_from_json = problem_from_json;
  f.default_config = [](const std::string& key, const Arch& arch) {
    return default_config(Problem::from_key(key), arch).key();
  };
  f.search_space = [](const std::string& key, const Arch& arch, const DeviceLimits& limits) {
    Problem p = Problem::from_key(key);
    std::vector<std::string> out;
    // The default first (the tuner's baseline), but only where this device can run it.
    const Config dc = default_config(p, arch);
    const std::string d = dc.key();
    if (can_implement(p, dc, arch, limits).empty()) out.push_back(d);
    for (const Config& c : search_space(p, arch))
      if (c.key() != d && can_implement(p, c, arch, limits).empty()) out.push_back(c.key());
    return out;
  };
  f.generate = [](const std::string& key, const std::string& config, const Arch& arch) {
    return generate(Problem::from_key(key), Config::from_key(config), arch);
  };
  f.example_problems = [] {
    return std::vector<std::string>{
        problem_from_json(R"({"n":8192,"k":8192})"),
        problem_from_json(R"({"n":5760,"k":2880,"num_experts":128,"top_k":4})"),
    };
  };
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(ktune_mxfp4_args);
  return f;
}

}  // namespace ktune::mxfp4
