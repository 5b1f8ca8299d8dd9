#include "templates/xqa_decode/family.hpp"

#include <fmt/format.h>

#include <climits>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "templates/xqa_decode/spec.hpp"

namespace ktune::xqa {
namespace {

DType parse_dtype(const std::string& s, const char* field) {
  if (s == "bf16") return ::ktune_common::kBF16;
  if (s == "fp16") return ::ktune_common::kFP16;
  if (s == "fp8" || s == "e4m3") return ::ktune_common::kE4M3;
  throw Error(Status::invalid_argument, "xqa_decode",
              fmt::format("{}: expected \"bf16\", \"fp16\" or \"fp8\", got \"{}\"", field, s));
}

// JSON problem fields (docs/presets.md): head_dim, num_q_heads, num_kv_heads, page_size, layout, q_dtype,
// kv_dtype, out_dtype, max_q_len, mask, sinks, sliding_window, softcap, lse. Unknown fields are errors so a
// typo never silently compiles the wrong kernel.
std::string problem_from_json_unchecked(const std::string& text) {
  cache::Json j;
  try {
    j = cache::Json::parse(text);
  } catch (const cache::JsonError& e) {
    throw Error(Status::invalid_argument, "xqa_decode", fmt::format("problem JSON: {}", e.what()));
  }
  if (!j.is_object()) throw Error(Status::invalid_argument, "xqa_decode", "problem JSON: expected an object");
  static const char* known[] = {"head_dim", "num_q_heads", "num_kv_heads", "page_size", "layout", "q_dtype",
                                "kv_dtype", "out_dtype", "max_q_len", "mask", "sinks", "sliding_window",
                                "softcap", "lse", "checked"};
  for (const auto& [key, value] : j.members()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) throw Error(Status::invalid_argument, "xqa_decode", fmt::format("problem JSON: unknown field '{}'", key));
  }
  // An integer field, range-checked before it is narrowed to int (4294967424 must not become 128).
  auto int_field = [&](const char* k, int fallback) -> int {
    const cache::Json* v = j.find(k);
    if (!v) return fallback;
    if (!v->is_int() || v->as_int() < INT_MIN || v->as_int() > INT_MAX)
      throw Error(Status::invalid_argument, "xqa_decode",
                  fmt::format("{}: expected an integer, got {}", k, v->dump()));
    return static_cast<int>(v->as_int());
  };
  auto required_int = [&](const char* k) -> int {
    if (!j.contains(k)) throw Error(Status::invalid_argument, "xqa_decode", fmt::format("problem JSON: missing '{}'", k));
    return int_field(k, 0);
  };
  Problem p;
  p.head_dim = required_int("head_dim");
  p.num_q_heads = required_int("num_q_heads");
  p.num_kv_heads = required_int("num_kv_heads");
  p.page_size = int_field("page_size", 32);
  std::string layout = j.get_string("layout", "hnd");
  if (layout != "hnd" && layout != "nhd")
    throw Error(Status::invalid_argument, "xqa_decode", fmt::format("layout: expected \"hnd\" or \"nhd\", got \"{}\"", layout));
  p.layout = layout == "hnd" ? Layout::Hnd : Layout::Nhd;
  p.q_dtype = parse_dtype(j.get_string("q_dtype", "bf16"), "q_dtype");
  p.kv_dtype = parse_dtype(j.get_string("kv_dtype", "bf16"), "kv_dtype");
  p.out_dtype = parse_dtype(j.get_string("out_dtype", j.get_string("q_dtype", "bf16")), "out_dtype");
  p.max_q_len = int_field("max_q_len", 1);
  std::string mask = j.get_string("mask", p.max_q_len > 1 ? "causal" : "none");
  if (mask == "none") p.mask = MaskKind::None;
  else if (mask == "causal") p.mask = MaskKind::Causal;
  else if (mask == "explicit") p.mask = MaskKind::Explicit;
  else throw Error(Status::invalid_argument, "xqa_decode", fmt::format("mask: expected none, causal or explicit, got \"{}\"", mask));
  p.has_sinks = j.get_bool("sinks", false);
  p.sliding_window = j.get_bool("sliding_window", false);
  p.softcap = j.get_bool("softcap", false);
  p.write_lse = j.get_bool("lse", false);
  p.checked = j.get_bool("checked", false);
  p.validate();
  return p.key();
}

std::string problem_from_json(const std::string& text) {
  try {
    return problem_from_json_unchecked(text);
  } catch (const cache::JsonError& e) {  // a field of the wrong type
    throw Error(Status::invalid_argument, "xqa_decode", fmt::format("problem JSON: {}", e.what()));
  }
}

}  // namespace

FamilyInfo family_info() {
  FamilyInfo f;
  f.name = "xqa_decode";
  f.description = "paged decode attention (GQA, BF16/FP16/FP8 KV, spec-decode masks, sinks, sliding window, split-KV)";
  f.canonical_problem = [](const std::string& key) {
    Problem p = Problem::from_key(key);
    p.validate();
    return p.key();
  };
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
    Problem p = Problem::from_key(key);
    p.validate();
    return generate(p, Config::from_key(config), arch);
  };
  f.example_problems = [] {
    return std::vector<std::string>{
        problem_from_json(R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32})"),
        problem_from_json(R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"kv_dtype":"fp8"})"),
        problem_from_json(R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"max_q_len":4,"mask":"causal"})"),
    };
  };
  f.prepare_c_op = prepare_c_op;
  f.c_args_size = sizeof(ktune_xqa_args);
  return f;
}

}  // namespace ktune::xqa
