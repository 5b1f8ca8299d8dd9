// xqa_decode behind the C API: ktune_xqa_args -> XqaDecodeArgs, and the prepared op of ktune_op_prepare.
#include "c_op.hpp"
#include "xqa_decode/family.hpp"

namespace ktune::xqa {

XqaDecodeArgs args_from_c(const Problem&, const ktune_xqa_args& a) {
  XqaDecodeArgs d;
  d.q = a.q, d.kv_cache = a.kv_cache, d.block_tables = a.block_tables, d.seq_lens = a.seq_lens;
  d.q_cu_seq_lens = a.q_cu_seq_lens, d.mask = a.mask, d.sinks = a.sinks, d.out = a.out, d.lse = a.lse;
  d.workspace = a.workspace, d.workspace_bytes = a.workspace_bytes, d.batch = a.batch;
  d.num_tokens = a.num_tokens, d.q_len_per_req = a.q_len_per_req, d.max_pages_per_req = a.max_pages_per_req;
  d.num_pages = a.num_pages, d.max_seq_len = a.max_seq_len, d.softmax_scale = a.softmax_scale;
  d.q_scale = a.q_scale, d.k_scale = a.k_scale, d.v_scale = a.v_scale, d.o_scale = a.o_scale;
  d.softcap = a.softcap, d.window_left = a.window_left, d.config = a.config, d.num_splits = a.num_splits;
  d.q_stride_token = a.q_stride_token, d.q_stride_head = a.q_stride_head;
  d.out_stride_token = a.out_stride_token, d.out_stride_head = a.out_stride_head;
  d.k_cache = a.k_cache, d.v_cache = a.v_cache, d.kv_page_stride = a.kv_page_stride;
  d.q_scale_ptr = a.q_scale_ptr, d.k_scale_ptr = a.k_scale_ptr, d.v_scale_ptr = a.v_scale_ptr;
  d.o_scale_ptr = a.o_scale_ptr;
  return d;
}

std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key) {
  return make_c_op<XqaDecodeFamily, ktune_xqa_args>(rt, Problem::from_key(problem_key), args_from_c);
}

}  // namespace ktune::xqa
