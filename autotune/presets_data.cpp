// The embedded model presets, in the format of docs/presets.md. Dimensions are the models' published
// configurations (config.json on their model cards); head counts are for the whole model and are divided by
// tp when a "-tpN" variant is loaded.
#include "autotune/preset_data.hpp"

namespace ktune::autotune::detail {
namespace {

// 32 layers, hidden 4096, 32 query / 8 KV heads of 128, 128k context.
const char* const kLlama31_8b = R"json({
  "name": "llama-3.1-8b",
  "description": "Llama 3.1 8B: 32 layers, hidden 4096, GQA 32 query / 8 KV heads, head_dim 128, 128k context",
  "buckets": {"batch": {"min": 1, "max": 256}, "seq_len": {"min": 512, "max": 131072}},
  "ops": [
    {"label": "attn", "family": "xqa_decode",
     "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "page_size": 32, "layout": "hnd",
                 "q_dtype": "bf16", "kv_dtype": "bf16", "out_dtype": "bf16"}}
  ]
})json";

// 80 layers, hidden 8192, 64 query / 8 KV heads of 128, 128k context.
const char* const kLlama31_70b = R"json({
  "name": "llama-3.1-70b",
  "description": "Llama 3.1 70B: 80 layers, hidden 8192, GQA 64 query / 8 KV heads, head_dim 128, 128k context",
  "buckets": {"batch": {"min": 1, "max": 256}, "seq_len": {"min": 512, "max": 131072}},
  "ops": [
    {"label": "attn", "family": "xqa_decode",
     "problem": {"head_dim": 128, "num_q_heads": 64, "num_kv_heads": 8, "page_size": 32, "layout": "hnd",
                 "q_dtype": "bf16", "kv_dtype": "bf16", "out_dtype": "bf16"}}
  ]
})json";

// 36 layers, hidden 2880, 64 query / 8 KV heads of 64, attention sinks on every layer, a 128-token sliding
// window on every other layer; MoE of 128 experts (4 per token), intermediate 2880, MXFP4 weights.
const char* const kGptOss120b = R"json({
  "name": "gpt-oss-120b",
  "description": "gpt-oss-120b: 36 layers, hidden 2880, GQA 64 query / 8 KV heads, head_dim 64, sinks on every layer, sliding window 128 on alternating layers, MXFP4 MoE 128 experts (top 4), intermediate 2880",
  "buckets": {"batch": {"min": 1, "max": 256}, "seq_len": {"min": 512, "max": 131072}},
  "ops": [
    {"label": "attn.full", "family": "xqa_decode",
     "problem": {"head_dim": 64, "num_q_heads": 64, "num_kv_heads": 8, "page_size": 32, "layout": "hnd",
                 "q_dtype": "bf16", "kv_dtype": "bf16", "out_dtype": "bf16", "sinks": true,
                 "sliding_window": false}},
    {"label": "attn.sliding", "family": "xqa_decode",
     "problem": {"head_dim": 64, "num_q_heads": 64, "num_kv_heads": 8, "page_size": 32, "layout": "hnd",
                 "q_dtype": "bf16", "kv_dtype": "bf16", "out_dtype": "bf16", "sinks": true,
                 "sliding_window": true}},
    {"label": "moe.gate_up", "family": "mxfp4_gemm", "tp_split": "n",
     "problem": {"n": 5760, "k": 2880, "num_experts": 128, "top_k": 4, "a_dtype": "bf16", "out_dtype": "bf16"}},
    {"label": "moe.down", "family": "mxfp4_gemm", "tp_split": "k",
     "problem": {"n": 2880, "k": 2880, "num_experts": 128, "top_k": 4, "a_dtype": "bf16", "out_dtype": "bf16"}}
  ]
})json";

// DeepSeek V3.2 sparse attention (MLA, absorbed): 128 heads attend to the top 2048 tokens chosen by the
// indexer; one latent KV head of kv_lora_rank 512 + rope 64 (Q/K dim 576, V dim 512) in the fp8_ds_mla cache.
// The SM120 kernels need 256-token pages, the others use 64; the host CPU (arch "host") tunes the 64-page op.
const char* const kDeepseekV32 = R"json({
  "name": "deepseek-v3.2",
  "description": "DeepSeek V3.2: 61 layers, hidden 7168, sparse MLA decode with 128 heads, kv_lora_rank 512 + rope 64, top-2048 tokens, fp8_ds_mla cache, 160k context",
  "buckets": {"batch": {"min": 1, "max": 256}, "seq_len": {"min": 2048, "max": 163840}},
  "ops": [
    {"label": "attn.sparse", "family": "sparse_mla_decode", "arches": ["sm_90a", "sm_100a", "sm_103a", "host"],
     "problem": {"num_heads": 128, "kv_lora_rank": 512, "rope_dim": 64, "topk": 2048, "page_size": 64,
                 "q_dtype": "bf16", "kv_dtype": "fp8_ds_mla"}},
    {"label": "attn.sparse.sm120", "family": "sparse_mla_decode", "arches": ["sm_120a", "sm_121a"],
     "problem": {"num_heads": 128, "kv_lora_rank": 512, "rope_dim": 64, "topk": 2048, "page_size": 256,
                 "q_dtype": "bf16", "kv_dtype": "fp8_ds_mla"}}
  ]
})json";

// 64 layers, hidden 5120, 64 query / 8 KV heads of 128, 40960-token context (max_position_embeddings).
const char* const kQwen3_32b = R"json({
  "name": "qwen3-32b",
  "description": "Qwen3 32B: 64 layers, hidden 5120, GQA 64 query / 8 KV heads, head_dim 128, 40k context",
  "buckets": {"batch": {"min": 1, "max": 256}, "seq_len": {"min": 512, "max": 40960}},
  "ops": [
    {"label": "attn", "family": "xqa_decode",
     "problem": {"head_dim": 128, "num_q_heads": 64, "num_kv_heads": 8, "page_size": 32, "layout": "hnd",
                 "q_dtype": "bf16", "kv_dtype": "bf16", "out_dtype": "bf16"}}
  ]
})json";

}  // namespace

const std::vector<EmbeddedPreset>& embedded_presets() {
  static const std::vector<EmbeddedPreset> all = {
      {"llama-3.1-8b", kLlama31_8b, {}},
      {"llama-3.1-70b", kLlama31_70b, {2, 4, 8}},
      {"gpt-oss-120b", kGptOss120b, {}},
      {"deepseek-v3.2", kDeepseekV32, {}},
      {"qwen3-32b", kQwen3_32b, {}},
  };
  return all;
}

const EmbeddedPreset* find_embedded(const std::string& name) {
  for (const auto& e : embedded_presets())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace ktune::autotune::detail
