// The default config of every family for a fixed list of problems, arches and (mxfp4_gemm) row counts, against
// the answers recorded from the code before the defaults became tables: rewriting how a default is chosen must
// not change which one is chosen. KTUNE_PRINT_DEFAULTS=1 prints the current table in the golden format.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "defaults_golden.hpp"
#include "ktune/arch.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace {

const char* const kArches[] = {"sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120a", "host"};

std::string answer(const std::function<std::string()>& f) {
  try {
    return f();
  } catch (const ktune::Error&) {
    return "error";
  }
}

std::vector<std::string> current_table() {
  std::vector<std::string> lines;
  const std::vector<std::pair<std::string, std::vector<std::string>>> problems = {
      {"xqa_decode",
       {R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32})",
        R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"kv_dtype":"fp8"})",
        R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"max_q_len":4,"mask":"causal"})",
        R"({"head_dim":64,"num_q_heads":64,"num_kv_heads":8,"page_size":16})",
        R"({"head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":32,"max_q_len":8,"mask":"causal"})"}},
      {"sparse_mla_decode",
       {R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64})",
        R"({"num_heads":16,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":256})",
        R"({"num_heads":64,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64})",
        R"({"num_heads":32,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64})",
        R"({"num_heads":128,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64,"kv_dtype":"bf16"})",
        R"({"num_heads":16,"kv_lora_rank":512,"rope_dim":64,"topk":2048,"page_size":64,"kv_dtype":"bf16"})"}},
      {"mxfp4_gemm",
       {R"({"n":8192,"k":8192})", R"({"n":5760,"k":2880,"num_experts":128,"top_k":4})",
        R"({"n":2880,"k":2880,"num_experts":128,"top_k":4})", R"({"n":2880,"k":2880})", R"({"n":256,"k":512})",
        R"({"n":8192,"k":8192,"a_dtype":"fp16"})", R"({"n":4096,"k":1024})"}}};
  for (const auto& [fam_name, jsons] : problems) {
    const ktune::FamilyInfo& fam = ktune::family(fam_name);
    for (const auto& j : jsons) {
      const std::string key = fam.problem_from_json(j);
      for (const char* a : kArches) {
        const ktune::Arch arch = ktune::Arch::parse(a);
        lines.push_back(fam_name + " " + a + " " + key + " m0 " +
                        answer([&] { return fam.default_config(key, arch); }));
        if (fam_name != "mxfp4_gemm") continue;
        const auto p = ktune::mxfp4::Problem::from_key(key);
        for (int m : {1, 2, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 1023, 1024, 4096})
          lines.push_back(fam_name + " " + a + " " + key + " m" + std::to_string(m) + " " +
                          answer([&] { return ktune::mxfp4::default_config(p, arch, m).key(); }));
      }
    }
  }
  return lines;
}

}  // namespace

TEST_CASE("default configs equal the recorded answers for every family, arch and row count", "[defaults]") {
  const std::vector<std::string> now = current_table();
  if (std::getenv("KTUNE_PRINT_DEFAULTS"))
    for (const auto& l : now) std::printf("%s\n", l.c_str());
  std::vector<std::string> want;
  std::istringstream in(ktune_test::kDefaultsGolden);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) want.push_back(l);
  REQUIRE(now.size() == want.size());
  for (size_t i = 0; i < now.size(); ++i) {
    INFO("row " << i);
    CHECK(now[i] == want[i]);
  }
}
