// Preset files are read only when they are small regular files, and the documented `checked` field of a
// problem is accepted (docs/presets.md).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "autotune/presets.hpp"
#include "ktune/error.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

TEST_CASE("preset files: a size cap and regular files only, checked before reading", "[autotune][attack][cli]") {
  CHECK_THROWS_WITH(autotune::load_preset("/dev/zero"), Catch::Contains("/dev/zero: cannot read the preset file "
                                                                        "(not a regular file)"));
  test::TempDir dir;
  CHECK_THROWS_WITH(autotune::load_preset(dir.path().string()), Catch::Contains("not a regular file"));
  const std::string big = dir.file("big.json");
  {
    std::ofstream out(big, std::ios::binary);
    out.seekp(static_cast<std::streamoff>(autotune::kMaxPresetFileBytes));  // one byte over the cap, sparse
    out.put('}');
  }
  CHECK_THROWS_WITH(autotune::load_preset(big), Catch::Contains("larger than 16777216 bytes"));
}

TEST_CASE("presets accept the documented checked field of xqa_decode and sparse_mla_decode", "[autotune]") {
  const autotune::Preset p = autotune::parse_preset(R"({"name": "c", "description": "checked ops",
    "buckets": {"batch": {"max": 2}, "seq_len": {"max": 1024}},
    "ops": [{"label": "attn", "family": "xqa_decode",
             "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "checked": true}},
            {"label": "mla", "family": "sparse_mla_decode",
             "problem": {"num_heads": 128, "kv_lora_rank": 512, "rope_dim": 64, "topk": 2048, "checked": true}}]})",
                                                    "test");
  REQUIRE(p.ops.size() == 2);
  for (const auto& op : p.ops) CHECK_THAT(op.problem_json, Catch::Contains("\"checked\":true"));
  CHECK_THROWS_WITH(autotune::parse_preset(R"({"name": "c", "description": "",
    "buckets": {"batch": {"max": 2}, "seq_len": {"max": 1024}},
    "ops": [{"label": "attn", "family": "xqa_decode",
             "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "checked": 1}}]})", "test"),
                    Catch::Contains("ops[0].problem.checked: expected true or false, got 1"));
}
