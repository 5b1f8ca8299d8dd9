"""Problems the torch/GPU tests launch (bench/run_h200.sh python precompiles them for sm_90a on the CPU machine so
no JIT happens on the GPU). The README story's preset is warmed up separately (README_PRESET)."""

README_PRESET = dict(preset="llama-3.1-8b", max_batch=4, max_seq_len=1024)
# the README's problem: Llama-3.1-8B decode attention (what the preset holds)
README_PROBLEM = dict(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32)
# speculative decoding with everything optional switched on: 4 query tokens, causal, sinks, LSE
SPEC_PROBLEM = dict(head_dim=128, num_q_heads=16, num_kv_heads=4, page_size=16, max_q_len=4, mask="causal",
                    sinks=True, lse=True)
# FP8 KV cache, NHD, explicit draft mask, sliding window
FP8_PROBLEM = dict(head_dim=64, num_q_heads=8, num_kv_heads=2, page_size=32, layout="nhd", kv_dtype="fp8",
                   max_q_len=2, mask="explicit", sliding_window=True)
# a draft tree: 48 query tokens, an explicit mask of two words a row, LSE
TREE_PROBLEM = dict(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32, max_q_len=48, mask="explicit",
                    lse=True)
# the engine helpers' decode plan (test_engine.py): explicit draft mask, ragged, LSE
ENGINE_PROBLEM = dict(head_dim=128, num_q_heads=16, num_kv_heads=4, page_size=16, max_q_len=4, mask="explicit",
                      lse=True)
ALL = [README_PROBLEM, SPEC_PROBLEM, FP8_PROBLEM, ENGINE_PROBLEM, TREE_PROBLEM]
# sparse MLA decode (a TP-16 shard of DeepSeek V3.2's 128 heads, a short top-k to keep the test small)
MLA_PROBLEMS = [dict(num_heads=16, kv_lora_rank=512, rope_dim=64, topk=128, page_size=64, kv_dtype="fp8_ds_mla"),
                dict(num_heads=16, kv_lora_rank=512, rope_dim=64, topk=128, page_size=64, kv_dtype="bf16")]
# MXFP4 GEMMs: dense, and grouped over 4 experts (top 2)
MXFP4_PROBLEMS = [dict(n=256, k=512), dict(n=256, k=512, num_experts=4, top_k=2)]
