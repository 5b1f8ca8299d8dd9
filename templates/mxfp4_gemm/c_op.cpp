// mxfp4_gemm behind the C API: ktune_mxfp4_args -> Mxfp4GemmArgs (the weight's shape from the problem), and the
// prepared op of ktune_op_prepare.
#include "c_op.hpp"
#include "mxfp4_gemm/family.hpp"

namespace ktune::mxfp4 {

Mxfp4GemmArgs args_from_c(const Problem& p, const ktune_mxfp4_args& a) {
  Mxfp4GemmArgs d;
  d.a = a.a, d.lda = a.lda;
  d.weight = Mxfp4Weight{a.layout_version, p.n, p.k, p.num_experts, a.weight_packed, a.weight_scales};
  d.bias = a.bias, d.c = a.c, d.ldc = a.ldc, d.m = a.m, d.expert_offsets = a.expert_offsets, d.config = a.config;
  return d;
}

std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key) {
  return make_c_op<Mxfp4GemmFamily, ktune_mxfp4_args>(rt, Problem::from_key(problem_key), args_from_c);
}

}  // namespace ktune::mxfp4
