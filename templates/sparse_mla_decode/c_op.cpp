// sparse_mla_decode behind the C API: ktune_sparse_mla_args -> SparseMlaDecodeArgs, and the prepared op of
// ktune_op_prepare.
#include "c_op.hpp"
#include "sparse_mla_decode/family.hpp"

namespace ktune::mla {

SparseMlaDecodeArgs args_from_c(const Problem&, const ktune_sparse_mla_args& a) {
  SparseMlaDecodeArgs d;
  d.q = a.q, d.kv_cache = a.kv_cache, d.indices = a.indices, d.sinks = a.sinks, d.out = a.out;
  d.lse = a.lse, d.workspace = a.workspace, d.workspace_bytes = a.workspace_bytes;
  d.num_tokens = a.num_tokens, d.num_pages = a.num_pages, d.softmax_scale = a.softmax_scale;
  d.config = a.config, d.num_splits = a.num_splits;
  d.q_stride_token = a.q_stride_token, d.q_stride_head = a.q_stride_head;
  return d;
}

std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key) {
  return make_c_op<SparseMlaDecodeFamily, ktune_sparse_mla_args>(rt, Problem::from_key(problem_key), args_from_c);
}

}  // namespace ktune::mla
