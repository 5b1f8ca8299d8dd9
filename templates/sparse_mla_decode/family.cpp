#include "templates/sparse_mla_decode/family.hpp"

#include <fmt/format.h>

#include <climits>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "templates/sparse_mla_decode/spec.hpp"

namespace ktune::mla {
namespace {

constexpr const char* kFamily = "sparse_mla_decode";

// JSON problem fields (docs/presets.md): num_heads, kv_lora_rank, rope_dim, topk (required), page_size,
// q_dtype ("bf16"), kv_dtype ("bf16" | "fp8_ds_mla"), max_q_len, checked. Unknown fields are errors.
std::string problem_from_json_unchecked(const std::string& text) {
  cache::Json j;
  try {
    j = cache::Json::parse(text);
  } catch (const cache::JsonError& e) {
    throw Error(Status::invalid_argument, kFamily, fmt::format("problem JSON: {}", e.what()));
  }
  if (!j.is_object()) throw Error(Status::invalid_argument, kFamily, "problem JSON: expected an object");
  static const char* known[] = {"num_heads", "kv_lora_rank", "rope_dim", "topk",     "page_size",
                                "q_dtype",   "kv_dtype",     "max_q_len", "checked"};
  for (const auto& [key, value] : j.members()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) throw Error(Status::invalid_argument, kFamily, fmt::format("problem JSON: unknown field '{}'", key));
  }
  auto int_field = [&](const char* k, int fallback) -> int {
    const cache::Json* v = j.find(k);
    if (!v) return fallback;
    if (!v->is_int() || v->as_int() < INT_MIN || v->as_int() > INT_MAX)
      throw Error(Status::invalid_argument, kFamily, fmt::format("{}: expected an integer, got {}", k, v->dump()));
    return static_cast<int>(v->as_int());
  };
  auto required_int = [&](const char* k) -> int {
    if (!j.contains(k)) throw Error(Status::invalid_argument, kFamily, fmt::format("problem JSON: missing '{}'", k));
    return int_field(k, 0);
  };
  Problem p;
  p.num_heads = required_int("num_heads");
  p.kv_lora_rank = required_int("kv_lora_rank");
  p.rope_dim = required_int("rope_dim");
  p.topk = required_int("topk");
  p.page_size = int_field("page_size", 64);
  const std::string q = j.get_string("q_dtype", "bf16");
  if (q != "bf16") throw Error(Status::invalid_argument, kFamily, fmt::format("q_dtype: expected \"bf16\", got \"{}\"", q));
  const std::string kv = j.get_string("kv_dtype", "fp8_ds_mla");
  if (kv == "fp8_ds_mla") p.kv_format = KvFormat::Fp8DsMla;
  else if (kv == "bf16") p.kv_format = KvFormat::Bf16;
  else throw Error(Status::invalid_argument, kFamily, fmt::format("kv_dtype: expected \"fp8_ds_mla\" or \"bf16\", got \"{}\"", kv));
  p.max_q_len = int_field("max_q_len", 1);
  p.checked = j.get_bool("checked", false);
  p.validate();
  return p.key();
}

std::string problem_from_json(const std::string& text) {
  try {
    return problem_from_json_unchecked(text);
  } catch (const cache::JsonError& e) {  // a field of the wrong type
    throw Error(Status::invalid_argument, kFamily, fmt::format("problem JSON: {}", e.what()));
  }
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = kFamily;
  f.description = "DeepSeek V3.2 sparse MLA decode (top-k slots, one latent KV head, fp8_ds_mla or BF16 cache, sinks)";
  f.canonical_problem = [](const std::string& key) { return Problem::from_key(key).key(); };
  f.problem_from_json = problem_from_json;
  f.default_config = [](const std::string& key, const Arch& arch) {
    return default_config(Problem::from_key(key), arch).key();
  };
  f.search_space = [](const std::string& key, const Arch& arch, const DeviceLimits& limits) {
    Problem p = Problem::from_key(key);
    std::vector<std::string> out;
    for (const Config& c : search_space(p, arch))
      if (can_implement(p, c, arch, limits).empty()) out.push_back(c.key());
    return out;
  };
  f.generate = [](const std::string& key, const std::string& config, const Arch& arch) {
    return generate(Problem::from_key(key), Config::from_key(config), arch);
  };
  f.example_problems = [] {
    return std::vector<std::string>{
        problem_from_json(R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64})"),
        problem_from_json(R"({"num_heads":16,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":256})"),
    };
  };
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(ktune_sparse_mla_args);
  return f;
}

}  // namespace ktune::mla
